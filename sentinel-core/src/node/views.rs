//! Read-only views of the invocation tree: a node in a context, and a
//! context's entrance.

use std::fmt;

use arc_swap::ArcSwapOption;

use super::nodes::Nodes;
use super::statistic::{NodeSnapshot, StatisticNode};
use super::tree::{EntranceNode, Sums, TreeNode};

/// A read-only view of one node of the invocation tree.
#[derive(Clone, Copy)]
pub struct ContextNode<'s> {
    pub(crate) nodes: &'s Nodes,
    pub(crate) node: &'s TreeNode,
}

impl<'s> ContextNode<'s> {
    /// The resource this node counts.
    pub fn resource_name(&self) -> &'s str {
        self.nodes
            .resource_by_id(self.node.resource)
            .map_or("", |r| r.name())
    }

    /// The context this node belongs to.
    pub fn context_name(&self) -> &'s str {
        self.nodes.context_name(self.node.context)
    }

    /// Whether this node's statistics are derived (the default context).
    pub fn is_derived(&self) -> bool {
        self.node.stats.is_none()
    }

    /// The node's own statistics, when it keeps them (named contexts).
    pub fn stats(&self) -> Option<&'s StatisticNode> {
        self.node.stats.as_ref()
    }

    /// Everything the node reports at `now`. For the default context this is
    /// the resource's statistics less those of its named-context nodes; its
    /// `min_rt` is the resource's.
    pub fn snapshot(&self, now: u64) -> NodeSnapshot {
        self.sums(now).snapshot()
    }

    pub(crate) fn sums(&self, now: u64) -> Sums {
        if let Some(stats) = &self.node.stats {
            return Sums::of(stats, now);
        }
        let Some(resource) = self.nodes.resource_by_id(self.node.resource) else {
            return Sums::default();
        };
        let mut sums = Sums::of(resource.stats(), now);
        if let Some(others) = resource.context_nodes.load().as_ref() {
            for &node in others.values() {
                if let Some(stats) = self.nodes.tree_node(node).and_then(|n| n.stats.as_ref()) {
                    sums = sums.minus(&Sums::of(stats, now));
                }
            }
        }
        sums
    }

    /// The nodes entered while an entry of this node was active.
    pub fn children(&self) -> Vec<ContextNode<'s>> {
        self.nodes.tree_nodes(&self.node.children)
    }
}

impl fmt::Debug for ContextNode<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextNode")
            .field("context", &self.context_name())
            .field("resource", &self.resource_name())
            .field("derived", &self.is_derived())
            .finish()
    }
}

/// One context and the nodes entered directly in it.
#[derive(Clone, Copy)]
pub struct Entrance<'s> {
    pub(crate) nodes: &'s Nodes,
    pub(crate) node: &'s EntranceNode,
}

impl<'s> Entrance<'s> {
    /// The context's name.
    pub fn name(&self) -> &'s str {
        &self.node.name
    }

    /// The nodes entered at the top of this context.
    pub fn children(&self) -> Vec<ContextNode<'s>> {
        self.nodes.tree_nodes(&self.node.children)
    }

    /// The sum of the children's statistics, as Sentinel's `EntranceNode`.
    pub fn snapshot(&self, now: u64) -> NodeSnapshot {
        let children: Vec<NodeSnapshot> = self.children().iter().map(|c| c.snapshot(now)).collect();
        NodeSnapshot::sum(&children)
    }
}

impl fmt::Debug for Entrance<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entrance")
            .field("name", &self.name())
            .finish()
    }
}

impl Nodes {
    /// Views of the tree nodes of `list`.
    pub(crate) fn tree_nodes(&self, list: &ArcSwapOption<Vec<u32>>) -> Vec<ContextNode<'_>> {
        let ids = list.load_full();
        ids.iter()
            .flat_map(|ids| ids.iter())
            .filter_map(|&id| {
                Some(ContextNode {
                    nodes: self,
                    node: self.tree.nodes.get(id)?,
                })
            })
            .collect()
    }
}
