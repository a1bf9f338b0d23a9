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
use crate::rule::present::Kinds;

/// Every rule kind of an instance, compiled.
#[derive(Debug, Default)]
pub(crate) struct RuleSet {
    /// Changes with every swap; 0 only for the empty set an instance starts
    /// with.
    pub(crate) version: u32,
    pub(crate) parts: RuleSetParts,
    index: HashMap<Arc<str>, u32, foldhash::quality::RandomState>,
    resources: Vec<ResourceRules>,
    /// The kinds over every inbound entry with rules in force.
    inbound: Kinds,
    /// What an adapter compiled from this set's gateway kinds, made by the
    /// first request that read the set (see `Sentinel::with_gateway_plan`).
    pub(crate) gateway_plan: std::sync::OnceLock<Arc<dyn std::any::Any + Send + Sync>>,
}

impl RuleSet {
    pub(crate) fn build(version: u32, parts: RuleSetParts) -> Self {
        /// Each resource once, in no particular order (a resource's place
        /// is only ever found through `index`).
        struct Resources<'p> {
            parts: &'p RuleSetParts,
            index: HashMap<Arc<str>, u32, foldhash::quality::RandomState>,
            resources: Vec<ResourceRules>,
        }
        impl EachKind for Resources<'_> {
            fn kind<K: Listed>(&mut self) {
                let part = K::part(self.parts);
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
        };
        each_kind(&mut all);
        let Resources {
            index, resources, ..
        } = all;
        let inbound = parts.inbound();
        RuleSet {
            version,
            index,
            resources,
            inbound,
            parts,
            gateway_plan: std::sync::OnceLock::new(),
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
        !self.inbound.is_empty()
    }

    /// The kinds over every inbound entry with rules in force.
    #[inline(always)]
    pub(crate) fn inbound(&self) -> Kinds {
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
    use crate::rule::present::KindBit;

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

    /// The chain looks only at the kinds an entry's resource has rules of
    /// (and, for an inbound entry, the kinds over every inbound entry).
    #[test]
    fn a_resource_marks_only_the_kinds_it_has_rules_of() {
        use crate::adaptive::AdaptiveKind;
        use crate::authority::AuthorityKind;
        use crate::degrade::DegradeKind;
        use crate::flow::FlowKind;
        use crate::param_flow::ParamFlowKind;
        use crate::system::{SystemKind, SystemLimits, SystemRule};

        let flow = KindSet::compile(
            vec![FlowRule::new("a", 1.0), FlowRule::new("b", 2.0)],
            &KindSet::default(),
        );
        let degrade = KindSet::compile(
            vec![DegradeRule::new("b", DegradeGrade::ErrorCount, 1.0)],
            &KindSet::default(),
        );
        let parts = RuleSetParts {
            flow: Arc::new(flow),
            degrade: Arc::new(degrade),
            ..RuleSetParts::default()
        };
        let set = RuleSet::build(1, parts.clone());
        let a = &set.resources[set.index["a"] as usize];
        let b = &set.resources[set.index["b"] as usize];
        assert_eq!(a.present(false), FlowKind::KIND);
        assert_eq!(a.present(true), FlowKind::KIND);
        let flow_and_degrade = FlowKind::KIND.with(DegradeKind::KIND);
        assert_eq!(b.present(false), flow_and_degrade);
        for absent in [
            AuthorityKind::KIND,
            SystemKind::KIND,
            ParamFlowKind::KIND,
            AdaptiveKind::KIND,
        ] {
            assert_eq!(b.present(true).bits() & absent.bits(), 0);
        }
        assert_eq!(set.inbound(), Kinds::NONE);
        assert!(!set.checks_inbound());

        let system = SystemLimits::compile(vec![SystemRule {
            qps: Some(10.0),
            ..SystemRule::default()
        }]);
        let set = RuleSet::build(
            2,
            RuleSetParts {
                system: Arc::new(system),
                ..parts
            },
        );
        let a = &set.resources[set.index["a"] as usize];
        assert_eq!(set.inbound(), SystemKind::KIND);
        assert_eq!(a.present(false), FlowKind::KIND);
        assert_eq!(a.present(true), FlowKind::KIND.with(SystemKind::KIND));
    }

    /// Each kind has its own bit, in chain order.
    #[test]
    fn every_kind_has_a_bit_of_its_own() {
        struct Bits(Vec<u8>);
        impl EachKind for Bits {
            fn kind<K: Listed>(&mut self) {
                self.0.push(K::KIND.bits());
            }
        }
        let mut bits = Bits(Vec::new());
        each_kind(&mut bits);
        let expected: Vec<u8> = (0..bits.0.len()).map(|i| 1 << i).collect();
        assert_eq!(bits.0, expected);
    }
}
