//! `Gate`: the admission protocol of an adaptive rule.
//!
//! The invariant: no call is admitted while as many calls as the limit in
//! force are in flight under the rule. Two atomic words keep it:
//!
//! - the admission word: the limit (high half) and the calls admitted so
//!   far (low [`COUNT_BITS`] bits, counted modulo `2^COUNT_BITS`);
//! - the completion word: the calls completed so far (low [`COUNT_BITS`]
//!   bits, modulo the same) and the sum of their RTTs in ms above them
//!   (modulo `2^(64 - COUNT_BITS)`).
//!
//! The calls in flight are the admitted less the completed. An admission
//! reads the completion word first (acquiring every completion it counts,
//! and so their admissions), then swaps the admission word by a
//! compare-and-swap that checks the count against the very limit it sees:
//! the completed it read are at most those completed at its swap, so the
//! calls in flight then are at most what it checked, and a limit change
//! (a store of the high half by a compare-and-swap) can never slip between
//! the check and the increment. A refusal reads the completion word again
//! and retries if a call completed meanwhile, so it refuses only when the
//! calls in flight were at the limit at the instant it read the admission
//! word. A completion (a call's sample and the release of its place) is
//! one atomic addition to the completion word. A call given back without
//! running takes its admission back from the admission word instead.
//!
//! The counts are modular: the calls in flight (at most the limit, far
//! below `2^COUNT_BITS`) are their difference modulo `2^COUNT_BITS`. A
//! count that wraps carries one into the RTT sum above it, which the
//! window's fold takes off again. A lowered limit does not evict calls in
//! flight: admissions stop until enough of them exit.

use crate::sync::atomic::{AtomicU64, Ordering};

/// Bits of a count (admitted or completed calls), modulo `2^COUNT_BITS`.
pub(crate) const COUNT_BITS: u32 = 24;
pub(crate) const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;

/// An adaptive rule's current limit and its calls admitted and completed.
#[derive(Debug)]
pub(crate) struct Gate {
    /// The limit (high half) and the calls admitted (low `COUNT_BITS`).
    word: AtomicU64,
    /// The calls completed (low `COUNT_BITS`) and their RTT sum in ms
    /// (above).
    done: AtomicU64,
}

fn pack(limit: u32, admitted: u64) -> u64 {
    (u64::from(limit) << 32) | (admitted & COUNT_MASK)
}

fn limit_of(word: u64) -> u32 {
    (word >> 32) as u32
}

/// The calls in flight: `admitted` less `completed`, modulo the counts'.
fn in_flight(admitted: u64, completed: u64) -> u32 {
    (admitted.wrapping_sub(completed) & COUNT_MASK) as u32
}

/// The completed calls and the RTT sum (ms) between two completion words
/// `from` and `to`, fewer than `2^COUNT_BITS` calls apart.
pub(crate) fn completed_between(from: u64, to: u64) -> (u64, u64) {
    let count = to.wrapping_sub(from) & COUNT_MASK;
    // The count carried into the sum this often on the way.
    let carries = ((from & COUNT_MASK) + count) >> COUNT_BITS;
    let sum = (to >> COUNT_BITS)
        .wrapping_sub(from >> COUNT_BITS)
        .wrapping_sub(carries)
        & (u64::MAX >> COUNT_BITS);
    (count, sum)
}

impl Gate {
    pub(crate) fn new(limit: u32) -> Self {
        Gate {
            word: AtomicU64::new(pack(limit, 0)),
            done: AtomicU64::new(0),
        }
    }

    /// A gate whose calls admitted and completed are the completion word
    /// `done`'s (none in flight): the state after that many calls, for
    /// models that start near a count's bound.
    #[cfg(all(test, loom))]
    pub(crate) fn with_completions(limit: u32, done: u64) -> Self {
        Gate {
            word: AtomicU64::new(pack(limit, done)),
            done: AtomicU64::new(done),
        }
    }

    /// Admits one call if fewer than the limit are in flight; on success,
    /// the limit it was admitted under and the calls in flight with it.
    #[inline]
    pub(crate) fn try_acquire(&self) -> Option<(u32, u32)> {
        // The completions first: every one read here was admitted before,
        // so the admission word read after counts it.
        let mut completed = self.done.load(Ordering::Acquire);
        let mut word = self.word.load(Ordering::Relaxed);
        loop {
            let limit = limit_of(word);
            let in_flight = in_flight(word, completed);
            if in_flight >= limit {
                // Full when the admission word was read, unless a call
                // completed since the completions were read.
                let now = self.done.load(Ordering::Acquire);
                if (now ^ completed) & COUNT_MASK == 0 {
                    return None;
                }
                completed = now;
                word = self.word.load(Ordering::Relaxed);
                continue;
            }
            match self.word.compare_exchange_weak(
                word,
                pack(limit, word + 1),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some((limit, in_flight + 1)),
                Err(now) => word = now,
            }
        }
    }

