//! One flow id's lease on this instance: permits granted by Redis for the
//! current bucket of the window, spent without a lock or an allocation,
//! refilled by the worker in the background.
//!
//! The shared word packs the lease's expiry (the instance's milliseconds,
//! when the bucket the permits were counted in ends) above 20 bits of
//! permits, so a refill changes both at once and no entry spends a permit
//! of a bucket that has ended: those are refunded to Redis instead.
//!
//! **Sub-leases.** Threads entering one flow id would bounce the shared
//! word's cache line between cores on every entry. Instead, a thread that
//! owns one of the lease's [`SLOTS`] slots (by its thread token, see
//! `lease/owner.rs`) moves a chunk of permits from the shared word into its
//! slot, a word of the same shape on lines of its own, and spends from it
//! with a compare-and-swap no other thread contends for. A chunk is an
//! eighth of what the shared word holds, at most [`MAX_CHUNK`] (256), at least
//! what the entry needs: near the limit (fewer than 16 permits left)
//! chunks shrink to the entry's permits, so the threads of a flow id park
//! at most what their entries need there. Threads without a slot (past
//! the first [`SLOTS`] of a flow id) spend from the shared word.
//!
//! **Exact.** Each permit Redis granted is, at any instant, in the shared
//! word, in one slot, in transit (taken from the shared word by a thread
//! that has not yet put the rest of its chunk in its slot), spent by one
//! entry, or handed back for a refund once; it keeps its expiry wherever it
//! is, and no entry spends it at or past that expiry. Only a slot's owner
//! puts permits in its slot, and only into a slot that is empty or holds
//! permits of the same expiry; everyone else only takes permits out (with a
//! compare-and-swap), so a chunk never lands on permits of another bucket.
//! The worker takes back what the slots hold when it drains an ended lease
//! and when it puts a new bucket's permits in place (the refunds name each
//! permit's own bucket). An entry that finds neither its slot nor the
//! shared word able to pay spends from another thread's slot before it
//! asks Redis: no entry is refused or sent to Redis while one sub-lease
//! holds its permits, but for a chunk in transit at that instant (the
//! core's quota leases have the same bound).

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};

// Under `--cfg sentinel_loom` the lease's atomics are loom's (see `loom_tests.rs`).
#[cfg(sentinel_loom)]
use loom::sync::atomic::{AtomicU32, AtomicU64};
#[cfg(not(sentinel_loom))]
use std::sync::atomic::{AtomicU32, AtomicU64};

use crate::config::MAX_LEASE_LIMIT;
use crate::handshake::Handshake;

#[path = "lease/owner.rs"]
mod owner;

const PERMIT_BITS: u32 = 20;
const PERMITS: u64 = (1 << PERMIT_BITS) - 1;

/// Sub-lease slots per flow id: the threads past this many spend from the
/// shared word.
pub(crate) const SLOTS: usize = 4;
/// The most permits one chunk moves into a sub-lease.
pub(crate) const MAX_CHUNK: u64 = 256;
/// A chunk is this fraction of what the shared word holds.
const CHUNK_DIVISOR: u64 = 8;

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

/// Permits handed back for a refund: (permits, the expiry they had), one
/// entry per expiry.
pub(crate) type Refunds = Vec<(u64, u64)>;

fn refund(refunds: &mut Refunds, permits: u64, expiry: u64) {
    if permits == 0 {
        return;
    }
    match refunds.iter_mut().find(|(_, e)| *e == expiry) {
        Some((held, _)) => *held += permits,
        None => refunds.push((permits, expiry)),
    }
}

