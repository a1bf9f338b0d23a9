//! `Entry`: the guard of one call inside a resource.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::node::{OriginNode, ResourceNode, StatisticNode};
use crate::slot::Holds;
use crate::{EntryType, Sentinel};

/// A call inside a resource. Dropping it (or calling [`exit`](Self::exit))
/// completes the call: its response time is measured from entry, success is
/// counted with the batch count, concurrency goes down, and an error recorded
/// with [`set_error`](Self::set_error) is counted once.
///
/// Guarded code that panics drops the entry as its thread unwinds: the call
/// completes with an error (whether or not one was recorded), every permit
/// and count it holds is given back, and a circuit breaker's half-open
/// probe it holds fails, opening the breaker again. The exit tells a panic
/// by [`std::thread::panicking`], so an entry made and dropped by a
/// destructor that runs during unwinding counts an error too.
///
/// `Entry` is `Send`: hold it across `.await`, drop it on another thread. A
/// future dropped while holding one still exits it. It borrows its instance
/// (`'s`); entries of the [`global`](crate::global) instance are `'static`.
#[must_use = "dropping an entry at once exits it; bind it with `let _entry = ...`"]
pub struct Entry<'s> {
    active: Option<Active<'s>>,
}

/// An entry that was counted and must be completed.
pub(crate) struct Active<'s> {
    sentinel: &'s Sentinel,
    pub(crate) resource: &'s ResourceNode,
    /// This entry's node in the invocation tree.
    pub(crate) node: u32,
    pub(crate) context: u32,
    pub(crate) context_stats: Option<&'s StatisticNode>,
    pub(crate) origin: Option<&'s OriginNode>,
    /// The origin's name when it has no node of its own (past the origin
    /// cap it counts on the shared one), so the exit and nested entries
    /// still see it. Allocated only then.
    origin_uncounted: Option<Arc<str>>,
    pub(crate) entry_type: EntryType,
    pub(crate) start_ms: u64,
    pub(crate) batch: u32,
    /// Nodes whose exact concurrency the entry holds (flow concurrency rules).
    pub(crate) reserved: u8,
    /// A check asked to hear of the entry's exit (see
    /// [`Outcome::hears_exit`](crate::slot::Outcome::hears_exit)).
    pub(crate) hears_exit: bool,
    /// Hot-parameter counts and half-open probes the entry holds, ended by
    /// the exit.
    pub(crate) holds: Holds,
    error: AtomicBool,
}

impl<'s> Active<'s> {
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(crate) fn new(
        sentinel: &'s Sentinel,
        resource: &'s ResourceNode,
        node: u32,
        context: u32,
        context_stats: Option<&'s StatisticNode>,
        origin: Option<&'s OriginNode>,
        origin_name: &str,
        entry_type: EntryType,
        start_ms: u64,
        batch: u32,
        reserved: u8,
        hears_exit: bool,
        holds: Holds,
    ) -> Self {
        let origin_uncounted = match origin {
            None if !origin_name.is_empty() => Some(origin_name.into()),
            Some(node) if node.is_past_cap() => Some(origin_name.into()),
            _ => None,
        };
        Active {
            sentinel,
            resource,
            node,
            context,
            context_stats,
            origin,
            origin_uncounted,
            entry_type,
            start_ms,
            batch,
            reserved,
            hears_exit,
            holds,
            error: AtomicBool::new(false),
        }
    }

    #[inline]
    pub(crate) fn has_error(&self) -> bool {
        self.error.load(Ordering::Relaxed)
    }

    /// The caller's origin, or `""`.
    pub(crate) fn origin_name(&self) -> &str {
        match (&self.origin_uncounted, self.origin) {
            (Some(name), _) => name,
            (None, Some(node)) => node.name(),
            (None, None) => "",
        }
    }
}

impl<'s> Entry<'s> {
    #[inline(always)]
    pub(crate) fn active(active: Active<'s>) -> Self {
        Entry {
            active: Some(active),
        }
    }

    /// An entry that was neither checked nor counted (instance switched off,
    /// or a cap reached): it exits without counting.
    #[inline]
    pub(crate) fn pass_through() -> Self {
        Entry { active: None }
    }

    /// This entry, if it is active in `sentinel` (a parent must be).
    pub(crate) fn active_in(&self, sentinel: &Sentinel) -> Option<&Active<'s>> {
        self.active
            .as_ref()
            .filter(|active| std::ptr::eq(active.sentinel, sentinel))
    }

    /// Completes the call now (the same as dropping the entry).
    pub fn exit(self) {
        drop(self);
    }

    /// Records that the call failed: when the entry exits, an exception is
    /// counted with its batch count (once, however many errors are set).
    /// Circuit breakers on error ratio and count see it.
    pub fn set_error<E: ?Sized>(&self, error: &E) {
        let _ = error;
        if let Some(active) = &self.active {
            if !active.error.swap(true, Ordering::Relaxed) {
                tracing::trace!(
                    resource = active.resource.name(),
                    error = std::any::type_name::<E>(),
                    "sentinel: error recorded"
                );
            }
        }
    }

    /// Whether an error was recorded.
    pub fn has_error(&self) -> bool {
        self.active.as_ref().is_some_and(Active::has_error)
    }

    /// The resource's name; `None` for an entry that passed unchecked and
    /// uncounted (instance switched off, or a cap reached).
    pub fn resource_name(&self) -> Option<&'s str> {
        self.active.as_ref().map(|active| active.resource.name())
    }

    /// Whether the entry was checked and is counted.
    pub fn is_counted(&self) -> bool {
        self.active.is_some()
    }
}

impl Drop for Entry<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(active) = &mut self.active {
            active.sentinel.exit(active);
        }
    }
}

impl fmt::Debug for Entry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.active {
            None => f.write_str("Entry(uncounted)"),
            Some(active) => f
                .debug_struct("Entry")
                .field("resource", &active.resource.name())
                .field("context", &active.sentinel.context_name(active.context))
                .field("origin", &active.origin_name())
                .field("entry_type", &active.entry_type)
                .field("batch", &active.batch)
                .field("start_ms", &active.start_ms)
                .field("error", &active.has_error())
                .finish(),
        }
    }
}
