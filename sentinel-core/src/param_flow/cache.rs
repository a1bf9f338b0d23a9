//! A bounded, concurrent table of per-value state: the memory of one
//! hot-parameter rule.
//!
//! # Layout
//!
//! The table holds at most `capacity` values (rounded down to a multiple
//! of [`WAYS`]) in sets of [`WAYS`] ways. A value lives in one set, chosen
//! by its key; within the set it may take any way. Each way holds:
//!
//! - the value's **key**: a 64-bit hash of the value under a seed drawn for
//!   this table (foldhash, quality variant); 0 marks an empty way;
//! - its **state**, one `u64` whose meaning the checker gives (a token
//!   bucket, a pacing time, or a concurrency count);
//! - a **stamp**: the millisecond (truncated to 32 bits) it was last seen,
//!   written at most once per millisecond;
//! - a **frequency**: how often it was seen, 0 to 255, halved for each
//!   second it goes unseen (see *Frequencies* below).
//!
//! A set is 3 cache lines (keys, states, stamps and frequencies) plus an
//! install flag: 192 bytes, 24 per value.
//!
//! # Growth
//!
//! The sets are stored in chunks of at least 64 sets (512 values, 12 KiB),
//! at most 1 024 chunks per table. A chunk is allocated when a value is
//! first installed into one of its sets, and kept until the rule is
//! dropped; a freshly compiled table holds only its list of chunk pointers
//! (8 bytes per chunk: 64 bytes for the default 4 000 values, at most
//! 8 KiB). The first install into a chunk allocates it (one allocation of
//! the chunk's size, on the install path only; two threads may both
//! allocate, one chunk is kept and the other freed); every later lookup
//! of the chunk reads one more pointer and allocates nothing. Values are
//! spread over every chunk by their keys, so a table reaches its full size
//! after a few times as many distinct values as it has chunks (about 20
//! for the default 4 000 values); it never grows past `capacity` values,
//! [`ValueTable::bytes`] reports what it holds now.
//!
//! # Keys and collisions
//!
//! Two values are told apart by their keys only: two distinct values with
//! the same 64-bit key share one state. For a pair of values the odds are
//! 2^-64; among a million values live at once, about 3 × 10^-8 that any
//! two collide. The seed is random per table, so colliding values cannot
//! be chosen in advance from the outside.
//!
//! # Frequencies: hot values survive floods of cold ones
//!
//! Each lookup of a tracked value adds one to its frequency (a plain load
//! and store, no read-modify-write: concurrent lookups may lose an
//! increment) until it reaches 255; the first lookup in a new millisecond
//! first halves it once per whole second since the value was last seen.
//! A value at 255 seen in the same millisecond writes nothing.
//!
//! A new value always gets a way (a rate limiter must limit it from its
//! first request): an empty way, else the evictable way with the lowest
//! frequency (halved for each second unseen), the least recently seen
//! among equals. A flood of distinct values, each seen once, recycles the
//! ways of values seen once, while a value that keeps coming back (and
//! one that is refused is still seen) holds its way and its state: it
//! stays limited whatever number of cold values pass. A set keeps up to
//! 7 such values against any flood; past that, frequent values of one set
//! evict one another (least frequent first) and a returning one starts
//! afresh.
//!
//! # Concurrency
//!
//! Finding a value that is present is a scan of one cache line of keys:
//! no lock; a write to its stamp and frequency at most once per
//! millisecond once its frequency is 255. State changes are
//! compare-and-swap loops run by the caller on [`ValueTable::state`].
//!
//! Installing a value (a miss) takes the set's install flag with one
//! compare-and-swap, re-scans, picks a victim and installs the key; a
//! thread that finds the flag taken retries its lookup for a bounded
//! number of spins and then gets [`Lookup::Busy`]: nobody ever waits on a
//! stalled installer. The flag serializes installs within a set, so one
//! value never gets two ways (a concurrency count split in two would admit
//! too many calls). A chunk is published once, with release/acquire: a
//! thread that sees the chunk sees its initialized ways.
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
//! values recycles the least frequent ways, and a forgotten value starts
//! afresh when it comes back (Sentinel's LRU does the same). A concurrency
//! count is evictable only at zero; when every way of a set has calls in
//! flight a new value of that set cannot be tracked ([`Lookup::Full`],
//! counted in [`ValueTable::overflows`] and logged once).

