//! `KindSet`: one kind's rules, compiled per resource, with the state of
//! unchanged rules carried across loads. A kind says how to compile one
//! rule ([`CompiledRule`]); the set compiles its list.

use std::collections::HashMap;
use std::sync::Arc;

use crate::rule::compiled::CompiledRule;

/// The rules of one kind, as loaded and compiled per resource in check
/// order.
#[derive(Debug)]
pub(crate) struct KindSet<C: CompiledRule> {
    pub(crate) rules: Vec<C::Rule>,
    pub(crate) by_resource: HashMap<String, Vec<Arc<C>>>,
}

impl<C: CompiledRule> Default for KindSet<C> {
    fn default() -> Self {
        KindSet {
            rules: Vec::new(),
            by_resource: HashMap::new(),
        }
    }
}

impl<C: CompiledRule> KindSet<C> {
    /// Compiles `rules`, reusing the compiled rule (and its state) of every
    /// rule in `old` that is unchanged.
    pub(crate) fn compile(rules: Vec<C::Rule>, old: &KindSet<C>) -> Self {
        let mut reusable: HashMap<&str, Vec<&Arc<C>>> = HashMap::new();
        for (resource, list) in &old.by_resource {
            reusable.entry(resource).or_default().extend(list.iter());
        }
        let mut by_resource: HashMap<String, Vec<Arc<C>>> = HashMap::new();
        for rule in &rules {
            let resource = C::resource(rule);
            let same = reusable.get_mut(resource).and_then(|list| {
                let at = list.iter().position(|c| c.source() == rule)?;
                Some(Arc::clone(list.remove(at)))
            });
            let compiled = same.unwrap_or_else(|| Arc::new(C::compile(rule)));
            by_resource
                .entry(resource.to_owned())
                .or_default()
                .push(compiled);
        }
        for list in by_resource.values_mut() {
            list.sort_by_key(|c| c.rank());
        }
        KindSet { rules, by_resource }
    }

    /// The compiled rules of `resource`, in check order.
    pub(crate) fn of(&self, resource: &str) -> Box<[Arc<C>]> {
        self.by_resource
            .get(resource)
            .map(|list| list.clone().into_boxed_slice())
            .unwrap_or_default()
    }
}
