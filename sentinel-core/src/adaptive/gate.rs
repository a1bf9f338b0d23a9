//! `Gate`: the admission protocol of an adaptive rule.
//!
//! The invariant: no call is admitted while as many calls as the limit in
//! force are in flight under the rule. The limit and the in-flight count
//! are one atomic word (limit in the high half, count in the low half), so
//! an admission is one compare-and-swap that checks the count against the
//! very limit it sees, and a limit change (a store of the high half by a
//! compare-and-swap) can never slip between the check and the increment. A
//! lowered limit does not evict calls in flight: admissions stop until
//! enough of them exit.

use crate::sync::atomic::{AtomicU64, Ordering};

const COUNT_MASK: u64 = u32::MAX as u64;

/// An adaptive rule's current limit and its calls in flight.
#[derive(Debug)]
pub(crate) struct Gate {
    word: AtomicU64,
}

fn pack(limit: u32, in_flight: u32) -> u64 {
    (u64::from(limit) << 32) | u64::from(in_flight)
}

fn unpack(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, (word & COUNT_MASK) as u32)
}

impl Gate {
    pub(crate) fn new(limit: u32) -> Self {
        Gate {
            word: AtomicU64::new(pack(limit, 0)),
        }
    }

    /// Admits one call if fewer than the limit are in flight; on success,
    /// the limit it was admitted under and the count after it.
    #[inline]
    pub(crate) fn try_acquire(&self) -> Option<(u32, u32)> {
        let mut word = self.word.load(Ordering::Relaxed);
        loop {
            let (limit, in_flight) = unpack(word);
            if in_flight >= limit {
                return None;
            }
            match self.word.compare_exchange_weak(
                word,
                word + 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some((limit, in_flight + 1)),
                Err(now) => word = now,
            }
        }
    }

    /// Ends one admitted call.
    #[inline]
    pub(crate) fn release(&self) {
        // The count is above zero: this call was counted by `try_acquire`.
        self.word.fetch_sub(1, Ordering::Release);
    }

    /// Sets the limit, keeping the count.
    pub(crate) fn set_limit(&self, limit: u32) {
        let mut word = self.word.load(Ordering::Relaxed);
        loop {
            let (_, in_flight) = unpack(word);
            match self.word.compare_exchange_weak(
                word,
                pack(limit, in_flight),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(now) => word = now,
            }
        }
    }

    /// The limit in force and the calls in flight, read together.
    pub(crate) fn read(&self) -> (u32, u32) {
        unpack(self.word.load(Ordering::Acquire))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn admits_up_to_the_limit_and_again_after_a_release() {
        let gate = Gate::new(2);
        assert_eq!(gate.try_acquire(), Some((2, 1)));
        assert_eq!(gate.try_acquire(), Some((2, 2)));
        assert_eq!(gate.try_acquire(), None);
        gate.release();
        assert_eq!(gate.try_acquire(), Some((2, 2)));
        assert_eq!(gate.read(), (2, 2));
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
        gate.release();
        gate.release();
        assert_eq!(gate.try_acquire(), None);
        gate.release();
        assert_eq!(gate.try_acquire(), Some((1, 1)));
    }
}

/// Model checks (`--cfg loom`; see `crate::sync`).
///
/// The property: however admissions, exits and a limit change interleave,
/// every admission sees a count below the limit in force at that instant
/// (never more in flight than the limit in force when a call is let in),
/// and the count ends at zero once every admitted call exits.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use loom::sync::Arc;
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
                        gate.release();
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
                gate.release();
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
}