use std::hash::{BuildHasher, Hasher};

use crate::ParamValue;
use crate::sync::OnceBox;
use crate::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use crate::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64};

/// Ways per set: one cache line of keys.
pub(crate) const WAYS: usize = 8;

/// The fewest sets a chunk holds (512 values, 12 KiB).
const MIN_CHUNK_SETS: usize = 64;

/// The most chunks a table has: its list of chunks is at most 8 KiB.
const MAX_CHUNKS: usize = 1_024;

/// Retries of a lookup that meets another thread's install in its set.
const SPINS: u32 = 64;

/// The state of a token-bucket or pacing way that holds no value yet.
pub(crate) const FRESH: u64 = u64::MAX;

/// A frequency is halved for each of these milliseconds its value goes
/// unseen.
const HALF_LIFE_MS: u32 = 1_000;

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
    /// The slot index (what [`ValueTable::lookup`] finds; the hot path
    /// uses [`ValueTable::slot`]).
    #[cfg(test)]
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
#[derive(Debug)]
struct Set {
    keys: [AtomicU64; WAYS],
    states: [AtomicU64; WAYS],
    stamps: [AtomicU32; WAYS],
    freqs: [AtomicU8; WAYS],
    installing: AtomicBool,
}

impl Set {
    fn new(empty: u64) -> Self {
        Set {
            keys: std::array::from_fn(|_| AtomicU64::new(0)),
            states: std::array::from_fn(|_| AtomicU64::new(empty)),
            stamps: std::array::from_fn(|_| AtomicU32::new(0)),
            freqs: std::array::from_fn(|_| AtomicU8::new(0)),
            installing: AtomicBool::new(false),
        }
    }
}

/// Consecutive sets, allocated together on first use.
#[derive(Debug)]
struct Chunk {
    sets: Box<[Set]>,
}

/// The per-value state of one rule. See the [module docs](self).
#[derive(Debug)]
pub(crate) struct ValueTable {
    chunks: Box<[OnceBox<Chunk>]>,
    /// Sets in all (allocated or not).
    sets: usize,
    /// `log2` of the sets per chunk.
    chunk_shift: u32,
    ways: usize,
    flavor: Flavor,
    hasher: foldhash::quality::RandomState,
    evictions: AtomicU64,
    overflows: AtomicU64,
    warned: AtomicBool,
}

