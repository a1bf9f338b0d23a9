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

    /// Whether a check asked to hear of the entry's exit (see
    /// [`Outcome::hears_exit`]).
    #[inline]
    pub(crate) fn hears_exit(&self) -> bool {
        self.outcome.hears_exit()
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
