//! Where an entry runs: its [`Place`] (nodes, context, type, batch, start),
//! found once by the node selector and the cluster builder and read by
//! every later step, and the [`Placement`] of an admitted entry: its place
//! with what its checks left it holding, read by its exit, its nested
//! entries and its debug view.

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use super::{Holds, Outcome};
use crate::EntryType;
use crate::node::{OriginNode, ResourceNode, StatisticNode};

/// Where an entry runs: found once, copied as a whole.
#[derive(Clone, Copy)]
pub(crate) struct Place<'s> {
    pub(crate) resource: &'s ResourceNode,
    /// The entry's node in the invocation tree.
    pub(crate) node: u32,
    /// Its context's id.
    pub(crate) context: u32,
    /// Its node's statistics: `None` in the default context, whose figures
    /// are derived from the resource node.
    pub(crate) context_stats: Option<&'s StatisticNode>,
    pub(crate) origin: Option<&'s OriginNode>,
    pub(crate) entry_type: EntryType,
    pub(crate) batch: u32,
    /// When it entered (instance clock, ms).
    pub(crate) start_ms: u64,
}

/// An admitted entry: its place, and what it holds until it exits.
pub(crate) struct Placement<'s> {
    pub(crate) place: Place<'s>,
    /// The origin's name when it has no node of its own (past the origin
    /// cap it counts on the shared one), so the exit and nested entries
    /// still see it. Allocated only then.
    origin_uncounted: Option<Arc<str>>,
    /// What its checks decided: the nodes whose exact concurrency it
    /// holds, whether a check hears its exit.
    pub(crate) outcome: Outcome,
    /// Hot-parameter counts and half-open probes the entry holds, ended by
    /// the exit.
    pub(crate) holds: Holds,
    /// An error was recorded on the entry (`Entry::set_error`).
    pub(crate) error: AtomicBool,
}

impl Place<'_> {
    /// Calls `f` on every node the entry counts on: its resource's
    /// inline; its context's node, its origin's and, when inbound, the
    /// instance's `inbound` total, when there are any, in a loop.
    #[inline(always)]
    pub(crate) fn each_node(&self, inbound: &StatisticNode, f: impl Fn(&StatisticNode)) {
        Self::each_node_of(
            inbound,
            self.resource,
            self.context_stats,
            self.origin,
            self.entry_type,
            f,
        );
    }

    /// [`each_node`](Self::each_node) of an entry given by its parts (a
    /// checking context's).
    #[inline(always)]
    pub(crate) fn each_node_of(
        inbound: &StatisticNode,
        resource: &ResourceNode,
        context: Option<&StatisticNode>,
        origin: Option<&OriginNode>,
        entry_type: EntryType,
        f: impl Fn(&StatisticNode),
    ) {
        f(resource.stats());
        let inbound = (entry_type == EntryType::Inbound).then_some(inbound);
        match (context, origin, inbound) {
            (None, None, None) => {}
            // An inbound entry in the default context with no origin (a
            // server's usual request): inline, as the resource's.
            (None, None, Some(inbound)) => f(inbound),
            (context, origin, inbound) => each_other_node(context, origin, inbound, f),
        }
    }
}

/// The nodes of [`Place::each_node_of`] past the resource's, out of line.
#[inline(never)]
fn each_other_node(
    context: Option<&StatisticNode>,
    origin: Option<&OriginNode>,
    inbound: Option<&StatisticNode>,
    f: impl Fn(&StatisticNode),
) {
    if let Some(context) = context {
        f(context);
    }
    if let Some(origin) = origin {
        f(origin.stats());
    }
    if let Some(inbound) = inbound {
        f(inbound);
    }
}

impl<'s> Placement<'s> {
    /// An entry admitted at `place` for the caller `origin_name`, holding
    /// what its checks decided (`outcome`) and left it holding (`holds`).
    #[inline(always)]
    pub(crate) fn new(place: Place<'s>, origin_name: &str, outcome: Outcome, holds: Holds) -> Self {
        let origin_uncounted = match place.origin {
            None if !origin_name.is_empty() => Some(origin_name.into()),
            Some(node) if node.is_past_cap() => Some(origin_name.into()),
            _ => None,
        };
        Placement {
            place,
            origin_uncounted,
            outcome,
            holds,
            error: AtomicBool::new(false),
        }
    }

    /// Nodes whose exact concurrency the entry holds (flow concurrency
    /// rules), a bit each.
    #[inline]
    pub(crate) fn reserved(&self) -> u8 {
        self.outcome.reserved()
    }

    /// The caller's origin, or `""`.
    #[inline]
    pub(crate) fn origin_name(&self) -> &str {
        match (&self.origin_uncounted, self.place.origin) {
            (Some(name), _) => name,
            (None, Some(node)) => node.name(),
            (None, None) => "",
        }
    }
}

impl<'s> Deref for Placement<'s> {
    type Target = Place<'s>;

    #[inline(always)]
    fn deref(&self) -> &Place<'s> {
        &self.place
    }
}
