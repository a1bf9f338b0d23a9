//! `RuleSet`: the compiled rules of every kind, swapped as one, with each
//! resource's rules gathered for the hot path.
//!
//! An entry loads the set once and finds its resource's rules through a
//! hint cached on the resource node: the set's version and the resource's
//! position in it. While the set is unchanged that is a load and a compare;
//! after a swap the first entry of each resource looks its name up once.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::list::{EachKind, Listed, ResourceRules, RuleSetParts, each_kind};
use crate::node::ResourceNode;
use crate::rule::kind::CompiledKind;

/// Every rule kind of an instance, compiled.
#[derive(Debug, Default)]
pub(crate) struct RuleSet {
    /// Changes with every swap; 0 only for the empty set an instance starts
    /// with.
    pub(crate) version: u32,
    pub(crate) parts: RuleSetParts,
    index: HashMap<Arc<str>, u32, foldhash::quality::RandomState>,
    resources: Vec<ResourceRules>,
    /// A kind over every inbound entry has rules in force.
    inbound: bool,
}

impl RuleSet {
    pub(crate) fn build(version: u32, parts: RuleSetParts) -> Self {
        /// Each resource once, in no particular order (a resource's place
        /// is only ever found through `index`).
        struct Resources<'p> {
            parts: &'p RuleSetParts,
            index: HashMap<Arc<str>, u32, foldhash::quality::RandomState>,
            resources: Vec<ResourceRules>,
            inbound: bool,
        }
        impl EachKind for Resources<'_> {
            fn kind<K: Listed>(&mut self) {
                let part = K::part(self.parts);
                self.inbound |= part.checks_inbound();
                for resource in part.resources() {
                    if !self.index.contains_key(&**resource) {
                        let at = self.resources.len() as u32;
                        self.index.insert(Arc::clone(resource), at);
                        self.resources.push(ResourceRules::of(self.parts, resource));
                    }
                }
            }
        }
        let mut all = Resources {
            parts: &parts,
            index: HashMap::default(),
            resources: Vec::new(),
            inbound: false,
        };
        each_kind(&mut all);
        let Resources {
            index,
            resources,
            inbound,
            ..
        } = all;
        RuleSet {
            version,
            index,
            resources,
            inbound,
            parts,
        }
    }

    /// Kind `K`'s rules, as loaded.
    pub(crate) fn rules_of<K: Listed>(&self) -> &[K::Rule] {
        K::part(&self.parts).rules()
    }

    /// Whether every inbound entry has something to check (system limits
    /// are set).
    #[inline]
    pub(crate) fn checks_inbound(&self) -> bool {
        self.inbound
    }

    /// The rules of `node`'s resource, if it has any.
    #[inline]
    pub(crate) fn for_resource(&self, node: &ResourceNode) -> Option<&ResourceRules> {
        if self.resources.is_empty() {
            return None;
        }
        let hint = node.rules_hint.load(Ordering::Relaxed);
        if (hint >> 32) as u32 == self.version {
            return match hint as u32 {
                0 => None,
                i => self.resources.get(i as usize - 1),
            };
        }
        self.look_up(node)
    }

    #[cold]
    fn look_up(&self, node: &ResourceNode) -> Option<&ResourceRules> {
        let position = self.index.get(node.name()).copied();
        let slot = position.map_or(0, |i| u64::from(i) + 1);
        node.rules_hint
            .store(u64::from(self.version) << 32 | slot, Ordering::Relaxed);
        self.resources.get(position? as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::degrade::{DegradeGrade, DegradeRule};
    use crate::flow::{CompiledFlow, FlowRule};
    use crate::rule::compiled::CompiledRule;
    use crate::rule::kind_set::KindSet;

    /// A set is built per load of any kind: a kind's per-resource lists
    /// are shared with it, not copied resource by resource.
    #[test]
    fn resource_lists_are_shared_with_the_kind_sets_not_copied() {
        let flow = KindSet::compile(
            vec![FlowRule::new("a", 1.0), FlowRule::new("b", 2.0)],
            &KindSet::default(),
        );
        let degrade = KindSet::compile(
            vec![DegradeRule::new("c", DegradeGrade::ErrorCount, 1.0)],
            &KindSet::default(),
        );
        let parts = RuleSetParts {
            flow: Arc::new(flow),
            degrade: Arc::new(degrade),
            ..RuleSetParts::default()
        };
        let set = RuleSet::build(1, parts);
        for (resource, list) in &set.parts.flow.by_resource {
            let rules = &set.resources[set.index[&**resource] as usize];
            assert!(Arc::ptr_eq(rules.flow.list(), list));
            assert_eq!(CompiledFlow::resource(rules.flow[0].rule()), &**resource);
        }
        let c = &set.resources[set.index["c"] as usize];
        assert!(c.flow.is_empty());
        assert!(Arc::ptr_eq(&c.degrade, &set.parts.degrade.by_resource["c"]));
    }
}
