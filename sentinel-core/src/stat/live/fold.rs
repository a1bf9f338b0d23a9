//! Folding: a slice rotated out of the second window moves into the minute
//! window and the lifetime totals; the readers that sum across both.
//!
//! **Invariant.** A fold moves a slice's values, whole, from its part to
//! the minute bucket of its start and to the folded totals, inside a pair
//! of sequence bumps; a reader that sums across the places a fold moves
//! values between sees each value exactly once, and lifetime totals never
//! go down between two reads.
//!
//! - *Who writes what.* The thread that rotates a part (its owner, or the
//!   holder of the shared try-lock) runs the fold:
//!   [`begin_fold`](LiveWindows::begin_fold) adds [`BUSY`] to the sequence
//!   word, [`fold`](LiveWindows::fold) adds the slice to the minute bucket
//!   and the totals, the part is zeroed and given its new start, and
//!   [`end_fold`](LiveWindows::end_fold) takes `BUSY` off and counts one
//!   fold done. An event older than its slot's slice goes to the totals
//!   only ([`late`](LiveWindows::late)), so concurrency cannot drift.
//! - *What a reader may see.* Minute sums, minute slices, concurrency and
//!   lifetime totals add the minute window or folded totals to the parts
//!   not folded yet. They run the sum while no fold is busy and keep it
//!   only if the sequence word did not change (a seqlock):
//!   [`consistent`](LiveWindows::consistent) gives up after
//!   `READ_RETRIES` tries (a fold descheduled halfway must not stall a
//!   check), [`settled`](LiveWindows::settled) waits, yielding, for as
//!   long as it takes (lifetime totals,
//!   [`lifetime_sums`](LiveWindows::lifetime_sums); never on the entry
//!   path).
//! - *Why nothing is lost or counted twice.* Outside folds every place a
//!   value can be only grows, and a fold moves a slice's whole value (at
//!   least what any earlier read saw of it) into the totals; a read that
//!   overlapped a fold is retried. Only a [`consistent`](LiveWindows::consistent)
//!   read past its retries takes what it sees (a check, once, off by what
//!   the fold moved); lifetime reads never do, so they never go down.
//!   Second-window reads (`second.rs`) need no check: a fold only removes
//!   a slice that has left the second window.
//!
//! Loom models: every `loom_*_reads_*` model in `live/loom_tests.rs`.

use crate::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use crate::sync::atomic::fence;

use super::{LANES, LiveWindows};
use crate::stat::bucket::{LANE_PASS, LANE_SUCCESS, NO_RT};

/// One fold running, in the sequence word (the low bits count folds done).
pub(super) const BUSY: u64 = 1 << 40;
/// How often a reader retries while folds run before it takes what it sees.
const READ_RETRIES: u32 = 256;

/// Folds and the reads across them.
impl LiveWindows {
    // ---- writers: folds ----

    /// An event older than its slot's slice: no window counts it, but the
    /// lifetime totals must, or concurrency would drift and counters miss it.
    #[cold]
    pub(super) fn late(&self, word: usize, low: u64, high: u64) {
        self.folded[2 * word].fetch_add(low, Relaxed);
        self.folded[2 * word + 1].fetch_add(high, Relaxed);
    }

    /// Adds a slice's values to its minute bucket and the lifetime totals.
    pub(super) fn fold(&self, start: u64, lanes: &[u64; LANES], min_rt: u32) {
        let minute = self.minute.get();
        if let Some(minute) = minute.filter(|_| lanes.iter().any(|&v| v != 0) || min_rt != NO_RT) {
            // A slice older than the minute window goes to a bucket nobody reads.
            let bucket = minute.current(start);
            for (lane, &v) in lanes.iter().enumerate() {
                if v != 0 {
                    bucket.add_lane(lane, v);
                }
            }
            bucket.record_min_rt_raw(min_rt);
        }
        for (total, &v) in self.folded.iter().zip(lanes) {
            if v != 0 {
                total.fetch_add(v, Relaxed);
            }
        }
    }

    pub(super) fn begin_fold(&self) {
        self.seq.fetch_add(BUSY, Acquire);
        fence(Release);
    }

    pub(super) fn end_fold(&self) {
        self.seq.fetch_add(1u64.wrapping_sub(BUSY), Release);
    }

    /// `read()` as of an instant no fold was running, retried while folds
    /// run (a bounded number of times: a fold descheduled halfway must not
    /// stall readers).
    fn consistent<T>(&self, read: impl Fn() -> T) -> T {
        for _ in 0..READ_RETRIES {
            let before = self.seq.load(Acquire);
            if before < BUSY {
                let value = read();
                fence(Acquire);
                if self.seq.load(Relaxed) == before {
                    return value;
                }
            }
            crate::sync::spin_loop();
        }
        read()
    }

