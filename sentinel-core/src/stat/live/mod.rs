//! The windows of a node as the hot path writes them.
//!
//! **Invariant.** Every event is counted in exactly one place: the owned
//! part of its thread (if the thread owns one), else the shared part of
//! its slot, else (older than its slot's slice) the lifetime totals only;
//! and a read visits each place once. Each file below keeps its own
//! protocol; this one chooses the place ([`LiveWindows::add`]) and lists
//! the places a read visits (`parts`).
//!
//! Two ideas keep an entry and its exit down to plain loads and stores on one
//! thread, where [`LeapArray`] of [`MetricBucket`]s needs an atomic
//! read-modify-write (about 7 ns on the reference machine) per event and
//! window:
//!
//! - **An owner thread.** The first thread to write a node owns it until it
//!   exits. Each slot of the second window has words only the owner writes,
//!   with a load and a store (no `lock` prefix), and a
//!   [`PackedLanes`](crate::stat::adder::PackedLanes) for every other thread
//!   (a compare-and-swap while uncontended, striped cells once two threads
//!   collide). A thread pool's worker that owns a node pays nothing
//!   for atomicity; a task that exits on another thread uses the shared part.
//!   The owner rotates its own words: when it writes a slot that holds an
//!   older slice, it folds the old values away and starts the new slice. No
//!   other thread ever stores to them, so no store of the owner can undo a
//!   reset. The shared part is rotated as a `LeapArray` slot is, under a
//!   try-lock, but by swapping each word with zero so that a racing add is
//!   either taken or left for the new slice, never lost.
//! - **The minute window is fed by folding.** Events are written to the
//!   second window only. When a slice of it is rotated out, its values are
//!   added to the minute bucket of its start and to the lifetime totals of
//!   every lane (one add per lane and slice, none per event). Reads of the
//!   minute window add the second-window slices not folded yet, so nothing is
//!   missing and nothing counted twice. A lifetime total is likewise the
//!   folded total plus every slice not folded yet, whatever its age.
//!   Concurrency needs no counter of its own: it is every pass ever recorded
//!   less every completion (the node corrects for batch counts above one).
//!
//! A fold moves values from one place to another; readers that sum across
//! both (minute totals, lifetime totals, concurrency) check a sequence number
//! and retry while a fold is running, like a seqlock (`fold.rs`, which also
//! says why lifetime totals never go down). Second-window reads need no such
//! check: a fold only removes a slice that has already left the second window.
//!
//! The protocols, one file each:
//!
//! - [`owner`](crate::stat::owner) (one level up, shared with the tally
//!   and percentiles): thread tokens, who may own a part;
//! - `owned.rs`: the owner's parts, written with loads and stores;
//! - `shared.rs`: the shared parts, rotated under a try-lock by swapping
//!   words with zero;
//! - `fold.rs`: folds into the minute window and lifetime totals, and the
//!   sequence-checked reads across them;
//! - `second.rs`: reads of the second window (no check needed);
//! - `tests.rs`, `loom_tests.rs`: unit tests and loom models.

use crate::sync::OnceBox;
use crate::sync::atomic::Ordering::{Acquire, Relaxed};
use crate::sync::atomic::{AtomicBool, AtomicU64};
use std::fmt;

use crate::stat::adder::CachePadded;
use crate::stat::bucket::MetricBucket;
use crate::stat::divisor::Divisor;
use crate::stat::leap_array::LeapArray;
use crate::stat::owner::{NO_OWNER, token};
use crate::stat::shape::WindowShape;

mod fold;
mod owned;
mod second;
mod shared;

use owned::{Owned, Slot, lane_of};
use shared::SharedPart;

/// The start of a part that has never held a slice.
const UNUSED: u64 = u64::MAX;
/// The latest time told apart; later readings are taken as this.
const LAST_TIME: u64 = u64::MAX - 1;
/// Counters per bucket, and the words that pack them.
pub(crate) const LANES: usize = 6;
const WORDS: usize = LANES / 2;

