//! Reading the invocation tree: the contexts, their entrance nodes, and
//! each resource's node in a context.

use super::Sentinel;
use crate::node::invocation::DEFAULT_CONTEXT;
use crate::node::{ContextNode, Entrance};

impl Sentinel {
    /// The node of `resource` in `context` ([`DEFAULT_CONTEXT`] for entries
    /// that named none), if one was entered there.
    pub fn context_node(&self, context: &str, resource: &str) -> Option<ContextNode<'_>> {
        let nodes = &self.engine.parts.nodes;
        let resource = self.resource_node(resource)?;
        let id = match context {
            DEFAULT_CONTEXT => *resource.default_node.get()?,
            name => resource.context_node(nodes.tree.contexts.find(name)?)?,
        };
        Some(ContextNode {
            nodes,
            node: nodes.tree.nodes.get(id)?,
        })
    }

    /// Every context (the default one first) with the nodes entered at its top.
    pub fn entrances(&self) -> Vec<Entrance<'_>> {
        let nodes = &self.engine.parts.nodes;
        nodes
            .tree
            .contexts
            .iter()
            .map(|node| Entrance { nodes, node })
            .collect()
    }
}
