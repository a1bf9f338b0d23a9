//! Reads of the second window: what the entry path's QPS and RT checks
//! read.
//!
//! **Invariant.** A second-window read sums, per slot, the parts whose
//! slice lies in the window at `now`; it takes no lock and no sequence
//! check, because a fold only moves a slice that has already left the
//! second window, so no value it could count moves while it reads.
//!
//! - *Who writes what.* Nothing here writes.
//! - *What a reader may see.* Each part's start with acquire, then its
//!   lanes: a part just rotated shows its new slice's values (zeroed
//!   before the new start was published), never the old slice's under the
//!   new start. Parts of one slot count together only when they hold the
//!   same slice.
//! - *Why nothing is lost or counted twice.* Each event is in one part
//!   (see `mod.rs`), and each part is read once per slot.

use super::{LANES, LAST_TIME, LiveWindows, Part};
use crate::stat::bucket::NO_RT;

impl LiveWindows {
    /// The start of the slice holding `now`.
    #[inline]
    fn slice_start(&self, now: u64) -> u64 {
        let now = now.min(LAST_TIME);
        now - self.bucket_len.rem(now)
    }

    /// Calls `f(slot, lanes, min_rt)` for every part in the second window at
    /// `now`: the parts of one slot hold the same slice when both count.
    #[inline(always)]
    fn second_parts(&self, now: u64, mut f: impl FnMut(usize, Part<'_>, u32)) {
        let current = self.slice_start(now);
        for i in 0..self.slot_count {
            self.parts(i, |start, lanes, min_rt| {
                if start <= current && current - start < self.interval_ms {
                    f(i, lanes, min_rt);
                }
            });
        }
    }

    /// The count of `lane` over the second window at `now`.
    #[inline]
    pub(crate) fn second_sum(&self, now: u64, lane: usize) -> u64 {
        let mut sum = 0u64;
        self.second_parts(now, |_, lanes, _| sum = sum.wrapping_add(lanes.lane(lane)));
        sum
    }

    /// Every lane over the second window at `now`.
    pub(crate) fn second_sums(&self, now: u64) -> [u64; LANES] {
        let mut sums = [0u64; LANES];
        self.second_parts(now, |_, lanes, _| {
            for (lane, sum) in sums.iter_mut().enumerate() {
                *sum = sum.wrapping_add(lanes.lane(lane));
            }
        });
        sums
    }

    /// The largest count of `lane` in one slice of the second window.
    pub(crate) fn second_max(&self, now: u64, lane: usize) -> u64 {
        let mut per_slot = [0u64; 64];
        let mut max = 0;
        self.second_parts(now, |slot, lanes, _| {
            let v = lanes.lane(lane);
            match per_slot.get_mut(slot) {
                Some(sum) => {
                    *sum = sum.wrapping_add(v);
                    max = max.max(*sum);
                }
                // Past 64 samples, the parts are compared apart.
                None => max = max.max(v),
            }
        });
        max
    }

    /// The smallest response time over the second window, if any.
    pub(crate) fn second_min_rt(&self, now: u64) -> Option<u64> {
        let mut min = NO_RT;
        self.second_parts(now, |_, _, rt| min = min.min(rt));
        (min != NO_RT).then_some(u64::from(min))
    }
}