impl ValueTable {
    /// A table of at most `capacity` values (at least one), holding no
    /// set until a value arrives.
    pub(crate) fn new(capacity: usize, flavor: Flavor) -> Self {
        let capacity = capacity.clamp(1, u32::MAX as usize / 2);
        let ways = capacity.min(WAYS);
        let sets = capacity / ways;
        let chunk_sets = sets
            .div_ceil(MAX_CHUNKS)
            .next_power_of_two()
            .max(MIN_CHUNK_SETS);
        ValueTable {
            chunks: (0..sets.div_ceil(chunk_sets))
                .map(|_| OnceBox::new())
                .collect(),
            sets,
            chunk_shift: chunk_sets.trailing_zeros(),
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
        self.sets * self.ways
    }

    /// Bytes the table holds now: itself, its list of chunks and the
    /// chunks allocated so far (at most `slots() × 24` more than when
    /// new, plus 16 bytes a chunk).
    pub(crate) fn bytes(&self) -> usize {
        let chunks: usize = self
            .chunks
            .iter()
            .filter_map(OnceBox::get)
            .map(|chunk| std::mem::size_of::<Chunk>() + std::mem::size_of_val::<[Set]>(&chunk.sets))
            .sum();
        std::mem::size_of::<Self>()
            + std::mem::size_of_val::<[OnceBox<Chunk>]>(&self.chunks)
            + chunks
    }

    /// The key of `value` in this table (never 0).
    #[inline]
    pub(crate) fn key_of(&self, value: &ParamValue) -> u64 {
        let hash = match value {
            // A string (the usual argument) hashes in line, with the
            // writes its `Hash` makes: the same key as `hash_one` gives.
            ParamValue::InlineStr(s) => self.string_hash(s.as_bytes()),
            ParamValue::Str(s) => self.string_hash(s.as_bytes()),
            // An integer likewise.
            ParamValue::Int(v) => self.int_hash(i128::from(*v)),
            other => self.hasher.hash_one(other),
        };
        hash.max(1)
    }

    #[inline(always)]
    fn int_hash(&self, value: i128) -> u64 {
        let mut state = self.hasher.build_hasher();
        crate::param::hash_int(value, &mut state);
        state.finish()
    }

    #[inline(always)]
    fn string_hash(&self, bytes: &[u8]) -> u64 {
        let mut state = self.hasher.build_hasher();
        crate::param::hash_string(bytes, &mut state);
        state.finish()
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
        self.chunks
            .iter()
            .filter_map(OnceBox::get)
            .flat_map(|chunk| chunk.sets.iter())
            .map(|set| {
                set.keys[..self.ways]
                    .iter()
                    .filter(|k| k.load(Relaxed) != 0)
                    .count()
            })
            .sum()
    }

    /// The state word of slot `index`, which [`slot`](Self::slot) gave.
    #[inline]
    pub(crate) fn state(&self, index: u32) -> &AtomicU64 {
        let (set, way) = split(index);
        let set = self
            .allocated(set)
            .expect("a found slot's chunk is allocated and never freed");
        &set.states[way]
    }

    /// The key slot `index` holds now.
    #[cfg(test)]
    pub(crate) fn key_at(&self, index: u32) -> u64 {
        let (set, way) = split(index);
        self.allocated(set)
            .map_or(0, |set| set.keys[way].load(Acquire))
    }

    /// The frequency of slot `index` now (tests).
    #[cfg(test)]
    pub(crate) fn freq_at(&self, index: u32) -> u8 {
        let (set, way) = split(index);
        self.allocated(set)
            .map_or(0, |set| set.freqs[way].load(Relaxed))
    }

    /// The slot of `key`, installing it if absent; marks it seen at `now_ms`.
    #[cfg(test)]
    pub(crate) fn lookup(&self, key: u64, now_ms: u64) -> Lookup {
        match self.slot(key, now_ms) {
            Ok((index, _)) => Lookup::Found(index),
            Err(why) => why,
        }
    }

    /// The slot of `key` and its state word, installing it if absent;
    /// marks it seen at `now_ms`. `Err` is [`Lookup::Busy`] or
    /// [`Lookup::Full`].
    #[inline(always)]
    pub(crate) fn slot(&self, key: u64, now_ms: u64) -> Result<(u32, &AtomicU64), Lookup> {
        let set_index = self.set_of(key);
        // A value present in its set (the usual lookup) is found in line.
        if let Some(set) = self.allocated(set_index)
            && let Some(way) = self.find_in(set, key)
        {
            seen(set, way, now_ms as u32);
            return Ok((index(set_index, way), &set.states[way]));
        }
        self.slot_installing(set_index, key, now_ms)
    }

    /// [`slot`](Self::slot) of a value its set did not hold at the first
    /// look: looks again, and installs it if still absent.
    #[inline(never)]
    fn slot_installing(
        &self,
        set_index: usize,
        key: u64,
        now_ms: u64,
    ) -> Result<(u32, &AtomicU64), Lookup> {
        let set = match self.allocated(set_index) {
            Some(set) => set,
            None => self.allocate(set_index),
        };
        let stamp = now_ms as u32;
        for _ in 0..SPINS {
            if let Some(way) = self.find_in(set, key) {
                seen(set, way, stamp);
                return Ok((index(set_index, way), &set.states[way]));
            }
            match self.install(set, key, stamp) {
                Some(Ok(way)) => return Ok((index(set_index, way), &set.states[way])),
                Some(Err(full)) => return Err(full),
                None => crate::sync::spin_loop(),
            }
        }
        Err(Lookup::Busy)
    }

    /// The slot of `key` if it is present (without marking it seen).
    pub(crate) fn find(&self, key: u64) -> Option<u32> {
        let set_index = self.set_of(key);
        self.find_in(self.allocated(set_index)?, key)
            .map(|way| index(set_index, way))
    }

    /// Counts a call in flight for `key`, if fewer than `limit` are
    /// (counters only): one compare-and-swap that checks and counts.
    pub(crate) fn reserve(&self, key: u64, now_ms: u64, limit: u64) -> Reserve {
        let check = check_of(key);
        loop {
            let (index, state) = match self.slot(key, now_ms) {
                Ok(slot) => slot,
                Err(why) => return Reserve::Untracked(why),
            };
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
            set.freqs[way].store(1, Relaxed);
            set.keys[way].store(key, Release);
            return Ok(way);
        }
        Err(Lookup::Busy)
    }

    /// An empty way, else the evictable way with the lowest frequency
    /// (decayed), the least recently seen among equals.
    fn victim(&self, set: &Set, stamp: u32) -> Option<usize> {
        let mut best: Option<(usize, u8, u32)> = None;
        for way in 0..self.ways {
            if set.keys[way].load(Relaxed) == 0 {
                return Some(way);
            }
            let evictable = match self.flavor {
                Flavor::Buckets => true,
                Flavor::Counters => set.states[way].load(Relaxed) & u64::from(u32::MAX) == 0,
            };
            let age = age_ms(set.stamps[way].load(Relaxed), stamp);
            let freq = decayed(set.freqs[way].load(Relaxed), age);
            let better =
                |&(_, low, oldest): &(usize, u8, u32)| freq < low || (freq == low && age > oldest);
            if evictable && best.as_ref().is_none_or(better) {
                best = Some((way, freq, age));
            }
        }
        best.map(|(way, _, _)| way)
    }

    #[inline]
    fn set_of(&self, key: u64) -> usize {
        ((u128::from(key) * self.sets as u128) >> 64) as usize
    }

    /// Set `set_index`, if its chunk is allocated.
    #[inline]
    fn allocated(&self, set_index: usize) -> Option<&Set> {
        let chunk = self.chunks.get(set_index >> self.chunk_shift)?.get()?;
        chunk.sets.get(set_index & ((1 << self.chunk_shift) - 1))
    }

    /// Set `set_index`, allocating its chunk (the first value installed
    /// into it).
    #[cold]
    #[inline(never)]
    fn allocate(&self, set_index: usize) -> &Set {
        let chunk_index = set_index >> self.chunk_shift;
        let first = chunk_index << self.chunk_shift;
        let len = (self.sets - first).min(1 << self.chunk_shift);
        let empty = match self.flavor {
            Flavor::Buckets => FRESH,
            Flavor::Counters => 0,
        };
        let chunk = self.chunks[chunk_index].get_or_init(|| {
            Box::new(Chunk {
                sets: (0..len).map(|_| Set::new(empty)).collect(),
            })
        });
        &chunk.sets[set_index - first]
    }
}

/// Marks way `way` of `set` seen at `stamp`: one more to its frequency
/// (up to 255), halved first for each second since it was last seen.
#[inline]
fn seen(set: &Set, way: usize, stamp: u32) {
    let last = set.stamps[way].load(Relaxed);
    let freq = set.freqs[way].load(Relaxed);
    if last == stamp {
        if freq < u8::MAX {
            set.freqs[way].store(freq + 1, Relaxed);
        }
        return;
    }
    set.stamps[way].store(stamp, Relaxed);
    let next = decayed(freq, age_ms(last, stamp)).saturating_add(1);
    if next != freq {
        set.freqs[way].store(next, Relaxed);
    }
}

/// Milliseconds from `last` to `now` (both truncated to 32 bits); 0 if
/// `now` looks earlier (a clock set back).
#[inline]
fn age_ms(last: u32, now: u32) -> u32 {
    let age = now.wrapping_sub(last);
    if age >= 1 << 31 { 0 } else { age }
}

/// `freq` halved once per [`HALF_LIFE_MS`] of `age`.
#[inline]
fn decayed(freq: u8, age: u32) -> u8 {
    freq.checked_shr(age / HALF_LIFE_MS).unwrap_or(0)
}

#[inline]
fn index(set: usize, way: usize) -> u32 {
    (set * WAYS + way) as u32
}

#[inline]
fn split(index: u32) -> (usize, usize) {
    let index = index as usize;
    (index / WAYS, index % WAYS)
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

    /// A string's key, hashed in line, is the key its `Hash` gives, for
    /// both representations of a string and at every length the hasher
    /// treats apart (short, up to 16 bytes, and longer).
    #[test]
    fn a_string_or_integer_key_is_the_hash_of_the_value() {
        let table = ValueTable::new(64, Flavor::Buckets);
        for len in [0, 1, 3, 4, 7, 8, 15, 16, 17, 22, 23, 40, 300] {
            let text: String = (0..len)
                .map(|i| char::from(b'a' + (i % 26) as u8))
                .collect();
            let shared = ParamValue::Str(text.as_str().into());
            let expected = table.hasher.hash_one(&shared).max(1);
            assert_eq!(table.key_of(&shared), expected, "shared, {len} bytes");
            if let Some(inline) = crate::param::InlineStr::new(&text) {
                let inline = ParamValue::InlineStr(inline);
                assert_eq!(table.key_of(&inline), expected, "inline, {len} bytes");
            }
        }
        for int in [
            ParamValue::from(7_u64),
            ParamValue::Int(-1 - 0xc000_0201),
            ParamValue::Int(i64::MIN),
            ParamValue::Int(i64::MAX),
            ParamValue::UInt(u64::MAX),
        ] {
            assert_eq!(table.key_of(&int), table.hasher.hash_one(&int).max(1));
        }
        // An `Int` and the `UInt` of the same number are one value.
        assert_eq!(
            table.key_of(&ParamValue::Int(7)),
            table.key_of(&ParamValue::UInt(7))
        );
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
        let fresh = table.bytes();
        for i in 0..1_000_000u64 {
            let key = table.key_of(&ParamValue::from(i));
            let Lookup::Found(index) = table.lookup(key, i / 100) else {
                panic!("single-threaded lookups never fail");
            };
            assert_eq!(table.key_at(index), key);
        }
        assert_eq!(table.occupied(), 4_000);
        assert_eq!(table.evictions(), 1_000_000 - 4_000);
        // Every chunk allocated, nothing more: 500 sets of 192 bytes in 8
        // chunks.
        assert_eq!(table.bytes(), fresh + 500 * 192 + 8 * 16);
    }

    #[test]
    fn a_new_table_holds_no_set_and_grows_by_chunks_on_first_use() {
        let table = ValueTable::new(4_000, Flavor::Buckets);
        let fresh = table.bytes();
        // The list of 8 chunk pointers and the table itself.
        assert!(fresh <= 256, "{fresh} bytes");
        assert_eq!(table.occupied(), 0);
        assert_eq!(table.find(table.key_of(&value(1))), None);
        assert_eq!(table.bytes(), fresh, "a find allocates nothing");
        let key = table.key_of(&value(1));
        let Lookup::Found(index) = table.lookup(key, 0) else {
            panic!()
        };
        // One chunk of 64 sets, or the last chunk's 52 of the 500: which
        // chunk follows from the value's hash, under a seed drawn per table.
        let chunk = if split(index).0 >= 7 * 64 { 52 } else { 64 };
        assert_eq!(table.bytes(), fresh + chunk * 192 + 16);
        assert_eq!(table.state(index).load(Relaxed), FRESH);
        assert_eq!(table.find(key), Some(index));
        // The largest table: 2^21 sets in 1 024 chunks of 2 048.
        let largest = ValueTable::new(1 << 24, Flavor::Counters);
        assert_eq!(largest.slots(), 1 << 24);
        assert!(largest.bytes() <= 8 * 1_024 + 256, "{}", largest.bytes());
        let fresh_largest = largest.bytes();
        let key = largest.key_of(&value(1));
        assert!(matches!(largest.reserve(key, 0, 1), Reserve::Held(_)));
        assert_eq!(largest.bytes(), fresh_largest + 2_048 * 192 + 16);
        // A last chunk shorter than the others holds only its sets.
        let odd = ValueTable::new(8 * 65, Flavor::Buckets);
        let fresh_odd = odd.bytes();
        for i in 0..10_000 {
            let _ = odd.lookup(odd.key_of(&value(i)), 0);
        }
        assert_eq!(odd.occupied(), 8 * 65);
        assert_eq!(odd.bytes(), fresh_odd + 65 * 192 + 2 * 16);
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
    fn frequencies_count_sightings_saturate_and_halve_per_second_unseen() {
        let table = ValueTable::new(8, Flavor::Buckets);
        let key = table.key_of(&value(1));
        let Lookup::Found(index) = table.lookup(key, 0) else {
            panic!()
        };
        assert_eq!(table.freq_at(index), 1);
        for _ in 0..9 {
            table.lookup(key, 0);
        }
        assert_eq!(table.freq_at(index), 10);
        for _ in 0..1_000 {
            table.lookup(key, 1);
        }
        assert_eq!(table.freq_at(index), 255);
        // 2.5 s unseen: halved twice, then seen once.
        table.lookup(key, 2_501);
        assert_eq!(table.freq_at(index), 255 / 4 + 1);
        // A clock set back decays nothing.
        table.lookup(key, 5);
        assert_eq!(table.freq_at(index), 255 / 4 + 2);
        // Long unseen: back to one sighting.
        table.lookup(key, 100_000);
        assert_eq!(table.freq_at(index), 1);
    }

    #[test]
    fn a_new_value_evicts_the_least_frequent_not_the_least_recent() {
        let table = ValueTable::new(8, Flavor::Buckets);
        let keys: Vec<u64> = (0..8).map(|i| table.key_of(&value(i))).collect();
        for (i, &key) in keys.iter().enumerate() {
            table.lookup(key, 0);
            // Value 0 is seen most, and first; value 5 is seen once, last.
            for _ in 0..(8 - i) {
                table.lookup(key, 10);
            }
        }
        table.lookup(keys[5], 20);
        let newcomer = table.key_of(&value(100));
        assert!(matches!(table.lookup(newcomer, 30), Lookup::Found(_)));
        // Value 7 (seen twice) is gone, the oldest (value 0) stays.
        assert_eq!(table.find(keys[7]), None);
        assert!(keys[..7].iter().all(|&key| table.find(key).is_some()));
        // A second later the unseen ones have halved: still ahead of a
        // value seen once.
        let late = table.key_of(&value(101));
        assert!(matches!(table.lookup(late, 1_100), Lookup::Found(_)));
        assert_eq!(table.find(newcomer), None);
    }

    /// The table's placement and eviction, written the simple way: a list
    /// of ways per set, each `(key, stamp, frequency)`.
    struct Reference {
        sets: Vec<Vec<(u64, u32, u8)>>,
        ways: usize,
        evictions: u64,
    }

    impl Reference {
        fn lookup(&mut self, set: usize, key: u64, now: u32) {
            let ways = &mut self.sets[set];
            if let Some(way) = ways.iter_mut().find(|way| way.0 == key) {
                way.2 = if way.1 == now {
                    way.2.saturating_add(1)
                } else {
                    decayed(way.2, age_ms(way.1, now)).saturating_add(1)
                };
                way.1 = now;
                return;
            }
            if ways.len() < self.ways {
                ways.push((key, now, 1));
                return;
            }
            let rank = |&(_, stamp, freq): &(u64, u32, u8)| {
                let age = age_ms(stamp, now);
                (decayed(freq, age), u32::MAX - age)
            };
            let victim = (0..ways.len())
                .min_by_key(|&way| rank(&ways[way]))
                .expect("a full set");
            ways[victim] = (key, now, 1);
            self.evictions += 1;
        }
    }

    #[test]
    fn the_table_matches_a_reference_model_over_a_random_stream() {
        // 130 sets: two chunks of 64 and a last one of 2.
        let table = ValueTable::new(8 * 130, Flavor::Buckets);
        let mut reference = Reference {
            sets: vec![Vec::new(); 130],
            ways: WAYS,
            evictions: 0,
        };
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut random = move || {
            // splitmix64
            seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let hot: Vec<u64> = (0..200).map(|_| random() | 1).collect();
        let mut seen = Vec::new();
        let mut now = 0u64;
        for step in 0..200_000 {
            let roll = random();
            now += match roll % 100 {
                0 => 2_000,
                1..=20 => roll % 7,
                _ => 0,
            };
            let key = if roll % 3 == 0 {
                hot[(roll >> 8) as usize % hot.len()]
            } else {
                random() | 1
            };
            assert!(matches!(table.lookup(key, now), Lookup::Found(_)));
            reference.lookup(table.set_of(key), key, now as u32);
            if step % 1_000 == 0 {
                seen.push(key);
            }
        }
        assert_eq!(table.evictions(), reference.evictions);
        assert_eq!(
            table.occupied(),
            reference.sets.iter().map(Vec::len).sum::<usize>()
        );
        for set in &reference.sets {
            for &(key, stamp, freq) in set {
                let index = table.find(key).expect("tracked in the reference");
                assert_eq!(table.freq_at(index), freq, "{key:x}");
                let (set, way) = split(index);
                let stamps = &table.allocated(set).expect("allocated").stamps;
                assert_eq!(stamps[way].load(Relaxed), stamp);
            }
        }
        for key in seen.into_iter().chain(hot) {
            let tracked = reference.sets[table.set_of(key)]
                .iter()
                .any(|way| way.0 == key);
            assert_eq!(table.find(key).is_some(), tracked, "{key:x}");
        }
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

/// Models of the install protocol: the chunk published once, the install
/// flag, the victim claim and the checked concurrency counts
/// (`RUSTFLAGS="--cfg loom" cargo test -p sentinel-flow-core --lib --release
/// loom_value_table`).
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::Arc;
    use loom::thread;

    fn counters(table: &Arc<ValueTable>, key: u64, limit: u64) -> thread::JoinHandle<Reserve> {
        let table = Arc::clone(table);
        thread::spawn(move || table.reserve(key, 0, limit))
    }

    /// Two threads count a call of one value in a table whose chunk is not
    /// allocated yet: one chunk is kept, the value gets one way, and with a
    /// limit of 1 at most one call holds, the count saying so.
    #[test]
    fn loom_value_table_one_value_gets_one_way_and_an_exact_count() {
        crate::sync::check(3, || {
            let table = Arc::new(ValueTable::new(2, Flavor::Counters));
            let key = 1 << 40 | 3;
            let other = counters(&table, key, 1);
            let mine = table.reserve(key, 0, 1);
            let theirs = other.join().unwrap();
            let held = [mine, theirs]
                .iter()
                .filter(|r| matches!(r, Reserve::Held(_)))
                .count();
            assert!(held <= 1, "{mine:?} {theirs:?}");
            assert_eq!(table.count_of(key), held as u64);
            assert_eq!(table.occupied(), 1);
        });
    }

    /// Two distinct values installed at once into a fresh chunk's only
    /// set: each is tracked in a way of its own with its own count, and
    /// the frequencies start at one sighting.
    #[test]
    fn loom_value_table_distinct_values_install_apart_into_a_fresh_chunk() {
        crate::sync::check(3, || {
            let table = Arc::new(ValueTable::new(2, Flavor::Counters));
            let (a, b) = (1u64 << 40 | 3, 2u64 << 40 | 5);
            let other = counters(&table, b, 1);
            let mine = table.reserve(a, 0, 1);
            let theirs = other.join().unwrap();
            for (key, reserve) in [(a, mine), (b, theirs)] {
                match reserve {
                    Reserve::Held(_) => assert_eq!(table.count_of(key), 1),
                    // Gave up waiting for the other's install: untracked.
                    Reserve::Untracked(Lookup::Busy) => assert_eq!(table.count_of(key), 0),
                    other => panic!("{other:?}"),
                }
            }
            let ways: Vec<u32> = [a, b].iter().filter_map(|&k| table.find(k)).collect();
            assert!(ways.len() < 2 || ways[0] != ways[1], "{ways:?}");
            for &way in &ways {
                assert_eq!(table.freq_at(way), 1);
            }
        });
    }

    /// A value whose call is in flight is never evicted: a new value
    /// arriving while the only way is held and being released either
    /// takes the way after the release or passes untracked, and the held
    /// count is released on the value it was counted for.
    #[test]
    fn loom_value_table_a_held_count_is_never_evicted() {
        crate::sync::check(3, || {
            let table = Arc::new(ValueTable::new(1, Flavor::Counters));
            let (a, b) = (1u64 << 40 | 3, 2u64 << 40 | 5);
            let Reserve::Held(held) = table.reserve(a, 0, 1) else {
                panic!("an empty table tracks its first value");
            };
            let other = counters(&table, b, 1);
            table.release(held);
            match other.join().unwrap() {
                Reserve::Held(_) => {
                    assert_eq!(table.count_of(b), 1);
                    assert_eq!(table.find(a), None);
                }
                Reserve::Untracked(Lookup::Full | Lookup::Busy) => {
                    assert_eq!(table.count_of(a), 0);
                }
                other => panic!("{other:?}"),
            }
        });
    }
}