    /// Completes one admitted call that took `rt_ms` (below
    /// `2^(64 - COUNT_BITS)`): its sample and the release of its place, in
    /// one addition. The completion word after it.
    #[inline]
    pub(crate) fn complete(&self, rt_ms: u64) -> u64 {
        let add = (rt_ms << COUNT_BITS) | 1;
        // Release: an admission that reads this completion sees this
        // call's admission in the admission word.
        self.done
            .fetch_add(add, Ordering::Release)
            .wrapping_add(add)
    }

    /// Takes back one admission of a call that will not run (no sample).
    pub(crate) fn give_back(&self) {
        let mut word = self.word.load(Ordering::Relaxed);
        loop {
            // The admitted count is above zero modulo its width: this call
            // was counted by `try_acquire`.
            let back = pack(limit_of(word), word.wrapping_sub(1));
            match self
                .word
                .compare_exchange_weak(word, back, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => word = now,
            }
        }
    }

    /// Sets the limit, keeping the count.
    pub(crate) fn set_limit(&self, limit: u32) {
        let mut word = self.word.load(Ordering::Relaxed);
        loop {
            match self.word.compare_exchange_weak(
                word,
                pack(limit, word),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => word = now,
            }
        }
    }

    /// The completion word now: the calls completed and their RTT sum.
    pub(crate) fn completions(&self) -> u64 {
        self.done.load(Ordering::Acquire)
    }

    /// The limit in force and the calls in flight (at most those in flight
    /// at the later of the two reads).
    pub(crate) fn read(&self) -> (u32, u32) {
        let completed = self.done.load(Ordering::Acquire);
        let word = self.word.load(Ordering::Acquire);
        (limit_of(word), in_flight(word, completed))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn admits_up_to_the_limit_and_again_after_a_completion() {
        let gate = Gate::new(2);
        assert_eq!(gate.try_acquire(), Some((2, 1)));
        assert_eq!(gate.try_acquire(), Some((2, 2)));
        assert_eq!(gate.try_acquire(), None);
        gate.complete(5);
        assert_eq!(gate.try_acquire(), Some((2, 2)));
        assert_eq!(gate.read(), (2, 2));
        gate.give_back();
        assert_eq!(gate.read(), (2, 1));
        assert_eq!(completed_between(0, gate.completions()), (1, 5));
    }

    #[test]
    fn a_lowered_limit_keeps_the_calls_in_flight_and_admits_none() {
        let gate = Gate::new(3);
        for _ in 0..3 {
            gate.try_acquire().unwrap();
        }
        gate.set_limit(1);
        assert_eq!(gate.read(), (1, 3));
        assert_eq!(gate.try_acquire(), None);
        gate.complete(1);
        gate.give_back();
        assert_eq!(gate.try_acquire(), None);
        gate.complete(1);
        assert_eq!(gate.try_acquire(), Some((1, 1)));
    }

    /// The counts wrap at `2^COUNT_BITS` without losing a call in flight
    /// or a millisecond of the RTT sum.
    #[test]
    fn the_counts_wrap_without_losing_a_call_or_the_sum() {
        let near = (1 << COUNT_BITS) - 2;
        let gate = Gate {
            word: AtomicU64::new(pack(3, near)),
            done: AtomicU64::new((7 << COUNT_BITS) | near),
        };
        let before = gate.completions();
        for _ in 0..3 {
            gate.try_acquire().unwrap();
        }
        assert_eq!(gate.try_acquire(), None);
        assert_eq!(gate.read(), (3, 3));
        for rt in [10, 20, 30] {
            gate.complete(rt);
        }
        assert_eq!(gate.read(), (3, 0));
        assert_eq!(completed_between(before, gate.completions()), (3, 60));
        gate.try_acquire().unwrap();
        gate.give_back();
        assert_eq!(gate.read(), (3, 0));
        // The sum wraps as well.
        let top = u64::MAX >> COUNT_BITS;
        let from = top << COUNT_BITS;
        let to = from.wrapping_add((5 << COUNT_BITS) | 1);
        assert_eq!(completed_between(from, to), (1, 5));
    }
}

/// Model checks (`--cfg loom`; see `crate::sync`).
///
/// The property: however admissions, completions, give-backs and a limit
/// change interleave, no call is admitted while as many calls as the limit
/// in force are in flight (a ghost count of the calls between their
/// admission and their completion never passes the limit), a refusal
/// happens only when the calls in flight were at the limit, and the count
/// ends at zero once every admitted call completes or is given back.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
    use loom::sync::atomic::AtomicU32;
    use loom::thread;

