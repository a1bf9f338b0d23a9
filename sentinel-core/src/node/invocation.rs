//! `InvocationTree`: an instance's contexts and the nodes entries made under
//! them, as the node selector slot grows it.
//!
//! Reads are lock-free (the arena and each node's child list are read with
//! atomic loads); every change (a new node, a new edge) is made under one
//! lock, and checked again under it, so two entries racing to add the same
//! node or edge add it once.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;

use super::overflow::Overflow;
use super::registry::{Arena, Registry};
use super::reserved::RuleNames;
use super::tree::{EntranceNode, TreeNode, add_child, has_child};
use super::{ResourceNode, StatisticNode};
use crate::stat::StatConfig;

/// The name of the context of entries that name none, as in Sentinel.
pub const DEFAULT_CONTEXT: &str = "sentinel_default_context";

/// The id of the default context: made first by every tree.
pub(crate) const DEFAULT_CONTEXT_ID: u32 = 0;

/// The contexts of an instance (their entrance nodes, capped) and the tree
/// nodes under them.
pub(crate) struct InvocationTree {
    pub(crate) contexts: Registry<EntranceNode>,
    pub(crate) nodes: Arena<TreeNode>,
    /// The names the rules in force mention.
    names: RuleNames,
    /// Serialises changes to the tree (new nodes, new edges).
    lock: Mutex<()>,
}

impl InvocationTree {
    /// A tree with the default context, and room for `max_contexts` named
    /// ones whose names are at most `max_name_len` bytes.
    pub(crate) fn new(max_contexts: usize, max_name_len: usize, names: &RuleNames) -> Self {
        let contexts = Registry::new(
            max_contexts.saturating_add(1),
            max_name_len.max(DEFAULT_CONTEXT.len()),
            // The cap counts the default context: the log says so.
            Overflow::new("contexts (the default one included)"),
        );
        let default = contexts.get_or_create(
            DEFAULT_CONTEXT,
            |_, _| EntranceNode::new(DEFAULT_CONTEXT),
            |_| false,
        );
        debug_assert_eq!(default.map(|(id, _)| id), Some(DEFAULT_CONTEXT_ID));
        InvocationTree {
            contexts,
            nodes: Arena::default(),
            names: Arc::clone(names),
            lock: Mutex::new(()),
        }
    }

    /// The id of context `name`, made if new; `None` past the context cap
    /// unless a rule in force names it.
    #[inline]
    pub(crate) fn context(&self, name: &str) -> Option<u32> {
        let named = |name: &str| self.names.load().context(name);
        self.contexts
            .get_or_create(name, |_, _| EntranceNode::new(name), named)
            .map(|(id, _)| id)
    }

    /// The name of context `id`.
    pub(crate) fn context_name(&self, id: u32) -> &str {
        self.contexts.get(id).map_or(DEFAULT_CONTEXT, |c| &c.name)
    }

    /// The node of `resource` in the default context, made on first use.
    #[inline]
    pub(crate) fn default_node(&self, resource: &ResourceNode) -> u32 {
        match resource.default_top.get() {
            Some(&node) => node,
            None => self.new_default_node(resource, true),
        }
    }

    #[cold]
    fn new_default_node(&self, resource: &ResourceNode, at_top: bool) -> u32 {
        let _guard = self.lock.lock();
        let node = match resource.default_node.get() {
            Some(&node) => node,
            None => {
                let node = self
                    .nodes
                    .push(TreeNode::new(DEFAULT_CONTEXT_ID, resource.id(), None));
                let _ = resource.default_node.set(node);
                node
            }
        };
        if at_top {
            self.link_top(DEFAULT_CONTEXT_ID, node);
            let _ = resource.default_top.set(node);
        }
        node
    }

    /// The node of `resource` in `context`, made on first use (with
    /// windows of `config` in a named context).
    fn node_in_context(&self, resource: &ResourceNode, context: u32, config: &StatConfig) -> u32 {
        if context == DEFAULT_CONTEXT_ID {
            return match resource.default_node.get() {
                Some(&node) => node,
                None => self.new_default_node(resource, false),
            };
        }
        if let Some(node) = resource.context_node(context) {
            return node;
        }
        let _guard = self.lock.lock();
        if let Some(node) = resource.context_node(context) {
            return node;
        }
        let stats = StatisticNode::new(config);
        let node = self
            .nodes
            .push(TreeNode::new(context, resource.id(), Some(stats)));
        let mut map = resource
            .context_nodes
            .load()
            .as_deref()
            .cloned()
            .unwrap_or_default();
        map.insert(context, node);
        resource.context_nodes.store(Some(Arc::new(map)));
        node
    }

    /// A top-level entry's node: under the context's entrance node.
    pub(crate) fn top_node(
        &self,
        resource: &ResourceNode,
        context: u32,
        config: &StatConfig,
    ) -> u32 {
        let node = self.node_in_context(resource, context, config);
        if let Some(tree_node) = self.nodes.get(node) {
            if !tree_node.at_top.load(Ordering::Acquire) {
                let _guard = self.lock.lock();
                self.link_top(context, node);
            }
        }
        node
    }

    /// A nested entry's node: under its parent's node.
    pub(crate) fn nested_node(
        &self,
        resource: &ResourceNode,
        context: u32,
        parent: u32,
        config: &StatConfig,
    ) -> u32 {
        let node = self.node_in_context(resource, context, config);
        if let Some(parent) = self.nodes.get(parent) {
            if !has_child(&parent.children, node) {
                let _guard = self.lock.lock();
                add_child(&parent.children, node);
            }
        }
        node
    }

    /// Hangs `node` under the entrance of `context`. Holds the lock.
    fn link_top(&self, context: u32, node: u32) {
        let (Some(entrance), Some(tree_node)) = (self.contexts.get(context), self.nodes.get(node))
        else {
            return;
        };
        if !tree_node.at_top.load(Ordering::Acquire) {
            add_child(&entrance.children, node);
            tree_node.at_top.store(true, Ordering::Release);
        }
    }
}
