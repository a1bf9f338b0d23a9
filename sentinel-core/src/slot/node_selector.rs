//! `NodeSelectorSlot` ([`order::NODE_SELECTOR`](super::order::NODE_SELECTOR)):
//! the entry's context and its node in the invocation tree.
//!
//! An entry with a parent runs in its parent's context, its node under the
//! parent's; a top-level entry runs in the context it names (past the
//! context cap, and when it names none, in the default context), its node
//! under the context's entrance. Nodes and edges are made on first use
//! (see [`InvocationTree`]).

use crate::entry::Request;
use crate::node::invocation::{DEFAULT_CONTEXT_ID, InvocationTree};
use crate::node::nodes::Nodes;
use crate::node::{ResourceNode, StatisticNode};

/// Finds (or makes) the entry's node in the invocation tree.
pub(crate) struct NodeSelectorSlot;

/// Where an entry runs.
pub(crate) struct Selected<'s> {
    /// Its context's id.
    pub(crate) context: u32,
    /// Its node in the tree.
    pub(crate) node: u32,
    /// Its node's statistics: `None` in the default context, whose figures
    /// are derived from the resource node.
    pub(crate) context_stats: Option<&'s StatisticNode>,
}

impl NodeSelectorSlot {
    #[inline(always)]
    pub(crate) fn select<'s>(
        nodes: &'s Nodes,
        resource: &'s ResourceNode,
        request: &Request<'_, 's>,
    ) -> Selected<'s> {
        let tree: &InvocationTree = &nodes.tree;
        let config = &nodes.config;
        let (context, node) = match (request.parent, request.context) {
            (None, None) => (DEFAULT_CONTEXT_ID, tree.default_node(resource)),
            (Some(parent), _) => {
                let node = tree.nested_node(resource, parent.context, parent.node, config);
                (parent.context, node)
            }
            (None, Some(name)) => match tree.context(name) {
                Some(context) => (context, tree.top_node(resource, context, config)),
                // Past the context cap the entry still counts and is checked
                // on its resource, in the default context: a cap filled by
                // context names never switches a resource's rules off.
                None => (DEFAULT_CONTEXT_ID, tree.default_node(resource)),
            },
        };
        let context_stats = match context {
            DEFAULT_CONTEXT_ID => None,
            _ => tree.nodes.get(node).and_then(|n| n.stats.as_ref()),
        };
        Selected {
            context,
            node,
            context_stats,
        }
    }
}
