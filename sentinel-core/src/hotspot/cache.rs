//! A bounded, concurrent table of per-value state: the memory of one
//! hot-parameter rule.
//!
//! # Layout
//!
//! The table is allocated once, when the rule is compiled, and never grows:
//! `capacity` slots (rounded down to a multiple of [`WAYS`]) in sets of
//! [`WAYS`] ways. A value lives in one set, chosen by its key; within the
//! set it may take any way. Each way holds three atomics:
//!
//! - the value's **key**: a 64-bit hash of the value under a seed drawn for
//!   this table (foldhash, quality variant); 0 marks an empty way;
//! - its **state**, one `u64` whose meaning the checker gives (a token
//!   bucket, a pacing time, or a concurrency count);
//! - a **stamp**: the millisecond (truncated to 32 bits) it was last seen,
//!   written at most once per millisecond, for approximate LRU.
//!
//! A set is 3 cache lines (keys, states, stamps) plus an install flag.
//!
//! # Keys and collisions
//!
//! Two values are told apart by their keys only: two distinct values with
//! the same 64-bit key share one state. For a pair of values the odds are
//! 2^-64; among a million values live at once, about 3 × 10^-8 that any
//! two collide. The seed is random per table, so colliding values cannot
//! be chosen in advance from the outside.
//!
//! # Concurrency
//!
//! Finding a value that is present is a scan of one cache line of keys:
//! no lock, no write unless the stamp is a millisecond old. State changes
//! are compare-and-swap loops run by the caller on [`ValueTable::state`].
//!
//! Installing a value (a miss) takes the set's install flag with one
//! compare-and-swap, re-scans, picks a victim (an empty way, else the least
//! recently seen evictable one) and installs the key; a thread that finds
//! the flag taken retries its lookup for a bounded number of spins and then
//! gets [`Lookup::Busy`]: nobody ever waits on a stalled installer. The flag
//! serializes installs within a set, so one value never gets two ways (a
//! concurrency count split in two would admit too many calls).
//!
//! A thread that read a way's key just before that way was given to another
//! value may apply one last update to the new value's state (for a token
//! bucket: one token taken, or the first-request state written, for the
//! wrong value). Concurrency counts are immune: their state word carries 32
//! bits of the key (the *check*), every update verifies it, and a way
//! whose count is not zero is never evicted.
//!
//! # Past capacity
//!
//! A token bucket is always evictable: an unbounded stream of distinct
//! values recycles the least recently seen ways, and a forgotten value
//! starts afresh when it comes back (Sentinel's LRU does the same). A
//! concurrency count is evictable only at zero; when every way of a set has
//! calls in flight a new value of that set cannot be tracked
//! ([`Lookup::Full`], counted in [`ValueTable::overflows`] and logged
//! once).

use std::hash::BuildHasher;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};

use crate::ParamValue;

/// Ways per set: one cache line of keys.
pub(crate) const WAYS: usize = 8;

/// Retries of a lookup that meets another thread's install in its set.
const SPINS: u32 = 64;

/// The state of a token-bucket or pacing way that holds no value yet.
pub(crate) const FRESH: u64 = u64::MAX;

/// What a way's state is, which decides what may be evicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Flavor {
    /// Opaque state, [`FRESH`] when installed; always evictable.
    Buckets,
    /// `check << 32 | count`: concurrency counts, evictable at zero.
    Counters,
}

/// Where a value's state is, or why there is none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// The slot index.
    Found(u32),
    /// Another thread kept installing into the set.
    Busy,
    /// Every way of the set has calls in flight (counters only).
    Full,
}

/// A concurrency count this entry holds: the slot and the value's check, so
/// that the exit releases it without the argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeldSlot {
    index: u32,
    check: u32,
}

/// The outcome of [`ValueTable::reserve`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reserve {
    /// Counted: release it at exit.
    Held(HeldSlot),
    /// The value already has `limit` calls in flight.
    Refused,
    /// The value could not be tracked ([`Lookup::Busy`] or
    /// [`Lookup::Full`]).
    Untracked(Lookup),
}

#[repr(align(64))]
#[derive(Debug, Default)]
struct Set {
    keys: [AtomicU64; WAYS],
    states: [AtomicU64; WAYS],
    stamps: [AtomicU32; WAYS],
    installing: AtomicBool,
}

/// The per-value state of one rule. See the [module docs](self).
#[derive(Debug)]
pub(crate) struct ValueTable {
    sets: Box<[Set]>,
    ways: usize,
    flavor: Flavor,
    hasher: foldhash::quality::RandomState,
    evictions: AtomicU64,
    overflows: AtomicU64,
    warned: AtomicBool,
}

