//! `Nodes`: an instance's nodes, the component every layer that counts or
//! reads statistics is handed: the resource registry, the invocation tree,
//! the inbound total, the origin cap and the names the rules in force
//! mention.

use std::sync::Arc;

use super::invocation::InvocationTree;
use super::overflow::OriginCap;
use super::registry::Registry;
use super::reserved::RuleNames;
use super::tree::TreeNode;
use super::{ResourceNode, StatisticNode};
use crate::stat::StatConfig;

/// An instance's nodes and what making them is bounded by.
pub(crate) struct Nodes {
    /// The windows of every node.
    pub(crate) config: StatConfig,
    pub(crate) resources: Registry<ResourceNode>,
    pub(crate) tree: InvocationTree,
    /// Every inbound entry's statistics (system rules read them).
    pub(crate) inbound: StatisticNode,
    pub(crate) origin_cap: Arc<OriginCap>,
    pub(crate) max_name_len: usize,
    /// The names the rules in force mention, consulted when a node is made.
    pub(crate) names: RuleNames,
}

impl Nodes {
    /// The node of `name`, made if new; `None` past the resource cap (which
    /// is counted and logged once).
    pub(crate) fn resolve(&self, name: &str) -> Option<&ResourceNode> {
        let node = self.resolve_quietly(name);
        if node.is_none() {
            self.resources.refuse(name);
        }
        node
    }

    /// As [`resolve`](Self::resolve), without counting a refusal (a handle
    /// counts one per entry instead).
    pub(crate) fn resolve_quietly(&self, name: &str) -> Option<&ResourceNode> {
        let (config, origin_cap) = (&self.config, &self.origin_cap);
        let named = |name: &str| self.names.load().resource(name);
        self.resources
            .try_get_or_create(
                name,
                |id, named| ResourceNode::new(name, id, config, origin_cap, named),
                named,
            )
            .map(|(_, node)| node)
    }

    /// The node of a handle made past the resource cap: a rule loaded since
    /// may name it (then it is made now). Otherwise the entry is refused a
    /// node (counted).
    #[cold]
    pub(crate) fn resolve_late(&self, name: &str) -> Option<&ResourceNode> {
        self.resolve(name)
    }

    pub(crate) fn resource_id(&self, name: &str) -> Option<u32> {
        self.resources.find(name)
    }

    pub(crate) fn resource_by_id(&self, id: u32) -> Option<&ResourceNode> {
        self.resources.get(id)
    }

    /// The node of resource `name`, if it has been entered.
    pub(crate) fn resource_node(&self, name: &str) -> Option<&ResourceNode> {
        self.resources.get(self.resources.find(name)?)
    }

    pub(crate) fn tree_node(&self, id: u32) -> Option<&TreeNode> {
        self.tree.nodes.get(id)
    }

    pub(crate) fn context_name(&self, id: u32) -> &str {
        self.tree.context_name(id)
    }
}