/// One thread's sub-lease: expiry << 20 | permits, on lines of its own
/// (128 bytes: prefetchers fetch lines in pairs).
#[derive(Debug)]
#[repr(align(128))]
struct Slot {
    word: AtomicU64,
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
    /// The thread token owning each slot, 0 while free: read on every
    /// entry, written when a thread claims a slot.
    owners: [AtomicU64; SLOTS],
    slots: [Slot; SLOTS],
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
            owners: std::array::from_fn(|_| AtomicU64::new(0)),
            slots: std::array::from_fn(|_| Slot {
                word: AtomicU64::new(0),
            }),
        }
    }

    /// Spends `n` permits at `now_ms` if the lease holds them.
    #[inline]
    pub(crate) fn take(&self, n: u32, now_ms: u64) -> Take {
        self.take_as(owner::token(), n, now_ms)
    }

    /// [`take`](Self::take) by the thread whose token is `me`.
    #[inline]
    pub(crate) fn take_as(&self, me: u64, n: u32, now_ms: u64) -> Take {
        let n = u64::from(n);
        if let Some(i) = self.owners.iter().position(|o| o.load(Relaxed) == me) {
            let slot = &self.slots[i];
            let word = slot.word.load(Acquire);
            if word >> PERMIT_BITS > now_ms
                && word & PERMITS >= n
                && slot
                    .word
                    .compare_exchange(word, word - n, AcqRel, Acquire)
                    .is_ok()
            {
                return Take::Taken { refill: false };
            }
            return self.renew(Some(slot), n, now_ms);
        }
        self.claim(me, n, now_ms)
    }

    /// A thread without a slot: claims one that is free (or whose owner
    /// has exited), else spends from the shared word.
    #[cold]
    #[inline(never)]
    fn claim(&self, me: u64, n: u64, now_ms: u64) -> Take {
        if me != owner::NO_OWNER {
            for (claim, slot) in self.owners.iter().zip(&self.slots) {
                let held = claim.load(Acquire);
                if (held == 0 || !owner::is_live(held))
                    && claim.compare_exchange(held, me, AcqRel, Relaxed).is_ok()
                {
                    return self.renew(Some(slot), n, now_ms);
                }
            }
        }
        self.renew(None, n, now_ms)
    }

    /// Spends `n` from the shared word, moving a chunk into `slot` (the
    /// caller's) when it may take one; else from another thread's slot.
    #[cold]
    #[inline(never)]
    fn renew(&self, slot: Option<&Slot>, n: u64, now_ms: u64) -> Take {
        // A slot that still holds permits of another bucket (ended, or too
        // few for this entry) takes no chunk: it stays as it is until it is
        // spent or the worker takes it back.
        let parked = slot.map(|s| s.word.load(Acquire));
        let mut word = self.word.load(Acquire);
        loop {
            let (expiry, permits) = (word >> PERMIT_BITS, word & PERMITS);
            if expiry <= now_ms || permits < n {
                break;
            }
            let may_park = parked.is_some_and(|p| {
                p & PERMITS == 0
                    || (p >> PERMIT_BITS == expiry && p & PERMITS <= PERMITS - MAX_CHUNK)
            });
            let chunk = match may_park {
                true => (permits / CHUNK_DIVISOR).min(MAX_CHUNK).max(n),
                false => n,
            };
            match self
                .word
                .compare_exchange_weak(word, word - chunk, AcqRel, Acquire)
            {
                Ok(_) => {
                    if let Some(slot) = slot.filter(|_| chunk > n) {
                        park(slot, expiry, chunk - n);
                    }
                    let left = permits - chunk;
                    let refill = left < u64::from(self.low_water.load(Relaxed))
                        && !self.handshake.is_wanted();
                    return Take::Taken { refill };
                }
                Err(actual) => word = actual,
            }
        }
        let full = self.full_until.load(Acquire) > now_ms;
        if self.spend_parked(n, now_ms) {
            // The shared word is empty: more ahead, unless Redis said full.
            return Take::Taken {
                refill: !full && !self.handshake.is_wanted(),
            };
        }
        match full {
            true => Take::Full,
            false => Take::Empty,
        }
    }

    /// Spends `n` permits from any slot that holds them unexpired.
    fn spend_parked(&self, n: u64, now_ms: u64) -> bool {
        self.slots.iter().any(|slot| {
            slot.word
                .fetch_update(AcqRel, Acquire, |word| {
                    (word >> PERMIT_BITS > now_ms && word & PERMITS >= n).then(|| word - n)
                })
                .is_ok()
        })
    }

    /// Puts `granted` permits expiring at `expiry` into the lease: added
    /// to what it holds when that is of the same bucket, else in its place.
    /// What the replaced lease and the slots still held of other buckets
    /// goes into `refunds`, with its expiry (and what would overflow the
    /// word, with this one).
    pub(crate) fn fill(&self, granted: u64, expiry: u64, refunds: &mut Refunds) {
        let granted = granted.min(u64::from(MAX_LEASE_LIMIT));
        let expiry = expiry.min(u64::MAX >> PERMIT_BITS);
        self.full_until.store(0, Release);
        self.low_water
            .store((granted / 4).min(u64::from(u32::MAX)) as u32, Relaxed);
        let mut word = self.word.load(Acquire);
        loop {
            let (old_expiry, left) = (word >> PERMIT_BITS, word & PERMITS);
            let (new, back) = if old_expiry == expiry {
                let sum = left + granted;
                (
                    (expiry << PERMIT_BITS) | sum.min(PERMITS),
                    (sum.saturating_sub(PERMITS), expiry),
                )
            } else {
                ((expiry << PERMIT_BITS) | granted, (left, old_expiry))
            };
            match self.word.compare_exchange_weak(word, new, AcqRel, Acquire) {
                Ok(_) => {
                    refund(refunds, back.0, back.1);
                    break;
                }
                Err(actual) => word = actual,
            }
        }
        self.take_back(refunds, |e| e != expiry);
    }

    /// Takes every permit of the slots whose expiry `gone` says into
    /// `refunds`.
    fn take_back(&self, refunds: &mut Refunds, gone: impl Fn(u64) -> bool) {
        for slot in &self.slots {
            let taken = slot.word.fetch_update(AcqRel, Acquire, |word| {
                (word & PERMITS > 0 && gone(word >> PERMIT_BITS)).then_some(word & !PERMITS)
            });
            if let Ok(word) = taken {
                refund(refunds, word & PERMITS, word >> PERMIT_BITS);
            }
        }
    }

    /// Redis said the window is full until `until` (instance ms).
    pub(crate) fn mark_full(&self, until: u64) {
        self.full_until.store(until, Release);
    }

    /// Takes every permit of the lease and its slots that expired by
    /// `now_ms` into `refunds`, leaving them empty.
    pub(crate) fn drain_expired(&self, now_ms: u64, refunds: &mut Refunds) {
        let drained = self.word.fetch_update(AcqRel, Acquire, |word| {
            (word >> PERMIT_BITS <= now_ms && word & PERMITS > 0).then_some(word & !PERMITS)
        });
        if let Ok(word) = drained {
            refund(refunds, word & PERMITS, word >> PERMIT_BITS);
        }
        self.take_back(refunds, |expiry| expiry <= now_ms);
    }

    /// Takes every permit of the lease and its slots into `refunds`,
    /// expired or not (the rule changed: its next grant is asked under the
    /// new settings).
    pub(crate) fn take_all(&self, refunds: &mut Refunds) {
        let taken = self.word.fetch_update(AcqRel, Acquire, |word| {
            (word & PERMITS > 0).then_some(word & !PERMITS)
        });
        if let Ok(word) = taken {
            refund(refunds, word & PERMITS, word >> PERMIT_BITS);
        }
        self.take_back(refunds, |_| true);
    }

    /// The permits held in the shared word and their expiry.
    pub(crate) fn held(&self) -> (u64, u64) {
        let word = self.word.load(Acquire);
        (word & PERMITS, word >> PERMIT_BITS)
    }

    /// The permits parked in sub-leases, of any expiry.
    pub(crate) fn parked(&self) -> u64 {
        self.slots
            .iter()
            .map(|slot| slot.word.load(Acquire) & PERMITS)
            .sum()
    }
}

/// Puts `permits` expiring at `expiry` into `slot`, which its owner (the
/// caller) found empty or holding permits of that expiry; others only take
/// permits out of it since.
fn park(slot: &Slot, expiry: u64, permits: u64) {
    let _ = slot.word.fetch_update(AcqRel, Acquire, |word| {
        debug_assert!(word & PERMITS == 0 || word >> PERMIT_BITS == expiry);
        Some(match word & PERMITS {
            0 => (expiry << PERMIT_BITS) | permits,
            _ => word + permits,
        })
    });
}

#[cfg(all(test, sentinel_loom))]
#[path = "lease/loom_tests.rs"]
mod loom_tests;

#[cfg(all(test, not(sentinel_loom)))]
#[path = "lease/tests.rs"]
mod tests;