impl ValueTable {
    /// A table of at most `capacity` values (at least one).
    pub(crate) fn new(capacity: usize, flavor: Flavor) -> Self {
        let capacity = capacity.clamp(1, u32::MAX as usize / 2);
        let ways = capacity.min(WAYS);
        let empty = match flavor {
            Flavor::Buckets => FRESH,
            Flavor::Counters => 0,
        };
        let sets = (0..capacity / ways)
            .map(|_| {
                let set = Set::default();
                for state in &set.states {
                    state.store(empty, Relaxed);
                }
                set
            })
            .collect();
        ValueTable {
            sets,
            ways,
            flavor,
            hasher: foldhash::quality::RandomState::default(),
            evictions: AtomicU64::new(0),
            overflows: AtomicU64::new(0),
            warned: AtomicBool::new(false),
        }
    }

    /// How many values the table can hold.
    pub(crate) fn slots(&self) -> usize {
        self.sets.len() * self.ways
    }

    /// The key of `value` in this table (never 0).
    #[inline]
    pub(crate) fn key_of(&self, value: &ParamValue) -> u64 {
        self.hasher.hash_one(value).max(1)
    }

    /// Values forgotten to make room for others.
    pub(crate) fn evictions(&self) -> u64 {
        self.evictions.load(Relaxed)
    }

    /// Values that could not be tracked because their set was full of
    /// values with calls in flight.
    pub(crate) fn overflows(&self) -> u64 {
        self.overflows.load(Relaxed)
    }

    /// Ways holding a value now.
    pub(crate) fn occupied(&self) -> usize {
        self.sets
            .iter()
            .map(|set| {
                set.keys[..self.ways]
                    .iter()
                    .filter(|k| k.load(Relaxed) != 0)
                    .count()
            })
            .sum()
    }

    /// The state word of slot `index`.
    #[inline]
    pub(crate) fn state(&self, index: u32) -> &AtomicU64 {
        let (set, way) = self.split(index);
        &self.sets[set].states[way]
    }

    /// The key slot `index` holds now.
    #[cfg(test)]
    pub(crate) fn key_at(&self, index: u32) -> u64 {
        let (set, way) = self.split(index);
        self.sets[set].keys[way].load(Acquire)
    }

    /// The slot of `key`, installing it if absent; marks it seen at `now_ms`.
    #[inline]
    pub(crate) fn lookup(&self, key: u64, now_ms: u64) -> Lookup {
        let set_index = self.set_of(key);
        let set = &self.sets[set_index];
        let stamp = now_ms as u32;
        for _ in 0..SPINS {
            if let Some(way) = self.find_in(set, key) {
                if set.stamps[way].load(Relaxed) != stamp {
                    set.stamps[way].store(stamp, Relaxed);
                }
                return Lookup::Found(Self::index(set_index, way));
            }
            match self.install(set, key, stamp) {
                Some(Ok(way)) => return Lookup::Found(Self::index(set_index, way)),
                Some(Err(full)) => return full,
                None => std::hint::spin_loop(),
            }
        }
        Lookup::Busy
    }

    /// The slot of `key` if it is present (without marking it seen).
    pub(crate) fn find(&self, key: u64) -> Option<u32> {
        let set_index = self.set_of(key);
        self.find_in(&self.sets[set_index], key)
            .map(|way| Self::index(set_index, way))
    }

    /// Counts a call in flight for `key`, if fewer than `limit` are
    /// (counters only): one compare-and-swap that checks and counts.
    pub(crate) fn reserve(&self, key: u64, now_ms: u64, limit: u64) -> Reserve {
        let check = check_of(key);
        loop {
            let index = match self.lookup(key, now_ms) {
                Lookup::Found(index) => index,
                other => return Reserve::Untracked(other),
            };
            let state = self.state(index);
            let mut current = state.load(Acquire);
            while (current >> 32) as u32 == check {
                if current & u64::from(u32::MAX) >= limit {
                    return Reserve::Refused;
                }
                match state.compare_exchange_weak(current, current + 1, AcqRel, Acquire) {
                    Ok(_) => return Reserve::Held(HeldSlot { index, check }),
                    Err(actual) => current = actual,
                }
            }
            // The way was given to another value between lookup and update:
            // look again.
        }
    }

