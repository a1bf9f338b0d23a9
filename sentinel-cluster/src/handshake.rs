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
//!
//! A reload asks for a retake ([`ask_retake`](Handshake::ask_retake)):
//! the next refill takes back everything the lease holds before it asks
//! Redis. A refill in flight when the reload came may have looked for a
//! retake before it was asked; its [`finish`](Handshake::finish) then
//! sees the retake still asked for and asks again, so a retake is never
//! left with no refill in flight or wanted (the permits granted under the
//! old settings would stay spendable until some entry ran short).

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

// Under `--cfg sentinel_loom` the atomics are loom's (see `loom_tests.rs`).
#[cfg(sentinel_loom)]
use loom::sync::atomic::{AtomicBool, AtomicU8};
#[cfg(not(sentinel_loom))]
use std::sync::atomic::{AtomicBool, AtomicU8};

/// The worker has been asked, and the refill that answers has not finished.
const WANTED: u8 = 1;
/// A refill call is running (one at a time per flow).
const IN_FLIGHT: u8 = 2;

/// The refill state of one flow id.
#[derive(Debug)]
pub(crate) struct Handshake {
    state: AtomicU8,
    /// A reload asked the next refill to take back what the lease holds.
    retake: AtomicBool,
}

impl Handshake {
    pub(crate) fn new() -> Self {
        Handshake {
            state: AtomicU8::new(0),
            retake: AtomicBool::new(false),
        }
    }

    /// An entry asks for a refill. `true`: wake the worker.
    pub(crate) fn ask(&self) -> bool {
        self.state.fetch_or(WANTED, AcqRel) & WANTED == 0
    }

    /// A reload asks the next refill to take back what the lease holds
    /// first. `true`: wake the worker.
    pub(crate) fn ask_retake(&self) -> bool {
        self.retake.store(true, Release);
        self.ask()
    }

    /// The refill's: whether it is to take back what the lease holds (a
    /// retake asked since the last refill that took it).
    pub(crate) fn take_retake(&self) -> bool {
        self.retake.swap(false, AcqRel)
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

    /// A refill is answered: entries may ask again. `true`: wake the
    /// worker, for a retake asked while the refill was in flight (after
    /// it looked for one).
    pub(crate) fn finish(&self) -> bool {
        // A read-modify-write like every other step, so that all of them
        // are ordered on the word: a retake's ask before it is read here
        // with the retake's flag.
        self.state.swap(0, AcqRel);
        self.retake.load(Acquire) && self.ask()
    }
}

#[cfg(all(test, sentinel_loom))]
#[path = "handshake/loom_tests.rs"]
mod loom_tests;