    /// The count after an admission is at most the limit in the same word;
    /// after a lowering, no admission passes the new limit.
    #[test]
    fn loom_adaptive_admission_races_a_limit_change() {
        loom::model(|| {
            let gate = Arc::new(Gate::new(2));
            let callers: Vec<_> = (0..2)
                .map(|_| {
                    let gate = Arc::clone(&gate);
                    thread::spawn(move || {
                        let admitted = gate.try_acquire();
                        if let Some((limit, count)) = admitted {
                            // Never past the limit in force at the admission,
                            // whether the old (2) or the lowered (1).
                            assert!(count <= limit, "{count} in flight under {limit}");
                        }
                        admitted.is_some()
                    })
                })
                .collect();
            let lowerer = {
                let gate = Arc::clone(&gate);
                thread::spawn(move || {
                    gate.set_limit(1);
                    // After the change, an admission finds the new limit.
                    if let Some((limit, count)) = gate.try_acquire() {
                        assert_eq!(limit, 1);
                        assert!(count <= 1, "admitted past the lowered limit: {count}");
                        gate.give_back();
                    }
                })
            };
            let admitted = callers
                .into_iter()
                .map(|h| h.join().unwrap())
                .filter(|a| *a)
                .count();
            lowerer.join().unwrap();
            let (limit, in_flight) = gate.read();
            assert_eq!(limit, 1);
            assert_eq!(in_flight as usize, admitted);
            for _ in 0..admitted {
                gate.complete(1);
            }
            assert_eq!(gate.read(), (1, 0));
        });
    }

    /// Admissions racing a raise: none passes the limit it saw, and the
    /// count never exceeds the larger limit.
    #[test]
    fn loom_adaptive_admission_races_a_limit_raise() {
        loom::model(|| {
            let gate = Arc::new(Gate::new(1));
            let callers: Vec<_> = (0..2)
                .map(|_| {
                    let gate = Arc::clone(&gate);
                    thread::spawn(move || gate.try_acquire())
                })
                .collect();
            gate.set_limit(2);
            let counts: Vec<_> = callers.into_iter().map(|h| h.join().unwrap()).collect();
            let admitted = counts.iter().flatten().count();
            assert!(
                counts
                    .iter()
                    .flatten()
                    .all(|&(limit, count)| count <= limit)
            );
            assert!(admitted >= 1, "a free slot was refused");
            assert_eq!(gate.read(), (2, admitted as u32));
        });
    }

    /// A caller that sees the only call admitted complete finds its place
    /// free: the admission reads the completions before the admission word
    /// (acquiring them), so it never counts a completion without the
    /// admission it ends, which would refuse a free place.
    #[test]
    fn loom_adaptive_a_completion_seen_frees_its_place() {
        loom::model(|| {
            let gate = Arc::new(Gate::new(1));
            let first = {
                let gate = Arc::clone(&gate);
                thread::spawn(move || {
                    if gate.try_acquire().is_some() {
                        gate.complete(2);
                    }
                })
            };
            // Read without ordering: whatever the caller then reads, it
            // reads on its own.
            let seen = gate.done.load(Ordering::Relaxed);
            if completed_between(0, seen).0 == 1 {
                assert_eq!(gate.try_acquire(), Some((1, 1)), "a freed place refused");
                gate.give_back();
            }
            first.join().unwrap();
            assert_eq!(gate.read(), (1, 0));
        });
    }

    /// Calls admitted, completed (sample and release in one addition) and
    /// admitted again on other threads, under a limit of one: never two in
    /// flight at once; a call refused while none was in flight would be a
    /// lost completion, so a caller that finds the gate free after its
    /// neighbour completed is admitted; every admission is released once.
    #[test]
    fn loom_adaptive_completion_frees_a_place_exactly_once() {
        loom::model(|| {
            let gate = Arc::new(Gate::new(1));
            // Calls between their admission and their completion.
            let ghost = Arc::new(AtomicU32::new(0));
            let callers: Vec<_> = (0..2)
                .map(|i| {
                    let gate = Arc::clone(&gate);
                    let ghost = Arc::clone(&ghost);
                    thread::spawn(move || {
                        let mut admitted = 0;
                        for _ in 0..2 {
                            if gate.try_acquire().is_some() {
                                let inside = ghost.fetch_add(1, Ordering::SeqCst) + 1;
                                assert!(inside <= 1, "{inside} calls in flight under 1");
                                ghost.fetch_sub(1, Ordering::SeqCst);
                                if i == 0 {
                                    gate.complete(3);
                                } else {
                                    gate.give_back();
                                }
                                admitted += 1;
                            }
                        }
                        admitted
                    })
                })
                .collect();
            let admitted: Vec<u64> = callers.into_iter().map(|h| h.join().unwrap()).collect();
            assert!(admitted[0] + admitted[1] >= 2, "a free place was refused");
            assert_eq!(gate.read(), (1, 0), "every admission released once");
            let (count, sum) = completed_between(0, gate.completions());
            assert_eq!((count, sum), (admitted[0], 3 * admitted[0]));
            // Free now: admitted at once.
            assert_eq!(gate.try_acquire(), Some((1, 1)));
        });
    }
}