    /// Releases a call counted by [`reserve`](Self::reserve). A held count
    /// is never evicted, so the check always matches; if it did not, the
    /// way belongs to another value and is left alone.
    pub(crate) fn release(&self, held: HeldSlot) {
        let state = self.state(held.index);
        let mut current = state.load(Acquire);
        while (current >> 32) as u32 == held.check && current & u64::from(u32::MAX) > 0 {
            match state.compare_exchange_weak(current, current - 1, AcqRel, Acquire) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// Releases a call counted for `key`, found by key (a list element).
    pub(crate) fn release_key(&self, key: u64) {
        if let Some(index) = self.find(key) {
            self.release(HeldSlot {
                index,
                check: check_of(key),
            });
        }
    }

    /// Calls in flight for `key` (counters; tests).
    #[cfg(test)]
    pub(crate) fn count_of(&self, key: u64) -> u64 {
        self.find(key).map_or(0, |index| {
            self.state(index).load(Acquire) & u64::from(u32::MAX)
        })
    }

    #[inline]
    fn find_in(&self, set: &Set, key: u64) -> Option<usize> {
        let way = set.keys[..self.ways]
            .iter()
            .position(|k| k.load(Acquire) == key)?;
        match self.flavor {
            Flavor::Buckets => Some(way),
            Flavor::Counters => {
                // Between an install's claim of the state and its key store
                // the key still names the old value: not found.
                ((set.states[way].load(Acquire) >> 32) as u32 == check_of(key)).then_some(way)
            }
        }
    }

    /// Installs `key` in `set`: `None` if another thread is installing,
    /// `Some(Err(Full))` if nothing is evictable.
    #[cold]
    fn install(&self, set: &Set, key: u64, stamp: u32) -> Option<Result<usize, Lookup>> {
        if set
            .installing
            .compare_exchange(false, true, Acquire, Relaxed)
            .is_err()
        {
            return None;
        }
        let outcome = self.install_claimed(set, key, stamp);
        set.installing.store(false, Release);
        if outcome == Err(Lookup::Full) {
            self.overflows.fetch_add(1, Relaxed);
            if !self.warned.swap(true, Relaxed) {
                tracing::warn!(
                    slots = self.slots(),
                    "hot-parameter table full of values with calls in flight: \
                     new values of a full set pass untracked (raise the rule's capacity)"
                );
            }
        }
        Some(outcome)
    }

    fn install_claimed(&self, set: &Set, key: u64, stamp: u32) -> Result<usize, Lookup> {
        if let Some(way) = self.find_in(set, key) {
            return Ok(way);
        }
        // A victim can turn busy between the choice and the claim; each
        // failed claim is another thread's progress, so a few tries suffice.
        for _ in 0..WAYS {
            let way = self.victim(set, stamp).ok_or(Lookup::Full)?;
            let old = set.states[way].load(Acquire);
            match self.flavor {
                Flavor::Buckets => set.states[way].store(FRESH, Release),
                Flavor::Counters => {
                    let claimed = u64::from(check_of(key)) << 32;
                    if old & u64::from(u32::MAX) != 0
                        || set.states[way]
                            .compare_exchange(old, claimed, AcqRel, Acquire)
                            .is_err()
                    {
                        continue;
                    }
                }
            }
            if set.keys[way].load(Relaxed) != 0 {
                self.evictions.fetch_add(1, Relaxed);
            }
            set.stamps[way].store(stamp, Relaxed);
            set.keys[way].store(key, Release);
            return Ok(way);
        }
        Err(Lookup::Busy)
    }

    /// An empty way, else the evictable way seen longest ago.
    fn victim(&self, set: &Set, stamp: u32) -> Option<usize> {
        let mut best: Option<(usize, u32)> = None;
        for way in 0..self.ways {
            if set.keys[way].load(Relaxed) == 0 {
                return Some(way);
            }
            let evictable = match self.flavor {
                Flavor::Buckets => true,
                Flavor::Counters => set.states[way].load(Relaxed) & u64::from(u32::MAX) == 0,
            };
            let age = stamp.wrapping_sub(set.stamps[way].load(Relaxed));
            if evictable && best.is_none_or(|(_, oldest)| age > oldest) {
                best = Some((way, age));
            }
        }
        best.map(|(way, _)| way)
    }

    #[inline]
    fn set_of(&self, key: u64) -> usize {
        ((u128::from(key) * self.sets.len() as u128) >> 64) as usize
    }

    #[inline]
    fn index(set: usize, way: usize) -> u32 {
        (set * WAYS + way) as u32
    }

    #[inline]
    fn split(&self, index: u32) -> (usize, usize) {
        let index = index as usize;
        (index / WAYS, index % WAYS)
    }
}

/// The 32 bits of `key` a concurrency state carries (never 0, so that an
/// empty way matches no value).
#[inline]
fn check_of(key: u64) -> u32 {
    key as u32 | 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(i: u64) -> ParamValue {
        ParamValue::from(format!("value-{i}"))
    }

    #[test]
    fn sizes_never_exceed_the_capacity() {
        for (capacity, slots) in [(1, 1), (7, 7), (8, 8), (9, 8), (4_001, 4_000), (0, 1)] {
            let table = ValueTable::new(capacity, Flavor::Buckets);
            assert_eq!(table.slots(), slots, "capacity {capacity}");
        }
        assert_eq!(std::mem::size_of::<Set>(), 192);
    }

    #[test]
    fn a_million_distinct_values_stay_within_capacity() {
        let table = ValueTable::new(4_000, Flavor::Buckets);
        let storage = table.sets.as_ptr();
        for i in 0..1_000_000u64 {
            let key = table.key_of(&ParamValue::from(i));
            let Lookup::Found(index) = table.lookup(key, i / 100) else {
                panic!("single-threaded lookups never fail");
            };
            assert_eq!(table.key_at(index), key);
        }
        assert_eq!(table.occupied(), 4_000);
        assert_eq!(table.evictions(), 1_000_000 - 4_000);
        // The same storage: nothing was reallocated or added.
        assert_eq!(table.sets.as_ptr(), storage);
        assert_eq!(table.sets.len(), 500);
    }

    #[test]
    fn hot_values_keep_their_state_while_cold_ones_are_evicted() {
        let table = ValueTable::new(64, Flavor::Buckets);
        let hot: Vec<u64> = (0..8).map(|i| table.key_of(&value(i))).collect();
        let mut slots = Vec::new();
        for (i, &key) in hot.iter().enumerate() {
            let Lookup::Found(index) = table.lookup(key, 0) else {
                panic!()
            };
            table.state(index).store(i as u64, Relaxed);
            slots.push(index);
        }
        for n in 0..100_000u64 {
            let now = 1 + n;
            // The hot values are seen every millisecond ...
            for &key in &hot {
                assert!(matches!(table.lookup(key, now), Lookup::Found(_)));
            }
            // ... a stream of cold ones passes through.
            let cold = table.key_of(&value(1_000 + n));
            assert!(matches!(table.lookup(cold, now), Lookup::Found(_)));
        }
        for (i, &key) in hot.iter().enumerate() {
            assert_eq!(table.find(key), Some(slots[i]), "hot value {i} moved");
            assert_eq!(table.state(slots[i]).load(Relaxed), i as u64);
        }
        // A cold value from long ago is gone.
        assert_eq!(table.find(table.key_of(&value(1_000))), None);
        assert!(table.evictions() > 90_000);
    }

    #[test]
    fn counters_with_calls_in_flight_are_not_evicted() {
        let table = ValueTable::new(2, Flavor::Counters);
        let (a, b, c) = (1u64 << 40 | 3, 2u64 << 40 | 5, 3u64 << 40 | 7);
        let Reserve::Held(held_a) = table.reserve(a, 0, 1) else {
            panic!()
        };
        assert_eq!(table.reserve(a, 0, 1), Reserve::Refused);
        let Reserve::Held(held_b) = table.reserve(b, 1, 2) else {
            panic!()
        };
        // Both ways busy: c cannot be tracked.
        assert_eq!(table.reserve(c, 2, 1), Reserve::Untracked(Lookup::Full));
        assert_eq!(table.overflows(), 1);
        assert_eq!(table.count_of(a), 1);
        table.release(held_a);
        assert_eq!(table.count_of(a), 0);
        // a is idle now: c takes its way, b keeps its count.
        let Reserve::Held(held_c) = table.reserve(c, 3, 1) else {
            panic!()
        };
        assert_eq!(table.find(a), None);
        assert_eq!(table.count_of(b), 1);
        // A stale handle of an evicted value leaves the new owner alone.
        table.release(held_a);
        assert_eq!(table.count_of(c), 1);
        table.release(held_b);
        table.release(held_c);
        table.release(held_c);
        assert_eq!((table.count_of(b), table.count_of(c)), (0, 0));
        table.release_key(b);
        assert_eq!(table.count_of(b), 0, "never below zero");
    }
}
