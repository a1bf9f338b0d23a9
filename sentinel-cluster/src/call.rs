//! The state of one call an entry hands to the worker and waits for: the
//! entry waits for the answer until its deadline and may give up there;
//! the worker answers once, early or late.
//!
//! A call moves from waiting to answered (the entry takes the answer) or
//! to abandoned (the entry gave up at its deadline, leaving what it
//! decided instead); it never moves again. An answer that finds the call
//! abandoned (or already answered) is refused back to the one answering,
//! with what the entry decided, so that what the answer granted goes back
//! exactly once: the entry never sees an answer after it gave up, and an
//! answer it did see is never refused back.
//!
//! Cluster concurrency (`concurrency.rs`) and cluster hot-parameter limits
//! (`param.rs`) both wait on this type. The mutex and condvar are
//! parking_lot's; under `--cfg sentinel_loom` they are loom's, and the
//! deadline is an event a model fires (`Call::expire`), since loom does
//! not model time (see `call/loom_tests.rs`).

use std::fmt;
use std::time::Instant;

#[cfg(not(sentinel_loom))]
use parking_lot::{Condvar, Mutex, MutexGuard};

#[cfg(sentinel_loom)]
use loom::sync::atomic::AtomicBool;
#[cfg(sentinel_loom)]
use loom::sync::{Condvar, Mutex, MutexGuard};

/// Where a call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase<A, G> {
    Waiting,
    Answered(A),
    /// The entry gave up, with what it decided instead.
    Abandoned(G),
}

/// Why an answer was refused back to the one answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Late<G> {
    /// The entry gave up first, with what it decided instead.
    GaveUp(G),
    /// Another answer came first.
    Answered,
}

/// One call: answered once with an `A`, or given up with a `G`.
pub(crate) struct Call<A, G> {
    phase: Mutex<Phase<A, G>>,
    answered: Condvar,
    /// Under loom: the entry's deadline has passed.
    #[cfg(sentinel_loom)]
    expired: AtomicBool,
}

impl<A, G> fmt::Debug for Call<A, G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Call").finish_non_exhaustive()
    }
}

impl<A: Copy, G: Copy> Call<A, G> {
    pub(crate) fn new() -> Self {
        Call {
            phase: Mutex::new(Phase::Waiting),
            answered: Condvar::new(),
            #[cfg(sentinel_loom)]
            expired: AtomicBool::new(false),
        }
    }

    /// What the entry decided, once it gave up.
    pub(crate) fn abandoned(&self) -> Option<G> {
        match *self.lock() {
            Phase::Abandoned(gave) => Some(gave),
            _ => None,
        }
    }

    /// The worker's answer. `Err` when the entry gave up first (or another
    /// answer came first): the answer is the caller's to undo.
    pub(crate) fn answer(&self, answer: A) -> Result<(), Late<G>> {
        let mut phase = self.lock();
        match *phase {
            Phase::Waiting => {
                *phase = Phase::Answered(answer);
                self.answered.notify_all();
                Ok(())
            }
            Phase::Answered(_) => Err(Late::Answered),
            Phase::Abandoned(gave) => Err(Late::GaveUp(gave)),
        }
    }

    /// Waits for the answer until `deadline`. Past it, `give_up` runs with
    /// the call locked, so that no answer comes between the entry's
    /// decision and the call's abandonment: what it returns first stays
    /// with the call (for a late answer to see), the second is the entry's.
    pub(crate) fn wait<R>(
        &self,
        deadline: Instant,
        give_up: impl FnOnce() -> (G, R),
    ) -> Result<A, R> {
        let mut phase = self.lock();
        loop {
            match *phase {
                Phase::Answered(answer) => return Ok(answer),
                Phase::Abandoned(_) => break,
                Phase::Waiting => {
                    let (next, timed_out) = self.wait_until(phase, deadline);
                    phase = next;
                    if timed_out && matches!(*phase, Phase::Waiting) {
                        break;
                    }
                }
            }
        }
        let (gave, decided) = give_up();
        *phase = Phase::Abandoned(gave);
        Err(decided)
    }

    #[cfg(not(sentinel_loom))]
    fn lock(&self) -> MutexGuard<'_, Phase<A, G>> {
        self.phase.lock()
    }

    #[cfg(not(sentinel_loom))]
    fn wait_until<'a>(
        &self,
        mut phase: MutexGuard<'a, Phase<A, G>>,
        deadline: Instant,
    ) -> (MutexGuard<'a, Phase<A, G>>, bool) {
        let timed_out = self.answered.wait_until(&mut phase, deadline).timed_out();
        (phase, timed_out)
    }

    #[cfg(sentinel_loom)]
    fn lock(&self) -> MutexGuard<'_, Phase<A, G>> {
        self.phase.lock().unwrap()
    }

    /// Under loom the deadline is the model's `Call::expire`.
    #[cfg(sentinel_loom)]
    fn wait_until<'a>(
        &self,
        phase: MutexGuard<'a, Phase<A, G>>,
        _deadline: Instant,
    ) -> (MutexGuard<'a, Phase<A, G>>, bool) {
        use std::sync::atomic::Ordering::Relaxed;
        if self.expired.load(Relaxed) {
            return (phase, true);
        }
        let phase = self.answered.wait(phase).unwrap();
        (phase, self.expired.load(Relaxed))
    }

    /// Under loom: the entry's deadline passes (with the call locked, so
    /// that an entry about to wait does not miss it).
    #[cfg(all(test, sentinel_loom))]
    pub(crate) fn expire(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        let _phase = self.lock();
        self.expired.store(true, Relaxed);
        self.answered.notify_all();
    }
}

#[cfg(all(test, not(sentinel_loom)))]
mod tests {
    use super::*;

    #[test]
    fn an_answer_before_the_deadline_is_the_entry_s() {
        let call = Call::<u8, ()>::new();
        assert_eq!(call.answer(1), Ok(()));
        assert_eq!(call.answer(2), Err(Late::Answered), "one answer");
        assert_eq!(call.wait(Instant::now(), || ((), ())), Ok(1));
        assert_eq!(call.abandoned(), None);
    }

    #[test]
    fn an_answer_after_the_entry_gave_up_is_refused_back_with_its_decision() {
        let call = Call::<u8, bool>::new();
        assert_eq!(call.wait(Instant::now(), || (true, 7)), Err(7));
        assert_eq!(call.abandoned(), Some(true));
        assert_eq!(call.answer(1), Err(Late::GaveUp(true)));
        assert_eq!(call.abandoned(), Some(true), "abandoned for good");
    }

    #[test]
    fn an_answer_from_another_thread_wakes_the_entry_before_its_deadline() {
        let call = std::sync::Arc::new(Call::<u8, ()>::new());
        let worker = {
            let call = call.clone();
            std::thread::spawn(move || call.answer(3))
        };
        let deadline = Instant::now() + std::time::Duration::from_secs(60);
        assert_eq!(call.wait(deadline, || ((), ())), Ok(3));
        assert_eq!(worker.join().unwrap(), Ok(()));
    }
}

#[cfg(all(test, sentinel_loom))]
#[path = "call/loom_tests.rs"]
mod loom_tests;

#[cfg(all(test, not(sentinel_loom)))]
#[path = "call/stress_tests.rs"]
mod stress_tests;