/// One part of a slot, to read.
#[derive(Clone, Copy)]
enum Part<'a> {
    Owned(Slot<'a>),
    Shared(&'a SharedPart),
}

impl Part<'_> {
    /// The count in `lane`.
    #[inline(always)]
    fn lane(self, lane: usize) -> u64 {
        match self {
            Part::Owned(slot) => lane_of(slot.word(lane / 2).load(Relaxed), lane),
            Part::Shared(part) => part.lanes.sum(lane),
        }
    }
}

/// The second window (written), the minute window (folded into) and the
/// lifetime totals of one node.
///
/// The first thread to write the node owns its first part; the second
/// thread owns a second part, allocated then (two threads on one hot
/// resource both write with plain stores, and read one line of the other's
/// per check); any further thread adds through the shared parts.
pub(crate) struct LiveWindows {
    interval_ms: u64,
    bucket_len: Divisor,
    sample_count: Divisor,
    first: Owned,
    second: OnceBox<Owned>,
    /// The number of slots (`sample_count`).
    slot_count: usize,
    shared: OnceBox<Box<[CachePadded<SharedPart>]>>,
    /// The minute window: made with the windows, or (origin nodes) when
    /// first asked for ([`keep_minute`](Self::keep_minute)). Until then
    /// folds feed the lifetime totals only.
    minute: OnceBox<LeapArray<MetricBucket>>,
    minute_shape: WindowShape,
    /// Try-lock for rotating shared parts.
    rotating: AtomicBool,
    /// Every lane folded out of the second window, ever, plus late events.
    folded: [AtomicU64; LANES],
    /// Folds running (multiples of [`BUSY`](fold::BUSY)) and folds done (low
    /// bits).
    seq: AtomicU64,
}

impl LiveWindows {
    pub(crate) fn new(second: WindowShape, minute: WindowShape) -> Self {
        let windows = Self::without_minute(second, minute);
        windows.keep_minute();
        windows
    }

    /// As [`new`](Self::new), the minute window made only when
    /// [`keep_minute`](Self::keep_minute) first asks for it.
    pub(crate) fn without_minute(second: WindowShape, minute: WindowShape) -> Self {
        LiveWindows {
            interval_ms: second.interval_ms(),
            bucket_len: Divisor::new(second.bucket_ms()),
            sample_count: Divisor::new(u64::from(second.sample_count())),
            first: Owned::new(second.sample_count() as usize),
            second: OnceBox::new(),
            slot_count: second.sample_count() as usize,
            shared: OnceBox::new(),
            minute: OnceBox::new(),
            minute_shape: minute,
            rotating: AtomicBool::new(false),
            folded: std::array::from_fn(|_| AtomicU64::new(0)),
            seq: AtomicU64::new(0),
        }
    }

    /// The second window's length in milliseconds.
    pub(crate) fn interval_ms(&self) -> u64 {
        self.interval_ms
    }

    /// The length of the second window's buckets.
    pub(crate) fn bucket_len_ms(&self) -> u64 {
        self.bucket_len.get()
    }

    /// The second window's sample count.
    pub(crate) fn sample_count(&self) -> u32 {
        self.sample_count.get() as u32
    }

    /// The minute window, made now if it was not.
    pub(crate) fn keep_minute(&self) -> &LeapArray<MetricBucket> {
        self.minute
            .get_or_init(|| Box::new(LeapArray::with_shape(self.minute_shape)))
    }

    /// Whether the minute window was made.
    pub(crate) fn keeps_minute(&self) -> bool {
        self.minute.get().is_some()
    }

    /// The minute window's shape.
    pub(crate) fn minute_shape(&self) -> WindowShape {
        self.minute_shape
    }

    /// The start of the minute bucket holding `t`.
    pub(crate) fn minute_bucket_start(&self, t: u64) -> u64 {
        let t = t.min(LAST_TIME);
        t - t % self.minute_shape.bucket_ms()
    }

