//! The rules of an instance, every kind together, swapped as one.
//!
//! An entry loads the set once (`ArcSwap::load`) and finds its resource's
//! rules through a hint cached on the resource node: the set's version and
//! the resource's position in it. While the set is unchanged that is a load
//! and a compare; after a swap the first entry of each resource looks its
//! name up once.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::flow::{CompiledFlow, FlowRuleSet};
use crate::node::ResourceNode;

/// Every rule kind of an instance, compiled.
#[derive(Debug, Default)]
pub(crate) struct RuleSet {
    /// Changes with every swap; 0 only for the empty set an instance starts
    /// with.
    pub(crate) version: u32,
    pub(crate) flow: Arc<FlowRuleSet>,
    index: HashMap<Box<str>, u32>,
    resources: Vec<ResourceRules>,
}

/// The parts a new set is built from.
pub(crate) struct RuleSetParts {
    pub(crate) flow: Arc<FlowRuleSet>,
}

/// The rules of one resource, every kind.
#[derive(Debug)]
pub(crate) struct ResourceRules {
    pub(crate) flow: Box<[Arc<CompiledFlow>]>,
    /// Origins that flow rules of the resource name (for `limit_app: other`).
    named_origins: Box<[Box<str>]>,
}

impl ResourceRules {
    /// Whether a flow rule of the resource names `origin`.
    pub(crate) fn names_origin(&self, origin: &str) -> bool {
        self.named_origins.iter().any(|name| **name == *origin)
    }
}

impl RuleSet {
    pub(crate) fn build(version: u32, parts: RuleSetParts) -> Self {
        let mut index = HashMap::new();
        let mut resources = Vec::new();
        for (resource, rules) in &parts.flow.by_resource {
            let mut named: Vec<Box<str>> = rules
                .iter()
                .filter(|c| c.rule().names_origin())
                .map(|c| c.rule().limit_app.as_str().into())
                .collect();
            named.sort();
            named.dedup();
            index.insert(resource.as_str().into(), resources.len() as u32);
            resources.push(ResourceRules {
                flow: rules.clone().into_boxed_slice(),
                named_origins: named.into_boxed_slice(),
            });
        }
        RuleSet {
            version,
            flow: parts.flow,
            index,
            resources,
        }
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
