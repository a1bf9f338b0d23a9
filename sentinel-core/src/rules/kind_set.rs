//! `KindSet`: one kind's rules, compiled per resource, with the state of
//! unchanged rules carried across loads. A kind says how to compile one
//! rule ([`CompiledRule`]); the set compiles its list.

use std::collections::HashMap;
use std::sync::Arc;

use crate::rule::compiled::CompiledRule;

/// Maps keyed by resource name (foldhash: the names come from rule
/// files and APIs, and a load hashes each a few times).
pub(crate) type ByResource<V> = HashMap<String, V, foldhash::quality::RandomState>;

/// The rules of one kind, as loaded and compiled per resource in check
/// order.
#[derive(Debug)]
pub(crate) struct KindSet<C: CompiledRule> {
    pub(crate) rules: Vec<C::Rule>,
    pub(crate) by_resource: ByResource<Vec<Arc<C>>>,
}

impl<C: CompiledRule> Default for KindSet<C> {
    fn default() -> Self {
        KindSet {
            rules: Vec::new(),
            by_resource: ByResource::default(),
        }
    }
}

/// The compiled rules of one resource in the set being replaced, each
/// reused at most once.
struct Reusable<'o, C> {
    old: &'o [Arc<C>],
    /// Which of `old` are reused (allocated at the first reuse).
    taken: Vec<bool>,
    /// Where the next rule is looked for first: a list loaded again in the
    /// same order finds each rule there, in one comparison.
    next: usize,
}

impl<C: CompiledRule> Reusable<'_, C> {
    /// An unchanged compiled rule of `rule` not reused yet.
    fn take(&mut self, rule: &C::Rule) -> Option<Arc<C>> {
        let len = self.old.len();
        let at = (0..len).map(|i| (self.next + i) % len).find(|&i| {
            !self.taken.get(i).copied().unwrap_or(false) && self.old[i].source() == rule
        })?;
        if self.taken.is_empty() {
            self.taken = vec![false; len];
        }
        self.taken[at] = true;
        self.next = at + 1;
        Some(Arc::clone(&self.old[at]))
    }
}

/// A resource's compiled rules so far, and its old ones to reuse.
type Building<'o, C> = (Vec<Arc<C>>, Option<Reusable<'o, C>>);

impl<C: CompiledRule> KindSet<C> {
    /// Compiles `rules`, reusing the compiled rule (and its state) of every
    /// rule in `old` that is unchanged. Linear in the rules when a list is
    /// loaded again in its order (rules of a resource that moved are looked
    /// for among that resource's rules).
    pub(crate) fn compile(rules: Vec<C::Rule>, old: &KindSet<C>) -> Self {
        let mut building: ByResource<Building<'_, C>> = ByResource::default();
        for rule in &rules {
            let resource = C::resource(rule);
            // One hash for a resource's first rule (the usual one rule
            // per resource); a further rule's key is dropped.
            let (list, reusable) = building.entry(resource.to_owned()).or_insert_with(|| {
                let reusable = old.by_resource.get(resource).map(|old| Reusable {
                    old,
                    taken: Vec::new(),
                    next: 0,
                });
                (Vec::with_capacity(1), reusable)
            });
            let same = reusable.as_mut().and_then(|r| r.take(rule));
            list.push(same.unwrap_or_else(|| Arc::new(C::compile(rule))));
        }
        let by_resource = building
            .into_iter()
            .map(|(resource, (mut list, _))| {
                list.sort_by_key(|c| c.rank());
                (resource, list)
            })
            .collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{CompiledFlow, FlowRule};

    fn compiled(set: &KindSet<CompiledFlow>, resource: &str) -> Vec<Arc<CompiledFlow>> {
        set.by_resource[resource].clone()
    }

    #[test]
    fn unchanged_rules_are_reused_once_each_in_any_order() {
        let rules = vec![
            FlowRule::new("a", 1.0),
            FlowRule::new("a", 1.0),
            FlowRule::new("a", 2.0),
            FlowRule::new("b", 3.0),
        ];
        let first = KindSet::<CompiledFlow>::compile(rules.clone(), &KindSet::default());
        let old_a = compiled(&first, "a");
        // Reversed: every rule finds its compiled form, each used once.
        let mut reversed = rules.clone();
        reversed.reverse();
        let second = KindSet::compile(reversed, &first);
        let new_a = compiled(&second, "a");
        assert!(Arc::ptr_eq(&new_a[0], &old_a[2]));
        assert!(!Arc::ptr_eq(&new_a[1], &new_a[2]));
        for c in &new_a[1..] {
            assert!(old_a[..2].iter().any(|o| Arc::ptr_eq(o, c)));
        }
        assert!(Arc::ptr_eq(
            &compiled(&second, "b")[0],
            &compiled(&first, "b")[0]
        ));
        // A changed rule is compiled afresh; a third copy finds none left.
        let third = KindSet::compile(
            vec![
                FlowRule::new("a", 1.0),
                FlowRule::new("a", 1.0),
                FlowRule::new("a", 1.0),
            ],
            &second,
        );
        let third_a = compiled(&third, "a");
        let reused = third_a
            .iter()
            .filter(|c| new_a.iter().any(|o| Arc::ptr_eq(o, c)))
            .count();
        assert_eq!(reused, 2);
    }
}