    // ---- writes ----

    /// Adds `low` and `high` to the two lanes of `word` in the slice holding
    /// `now`, and `rt` as a candidate minimum response time.
    #[inline(always)]
    pub(crate) fn add(&self, now: u64, word: usize, low: u64, high: u64, rt: Option<u32>) {
        let me = token();
        let part = if self.first.owner.load(Relaxed) == me {
            Some(&self.first)
        } else {
            self.second
                .get()
                .filter(|part| part.owner.load(Relaxed) == me)
        };
        if let Some(part) = part {
            // An owner, still in its latest slice: one load and one store.
            let hint = part.hint_start.load(Relaxed);
            if now >= hint && now - hint < self.bucket_len.get() {
                let index = part.hint_slot.load(Relaxed) as usize;
                if Self::write_owned(part.slot(index), word, low, high, rt) {
                    return;
                }
                return self.add_shared(index, hint, word, low, high, rt);
            }
        }
        self.add_slow(now, me, word, low, high, rt);
    }

    /// Any add but an owner's within its latest slice.
    #[inline(never)]
    fn add_slow(&self, now: u64, me: u64, word: usize, low: u64, high: u64, rt: Option<u32>) {
        let number = self.bucket_len.div(now.min(LAST_TIME));
        let start = number * self.bucket_len.get();
        let index = self.sample_count.rem(number) as usize;
        if let Some(part) = self.owned_by(me) {
            let slot = part.slot(index);
            let held = slot.start().load(Relaxed);
            if held != start {
                if held != UNUSED && held > start {
                    // Older than the slot's slice: out of every window.
                    return self.late(word, low, high);
                }
                self.rotate_owned(slot, held, start);
            }
            let hint = part.hint_start.load(Relaxed);
            if hint == UNUSED || start > hint {
                part.hint_slot.store(index as u32, Relaxed);
                part.hint_start.store(start, Relaxed);
            }
            if Self::write_owned(slot, word, low, high, rt) {
                return;
            }
        }
        self.add_shared(index, start, word, low, high, rt);
    }

    /// The part `me` owns, claimed if free: the second part first when `me`
    /// holds it (so one thread never takes both), then the first, then the
    /// second, allocated on the first claim.
    fn owned_by(&self, me: u64) -> Option<&Owned> {
        if me == NO_OWNER {
            return None;
        }
        if let Some(second) = self.second.get()
            && second.owner.load(Relaxed) == me
        {
            return Some(second);
        }
        if Self::claim(&self.first, me) {
            return Some(&self.first);
        }
        let second = self
            .second
            .get_or_init(|| Box::new(Owned::new(self.slot_count)));
        Self::claim(second, me).then_some(second)
    }

    // ---- the places a read visits ----

    /// Calls `f(start, part, min_rt)` for each part of slot `index` that
    /// holds a slice.
    #[inline(always)]
    fn parts(&self, index: usize, mut f: impl FnMut(u64, Part<'_>, u32)) {
        for part in std::iter::once(&self.first).chain(self.second.get()) {
            let slot = part.slot(index);
            let start = slot.start().load(Acquire);
            if start != UNUSED {
                f(start, Part::Owned(slot), slot.min_rt().load(Relaxed));
            }
        }
        if let Some(parts) = self.shared.get() {
            let part = &parts[index].0;
            let start = part.start.load(Acquire);
            if start != UNUSED {
                f(start, Part::Shared(part), part.min_rt.load(Relaxed));
            }
        }
    }
}

impl fmt::Debug for LiveWindows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveWindows")
            .field("interval_ms", &self.interval_ms)
            .field("sample_count", &self.sample_count.get())
            .field("minute", &self.minute)
            .field("owned", &(self.first.owner.load(Relaxed) != 0))
            .field("owned_twice", &self.second.get().is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests;
