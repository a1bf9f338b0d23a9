//! The handshake between entries that need permits and the worker that asks
//! Redis for them: at most one refill per flow id in flight, and no ask left
//! waiting for the worker's timer.
//!
//! An entry that finds the lease short [`ask`](Handshake::ask)s: the first
//! ask since the last refill finished wakes the worker. The worker
//! [`start`](Handshake::start)s a refill for every flow asked for while none
//! is in flight; the refill [`finish`](Handshake::finish)es by clearing
//! both, and entries parked on the flow re-check the lease and ask again
//! if it is still short.
//!
//! The two flags share one word, so an ask, a start and a finish are each
//! one read-modify-write of it, in one order: an ask is either before a
//! finish (the refill answers it) or after (it wakes the worker, whose
//! start then sees no refill in flight). What it keeps (the model in
//! `handshake/loom_tests.rs`, which also shows the old two-flag protocol
//! failing it): the flow is never asked for with neither a refill in
//! flight nor a wake of the worker pending. Only a start sets the
//! in-flight flag, and only when it is clear: one refill at a time. With two words (before this file), an ask between
//! a finish's two stores woke a worker that still saw the old refill in
//! flight, and later asks, seeing the flow asked for, woke no one:
//! refills stalled until the worker's timer.

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};

// Under `--cfg sentinel_loom` the atomics are loom's (see `loom_tests.rs`).
#[cfg(sentinel_loom)]
use loom::sync::atomic::AtomicU8;
#[cfg(not(sentinel_loom))]
use std::sync::atomic::AtomicU8;

/// The worker has been asked, and the refill that answers has not finished.
const WANTED: u8 = 1;
/// A refill call is running (one at a time per flow).
const IN_FLIGHT: u8 = 2;

/// The refill state of one flow id.
#[derive(Debug)]
pub(crate) struct Handshake {
    state: AtomicU8,
}

impl Handshake {
    pub(crate) fn new() -> Self {
        Handshake {
            state: AtomicU8::new(0),
        }
    }

    /// An entry asks for a refill. `true`: wake the worker.
    pub(crate) fn ask(&self) -> bool {
        self.state.fetch_or(WANTED, AcqRel) & WANTED == 0
    }

    /// Whether the flow is asked for (a refill ahead is then not asked
    /// again).
    #[inline]
    pub(crate) fn is_wanted(&self) -> bool {
        self.state.load(Relaxed) & WANTED != 0
    }

    /// The worker's serve: `true` when the flow is asked for and no refill
    /// is in flight; the caller then runs one, and calls
    /// [`finish`](Self::finish) when it is answered.
    pub(crate) fn start(&self) -> bool {
        self.state
            .compare_exchange(WANTED, WANTED | IN_FLIGHT, AcqRel, Acquire)
            .is_ok()
    }

    /// A refill is answered: entries may ask again.
    pub(crate) fn finish(&self) {
        // A read-modify-write like every other step, so that all of them
        // are ordered on the word.
        self.state.swap(0, AcqRel);
    }
}

#[cfg(all(test, sentinel_loom))]
#[path = "handshake/loom_tests.rs"]
mod loom_tests;
