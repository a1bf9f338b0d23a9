//! Reading the invocation tree: the contexts, their entrance nodes, and
//! each resource's node in a context.

use super::Sentinel;
use crate::node::invocation::DEFAULT_CONTEXT;
use crate::node::tree::TreeNode;
use crate::node::{ContextNode, Entrance};

impl Sentinel {
    /// The node of `resource` in `context` ([`DEFAULT_CONTEXT`] for entries
    /// that named none), if one was entered there.
    pub fn context_node(&self, context: &str, resource: &str) -> Option<ContextNode<'_>> {
        let resource = self.resource_node(resource)?;
        let id = match context {
            DEFAULT_CONTEXT => *resource.default_node.get()?,
            name => resource.context_node(self.tree.contexts.find(name)?)?,
        };
        Some(ContextNode {
            sentinel: self,
            node: self.tree.nodes.get(id)?,
        })
    }

    /// Every context (the default one first) with the nodes entered at its top.
    pub fn entrances(&self) -> Vec<Entrance<'_>> {
        self.tree
            .contexts
            .iter()
            .map(|node| Entrance {
                sentinel: self,
                node,
            })
            .collect()
    }

    pub(crate) fn tree_node(&self, id: u32) -> Option<&TreeNode> {
        self.tree.nodes.get(id)
    }

    pub(crate) fn tree_nodes(
        &self,
        list: &arc_swap::ArcSwapOption<Vec<u32>>,
    ) -> Vec<ContextNode<'_>> {
        let ids = list.load_full();
        ids.iter()
            .flat_map(|ids| ids.iter())
            .filter_map(|&id| {
                Some(ContextNode {
                    sentinel: self,
                    node: self.tree.nodes.get(id)?,
                })
            })
            .collect()
    }

    pub(crate) fn context_name(&self, id: u32) -> &str {
        self.tree.context_name(id)
    }
}
