//! `Entry`: the guard of one call inside a resource.

use std::fmt;
use std::sync::atomic::Ordering;

use crate::engine::Engine;
use crate::slot::placement::Placement;

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

/// An entry that was counted and must be completed: its engine (whose
/// chain completes it) and its placement.
pub(crate) struct Active<'s> {
    pub(crate) engine: &'s Engine,
    pub(crate) placement: Placement<'s>,
}

impl<'s> Active<'s> {
    #[inline]
    pub(crate) fn has_error(&self) -> bool {
        self.placement.error.load(Ordering::Relaxed)
    }
}

impl<'s> Entry<'s> {
    /// The guard of an entry admitted by `engine`'s chain at `placement`.
    #[inline(always)]
    pub(crate) fn active(engine: &'s Engine, placement: Placement<'s>) -> Self {
        Entry {
            active: Some(Active { engine, placement }),
        }
    }

    /// The entry's state, if it is counted (its exit completes it).
    #[inline(always)]
    pub(crate) fn active_mut(&mut self) -> Option<&mut Active<'s>> {
        self.active.as_mut()
    }

    /// An entry that was neither checked nor counted (instance switched off,
    /// or a cap reached): it exits without counting.
    #[inline]
    pub(crate) fn pass_through() -> Self {
        Entry { active: None }
    }

    /// This entry's placement, if it is active in `engine` (a parent must be).
    pub(crate) fn active_in(&self, engine: &Engine) -> Option<&Placement<'s>> {
        self.active
            .as_ref()
            .filter(|active| std::ptr::eq(active.engine, engine))
            .map(|active| &active.placement)
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
            if !active.placement.error.swap(true, Ordering::Relaxed) {
                tracing::trace!(
                    resource = active.placement.resource.name(),
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
        self.active
            .as_ref()
            .map(|active| active.placement.resource.name())
    }

    /// Whether the entry was checked and is counted.
    pub fn is_counted(&self) -> bool {
        self.active.is_some()
    }
}

impl fmt::Debug for Entry<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.active {
            None => f.write_str("Entry(uncounted)"),
            Some(active) => f
                .debug_struct("Entry")
                .field("resource", &active.placement.resource.name())
                .field(
                    "context",
                    &active
                        .engine
                        .parts
                        .nodes
                        .context_name(active.placement.context),
                )
                .field("origin", &active.placement.origin_name())
                .field("entry_type", &active.placement.entry_type)
                .field("batch", &active.placement.batch)
                .field("start_ms", &active.placement.start_ms)
                .field("error", &active.has_error())
                .finish(),
        }
    }
}
