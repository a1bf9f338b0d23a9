//! What a slot sees of an entry.

use std::fmt;

use super::placement::{Place, Placement};
use crate::engine::parts::Parts;
use crate::node::{OriginNode, ResourceNode, StatisticNode};
use crate::{BlockError, BlockKind, EntryType, ParamValue};

/// An entry on its way through the chain.
pub struct EntryContext<'a> {
    pub(crate) resource: &'a ResourceNode,
    pub(crate) entry_type: EntryType,
    pub(crate) batch: u32,
    pub(crate) origin: Option<&'a OriginNode>,
    pub(crate) origin_name: &'a str,
    /// The context's id; its name is looked up when asked for.
    pub(crate) context: u32,
    pub(crate) parts: &'a Parts,
    pub(crate) context_stats: Option<&'a StatisticNode>,
    pub(crate) args: &'a [ParamValue],
    pub(crate) now_ms: u64,
}

impl<'a> EntryContext<'a> {
    /// Calls `f` on every node the entry counts on (see
    /// [`Place::each_node`](super::placement::Place::each_node)).
    #[inline(always)]
    pub(crate) fn each_node(&self, f: impl Fn(&StatisticNode)) {
        Place::each_node_of(
            &self.parts.nodes.inbound,
            self.resource,
            self.context_stats,
            self.origin,
            self.entry_type,
            f,
        );
    }

    /// The resource's name.
    pub fn resource_name(&self) -> &'a str {
        self.resource.name()
    }

    /// The resource's node: its statistics over every context and origin.
    pub fn resource(&self) -> &'a ResourceNode {
        self.resource
    }

    /// Inbound (a request into this service) or outbound.
    pub fn entry_type(&self) -> EntryType {
        self.entry_type
    }

    /// How many permits the entry asks for.
    pub fn batch_count(&self) -> u32 {
        self.batch
    }

    /// The caller's origin, or `""` when none was given.
    pub fn origin(&self) -> &'a str {
        self.origin_name
    }

    /// The origin's node, when an origin was given (past the origin cap,
    /// the node that origins past it share).
    pub fn origin_node(&self) -> Option<&'a OriginNode> {
        self.origin
    }

    /// The context's name.
    pub fn context_name(&self) -> &'a str {
        self.parts.nodes.context_name(self.context)
    }

    /// The statistics of this resource in this context, when the context is
    /// a named one (the default context's are derived; see
    /// [`ContextNode`](crate::node::ContextNode)).
    pub fn context_stats(&self) -> Option<&'a StatisticNode> {
        self.context_stats
    }

    /// The arguments given with the entry.
    pub fn args(&self) -> &'a [ParamValue] {
        self.args
    }

    /// The time of the entry, in milliseconds on the instance clock.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }

    /// A block of `kind` on this resource, without a rule.
    pub fn block(&self, kind: BlockKind) -> BlockError {
        BlockError::new(kind, self.resource.name_arc().clone(), None)
    }
}

impl fmt::Debug for EntryContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EntryContext")
            .field("resource", &self.resource_name())
            .field("entry_type", &self.entry_type)
            .field("batch", &self.batch)
            .field("origin", &self.origin_name)
            .field("context", &self.context_name())
            .field("args", &self.args)
            .field("now_ms", &self.now_ms)
            .finish()
    }
}

/// An entry that passed, completing.
pub struct ExitContext<'a> {
    /// The entry's record: where it ran, its caller.
    pub(crate) placement: &'a Placement<'a>,
    pub(crate) rt_ms: u64,
    pub(crate) error: bool,
    pub(crate) now_ms: u64,
}

impl<'a> ExitContext<'a> {
    /// The resource's name.
    pub fn resource_name(&self) -> &'a str {
        self.placement.resource.name()
    }

    /// The resource's node.
    pub fn resource(&self) -> &'a ResourceNode {
        self.placement.resource
    }

    /// Inbound or outbound.
    pub fn entry_type(&self) -> EntryType {
        self.placement.entry_type
    }

    /// How many permits the entry held.
    pub fn batch_count(&self) -> u32 {
        self.placement.batch
    }

    /// The caller's origin, or `""`.
    pub fn origin(&self) -> &'a str {
        self.placement.origin_name()
    }

    /// The origin's node, when an origin was given (past the origin cap,
    /// the node that origins past it share).
    pub fn origin_node(&self) -> Option<&'a OriginNode> {
        self.placement.origin
    }

    /// Milliseconds from entry to exit.
    pub fn rt_ms(&self) -> u64 {
        self.rt_ms
    }

    /// Whether an error was recorded on the entry.
    pub fn has_error(&self) -> bool {
        self.error
    }

    /// The time of the exit, in milliseconds on the instance clock.
    pub fn now_ms(&self) -> u64 {
        self.now_ms
    }
}

impl fmt::Debug for ExitContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExitContext")
            .field("resource", &self.resource_name())
            .field("rt_ms", &self.rt_ms)
            .field("error", &self.error)
            .field("now_ms", &self.now_ms)
            .finish()
    }
}
