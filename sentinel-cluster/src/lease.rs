//! One flow id's lease on this instance: permits granted by Redis for the
//! current bucket of the window, spent with a compare-and-swap on one word
//! (no lock, no allocation), refilled by the worker in the background.
//!
//! The word packs the lease's expiry (the instance's milliseconds, when the
//! bucket the permits were counted in ends) above 20 bits of permits, so a
//! refill changes both at once and no entry spends a permit of a bucket
//! that has ended: those are refunded to Redis instead.

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

// Under `--cfg sentinel_loom` the lease's atomics are loom's (see `loom_tests.rs`).
#[cfg(sentinel_loom)]
use loom::sync::atomic::{AtomicU32, AtomicU64};
#[cfg(not(sentinel_loom))]
use std::sync::atomic::{AtomicU32, AtomicU64};

use crate::config::MAX_LEASE_LIMIT;
use crate::handshake::Handshake;

const PERMIT_BITS: u32 = 20;
const PERMITS: u64 = (1 << PERMIT_BITS) - 1;

/// What a lease said for an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// Spent from the lease; `refill` when it ran low (the caller asks
    /// the worker for more).
    Taken { refill: bool },
    /// Redis said the window is full until the lease's bucket ends.
    Full,
    /// Too few permits (or expired): Redis must be asked.
    Empty,
}

/// A lease of permits for one flow id.
#[derive(Debug)]
pub(crate) struct Lease {
    /// Expiry ms << 20 | permits.
    word: AtomicU64,
    /// Until when (instance ms) Redis said the window is full.
    full_until: AtomicU64,
    /// Below this many permits left, the worker is asked for more ahead.
    low_water: AtomicU32,
    /// Entries asking the worker for a refill, and the refill in flight.
    pub(crate) handshake: Handshake,
    /// The instance's time of the latest request to the worker.
    pub(crate) asked_at_ms: AtomicU64,
    /// Permits the latest entry that found the lease empty needed.
    pub(crate) need: AtomicU32,
}

impl Lease {
    pub(crate) fn new() -> Self {
        Lease {
            word: AtomicU64::new(0),
            full_until: AtomicU64::new(0),
            low_water: AtomicU32::new(0),
            handshake: Handshake::new(),
            asked_at_ms: AtomicU64::new(0),
            need: AtomicU32::new(1),
        }
    }

    /// Spends `n` permits at `now_ms` if the lease holds them.
    #[inline]
    pub(crate) fn take(&self, n: u32, now_ms: u64) -> Take {
        let n = u64::from(n);
        let mut word = self.word.load(Acquire);
        loop {
            let (expiry, permits) = (word >> PERMIT_BITS, word & PERMITS);
            if expiry <= now_ms || permits < n {
                break;
            }
            match self
                .word
                .compare_exchange_weak(word, word - n, AcqRel, Acquire)
            {
                Ok(_) => {
                    let left = permits - n;
                    let refill = left < u64::from(self.low_water.load(Relaxed))
                        && !self.handshake.is_wanted();
                    return Take::Taken { refill };
                }
                Err(actual) => word = actual,
            }
        }
        if self.full_until.load(Acquire) > now_ms {
            Take::Full
        } else {
            Take::Empty
        }
    }

    /// Puts `granted` permits expiring at `expiry` into the lease: added
    /// to what it holds when that is of the same bucket, else in its place.
    /// Returns what the replaced lease still held, with its expiry, for a
    /// refund.
    pub(crate) fn fill(&self, granted: u64, expiry: u64) -> Option<(u64, u64)> {
        let granted = granted.min(u64::from(MAX_LEASE_LIMIT));
        let expiry = expiry.min(u64::MAX >> PERMIT_BITS);
        self.full_until.store(0, Release);
        self.low_water
            .store((granted / 4).min(u64::from(u32::MAX)) as u32, Relaxed);
        let mut word = self.word.load(Acquire);
        loop {
            let (old_expiry, left) = (word >> PERMIT_BITS, word & PERMITS);
            let (new, replaced) = if old_expiry == expiry {
                (
                    (expiry << PERMIT_BITS) | (left + granted).min(PERMITS),
                    None,
                )
            } else {
                (
                    (expiry << PERMIT_BITS) | granted,
                    (left > 0).then_some((left, old_expiry)),
                )
            };
            match self.word.compare_exchange_weak(word, new, AcqRel, Acquire) {
                Ok(_) => return replaced,
                Err(actual) => word = actual,
            }
        }
    }

    /// Redis said the window is full until `until` (instance ms).
    pub(crate) fn mark_full(&self, until: u64) {
        self.full_until.store(until, Release);
    }

    /// Takes every permit of an expired lease back (for a refund),
    /// leaving it empty; `None` when it is not expired or holds none.
    pub(crate) fn drain_expired(&self, now_ms: u64) -> Option<(u64, u64)> {
        let word = self.word.load(Acquire);
        let (expiry, left) = (word >> PERMIT_BITS, word & PERMITS);
        if expiry > now_ms || left == 0 {
            return None;
        }
        self.word
            .compare_exchange(word, expiry << PERMIT_BITS, AcqRel, Relaxed)
            .ok()
            .map(|_| (left, expiry))
    }

    /// The permits held and their expiry.
    pub(crate) fn held(&self) -> (u64, u64) {
        let word = self.word.load(Acquire);
        (word & PERMITS, word >> PERMIT_BITS)
    }
}

#[cfg(all(test, sentinel_loom))]
#[path = "lease/loom_tests.rs"]
mod loom_tests;

#[cfg(all(test, not(sentinel_loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn takes_only_unexpired_permits() {
        let lease = Lease::new();
        assert_eq!(lease.take(1, 10), Take::Empty);
        assert_eq!(lease.fill(3, 100), None);
        assert!(matches!(lease.take(2, 99), Take::Taken { .. }));
        assert_eq!(lease.take(2, 99), Take::Empty, "one left");
        assert!(matches!(lease.take(1, 99), Take::Taken { .. }));
        assert_eq!(lease.fill(5, 100), None);
        assert_eq!(lease.held(), (5, 100));
        assert_eq!(lease.take(1, 100), Take::Empty, "expired at 100");
        assert_eq!(lease.fill(2, 200), Some((5, 100)), "left for a refund");
        assert_eq!(lease.held(), (2, 200));
        lease.mark_full(300);
        assert_eq!(lease.take(5, 150), Take::Full);
        assert_eq!(lease.drain_expired(150), None);
        assert_eq!(lease.drain_expired(200), Some((2, 200)));
        assert_eq!(lease.held(), (0, 200));
    }

    #[test]
    fn threads_never_spend_more_than_granted() {
        let lease = Arc::new(Lease::new());
        lease.fill(10_000, u64::MAX >> PERMIT_BITS);
        let spent: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    let lease = &lease;
                    s.spawn(move || {
                        (0..5_000)
                            .filter(|_| matches!(lease.take(1, 1), Take::Taken { .. }))
                            .count() as u64
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(spent, 10_000);
        assert_eq!(lease.held().0, 0);
    }
}