    /// `read()` as of an instant no fold was running, retried for as long
    /// as it takes: for reads that must never see a value missing halfway
    /// through a fold (lifetime totals, which must not go down). Past the
    /// spinning retries it yields, so a fold whose thread was descheduled
    /// runs. A fold always ends: it adds and stores, at most waiting for
    /// another thread's reset of a minute bucket, never for a reader, and
    /// nothing in it panics. Never on the entry path.
    fn settled<T>(&self, read: impl Fn() -> T) -> T {
        let mut tries = 0u32;
        loop {
            let before = self.seq.load(Acquire);
            if before < BUSY {
                let value = read();
                fence(Acquire);
                if self.seq.load(Relaxed) == before {
                    return value;
                }
            }
            tries += 1;
            if tries < READ_RETRIES {
                crate::sync::spin_loop();
            } else {
                crate::sync::yield_now();
            }
        }
    }

    // ---- reads of the minute window ----

    /// Whether a second-window part starting at `start` belongs to a minute
    /// bucket in the minute window at `now`.
    fn in_minute(&self, start: u64, now: u64) -> bool {
        let current = self.minute_bucket_start(now);
        let bucket = self.minute_bucket_start(start);
        bucket <= current && current - bucket < self.minute_shape.interval_ms()
    }

    /// Every lane over the minute window at `now`, folded or not.
    pub(crate) fn minute_sums(&self, now: u64) -> [u64; LANES] {
        self.consistent(|| {
            let mut sums = [0u64; LANES];
            for (_, bucket) in self.minute.get().into_iter().flat_map(|m| m.values(now)) {
                for (lane, sum) in sums.iter_mut().enumerate() {
                    *sum = sum.wrapping_add(bucket.lane(lane));
                }
            }
            for i in 0..self.slot_count {
                self.parts(i, |start, lanes, _| {
                    if self.in_minute(start, now) {
                        for (lane, sum) in sums.iter_mut().enumerate() {
                            *sum = sum.wrapping_add(lanes.lane(lane));
                        }
                    }
                });
            }
            sums
        })
    }

    /// The lanes and minimum RT of the minute bucket starting at `start`,
    /// folded or not; `None` if nothing holds that slice.
    pub(crate) fn minute_slice(&self, start: u64) -> Option<([u64; LANES], u32)> {
        self.consistent(|| {
            let mut found = false;
            let mut sums = [0u64; LANES];
            let mut min = NO_RT;
            if let Some(bucket) = self.minute.get().and_then(|m| m.bucket_at(start)) {
                found = true;
                for (lane, sum) in sums.iter_mut().enumerate() {
                    *sum = bucket.lane(lane);
                }
                min = bucket.min_rt_raw();
            }
            for i in 0..self.slot_count {
                self.parts(i, |part, lanes, rt| {
                    if self.minute_bucket_start(part) == start {
                        found = true;
                        for (lane, sum) in sums.iter_mut().enumerate() {
                            *sum = sum.wrapping_add(lanes.lane(lane));
                        }
                        min = min.min(rt);
                    }
                });
            }
            found.then_some((sums, min))
        })
    }

    // ---- lifetime totals ----

    /// Every lane ever recorded (wrapping): the folded totals plus every
    /// part's slice not folded yet, in or out of the windows. Waits while a
    /// fold runs (see [`settled`](Self::settled)), so two reads in turn
    /// never go down.
    pub(crate) fn lifetime_sums(&self) -> [u64; LANES] {
        self.settled(|| {
            let mut sums: [u64; LANES] = std::array::from_fn(|l| self.folded[l].load(Relaxed));
            for i in 0..self.slot_count {
                self.parts(i, |_, lanes, _| {
                    for (lane, sum) in sums.iter_mut().enumerate() {
                        *sum = sum.wrapping_add(lanes.lane(lane));
                    }
                });
            }
            sums
        })
    }

    /// Every pass ever recorded less every completion (wrapping; the node
    /// corrects for batches).
    pub(crate) fn pass_less_success(&self) -> i64 {
        self.consistent(|| {
            let mut diff = self.folded[LANE_PASS]
                .load(Relaxed)
                .wrapping_sub(self.folded[LANE_SUCCESS].load(Relaxed));
            for i in 0..self.slot_count {
                self.parts(i, |_, lanes, _| {
                    diff = diff
                        .wrapping_add(lanes.lane(LANE_PASS))
                        .wrapping_sub(lanes.lane(LANE_SUCCESS));
                });
            }
            diff as i64
        })
    }
}
