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

use super::kind_set::{KindSet, List};
use crate::authority::{AuthorityRule, CompiledAuthority};
use crate::degrade::{CircuitBreaker, DegradeRule};
use crate::flow::{CompiledFlow, FlowRule};
use crate::node::ResourceNode;
use crate::param_flow::{CompiledParamFlow, ParamFlowRule};
use crate::system::{SystemLimits, SystemRule};

/// The compiled rules of every kind, the parts a set is built from.
#[derive(Clone, Debug, Default)]
pub(crate) struct RuleSetParts {
    pub(crate) flow: Arc<KindSet<CompiledFlow>>,
    pub(crate) authority: Arc<KindSet<CompiledAuthority>>,
    pub(crate) system: Arc<SystemLimits>,
    pub(crate) degrade: Arc<KindSet<CircuitBreaker>>,
    pub(crate) param_flow: Arc<KindSet<CompiledParamFlow>>,
}

/// Every rule kind of an instance, compiled.
#[derive(Debug, Default)]
pub(crate) struct RuleSet {
    /// Changes with every swap; 0 only for the empty set an instance starts
    /// with.
    pub(crate) version: u32,
    pub(crate) parts: RuleSetParts,
    index: HashMap<Arc<str>, u32, foldhash::quality::RandomState>,
    resources: Vec<ResourceRules>,
}

/// The rules of one resource, every kind: each kind's list shared with
/// its [`KindSet`].
#[derive(Debug)]
pub(crate) struct ResourceRules {
    pub(crate) authority: List<CompiledAuthority>,
    pub(crate) param_flow: List<CompiledParamFlow>,
    pub(crate) flow: List<CompiledFlow>,
    pub(crate) degrade: List<CircuitBreaker>,
    /// Origins that flow rules of the resource name (for `limit_app: other`).
    named_origins: Box<[Box<str>]>,
    /// A flow rule of the resource keeps a window of its own.
    pub(crate) flow_windows: bool,
}

impl ResourceRules {
    /// Whether a flow rule of the resource names `origin`.
    pub(crate) fn names_origin(&self, origin: &str) -> bool {
        self.named_origins.iter().any(|name| **name == *origin)
    }
}

impl RuleSet {
    pub(crate) fn build(version: u32, parts: RuleSetParts) -> Self {
        // Each resource once, in no particular order (a resource's place
        // is only ever found through `index`): the flow rules' resources
        // with their lists at hand, then the other kinds' not among them.
        let most = parts.flow.by_resource.len()
            + parts.authority.by_resource.len()
            + parts.degrade.by_resource.len()
            + parts.param_flow.by_resource.len();
        let mut index: HashMap<Arc<str>, u32, _> =
            HashMap::with_capacity_and_hasher(most, Default::default());
        let mut resources = Vec::with_capacity(most);
        let of = |resource: &str, flow: List<CompiledFlow>| {
            let mut named: Vec<Box<str>> = flow
                .iter()
                .filter(|c| c.rule().names_origin())
                .map(|c| c.rule().limit_app.as_str().into())
                .collect();
            named.sort();
            named.dedup();
            ResourceRules {
                authority: parts.authority.of(resource),
                degrade: parts.degrade.of(resource),
                param_flow: parts.param_flow.of(resource),
                flow_windows: flow.iter().any(|c| c.has_window()),
                flow,
                named_origins: named.into_boxed_slice(),
            }
        };
        for (resource, flow) in &parts.flow.by_resource {
            index.insert(Arc::clone(resource), resources.len() as u32);
            resources.push(of(resource, Arc::clone(flow)));
        }
        let others = (parts.authority.by_resource.keys())
            .chain(parts.degrade.by_resource.keys())
            .chain(parts.param_flow.by_resource.keys());
        for resource in others {
            if !index.contains_key(&**resource) {
                index.insert(Arc::clone(resource), resources.len() as u32);
                resources.push(of(resource, parts.flow.of(resource)));
            }
        }
        RuleSet {
            version,
            parts,
            index,
            resources,
        }
    }

    /// The flow rules, as loaded.
    pub(crate) fn flow_rules(&self) -> &[FlowRule] {
        &self.parts.flow.rules
    }

    /// The authority rules, as loaded.
    pub(crate) fn authority_rules(&self) -> &[AuthorityRule] {
        &self.parts.authority.rules
    }

    /// The degrade rules, as loaded.
    pub(crate) fn degrade_rules(&self) -> &[DegradeRule] {
        &self.parts.degrade.rules
    }

    /// The hot-parameter rules, as loaded.
    pub(crate) fn param_flow_rules(&self) -> &[ParamFlowRule] {
        &self.parts.param_flow.rules
    }

    /// The system rules, as loaded.
    pub(crate) fn system_rules(&self) -> &[SystemRule] {
        &self.parts.system.rules
    }

    /// The system limits, when any is set.
    #[inline]
    pub(crate) fn system(&self) -> Option<&SystemLimits> {
        Some(&*self.parts.system).filter(|limits| limits.is_on())
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
    use crate::rule::compiled::CompiledRule;

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
            assert!(Arc::ptr_eq(&rules.flow, list));
            assert_eq!(CompiledFlow::resource(rules.flow[0].rule()), &**resource);
        }
        let c = &set.resources[set.index["c"] as usize];
        assert!(c.flow.is_empty());
        assert!(Arc::ptr_eq(&c.degrade, &set.parts.degrade.by_resource["c"]));
    }
}
