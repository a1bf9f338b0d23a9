//! The minute behind a resource's percentiles: one sparse histogram per
//! second that threads have handed over, and what a read adds up.

use std::sync::atomic::Ordering::Relaxed;

use hdrhistogram::Histogram;

use super::RtPercentiles;
use super::buckets::{self, BUCKETS, TOP};
use super::recorder::{ThreadRecorder, UNUSED};

/// Seconds in the window.
pub(super) const SECONDS: u64 = 60;

/// One second of handed-over counts.
#[derive(Debug)]
struct Second {
    second: u64,
    /// (bucket, count), by bucket; only buckets with counts.
    counts: Vec<(u16, u32)>,
    max: u64,
    sum: u64,
}

impl Second {
    fn add(&mut self, bucket: usize, n: u32) {
        let bucket = bucket as u16;
        // Handed over in bucket order, so the common case appends.
        match self.counts.last() {
            Some(&(last, _)) if last < bucket => self.counts.push((bucket, n)),
            None => self.counts.push((bucket, n)),
            _ => match self.counts.binary_search_by_key(&bucket, |&(b, _)| b) {
                Ok(at) => self.counts[at].1 = self.counts[at].1.saturating_add(n),
                Err(at) => self.counts.insert(at, (bucket, n)),
            },
        }
    }
}

/// The seconds threads handed over (a ring by second), and every call
/// handed over since tracking began.
#[derive(Debug)]
pub(super) struct Minute {
    seconds: Vec<Second>,
    handed_count: u64,
    handed_sum: u64,
}

impl Minute {
    pub(super) fn new() -> Self {
        Minute {
            seconds: (0..SECONDS)
                .map(|_| Second {
                    second: UNUSED,
                    counts: Vec::new(),
                    max: 0,
                    sum: 0,
                })
                .collect(),
            handed_count: 0,
            handed_sum: 0,
        }
    }

    /// The place of `second`, emptied if it held an older second; `None`
    /// when it holds a newer one (`second` has left every window).
    fn second_mut(&mut self, second: u64) -> Option<&mut Second> {
        let place = &mut self.seconds[(second % SECONDS) as usize];
        if place.second == second {
            return Some(place);
        }
        if place.second != UNUSED && place.second > second {
            return None;
        }
        place.second = second;
        // Keeps its capacity: no allocation once every place has been used.
        place.counts.clear();
        place.max = 0;
        place.sum = 0;
        Some(place)
    }

    /// Records one call straight into the minute (threads without a
    /// recorder of their own).
    pub(super) fn record(&mut self, second: u64, rt_ms: u64) {
        self.handed_count += 1;
        self.handed_sum = self.handed_sum.wrapping_add(rt_ms);
        if let Some(place) = self.second_mut(second) {
            place.add(buckets::index(rt_ms), 1);
            place.max = place.max.max(rt_ms);
            place.sum = place.sum.wrapping_add(rt_ms);
        }
    }

    /// Moves what `recorder` holds for its second into the minute and
    /// empties it. Called by the recorder's thread, the only one that
    /// writes it, with the minute locked.
    pub(super) fn hand_over(&mut self, recorder: &ThreadRecorder) {
        let second = recorder.second.load(Relaxed);
        if second == UNUSED {
            return;
        }
        let sum = recorder.sum.load(Relaxed);
        let max = recorder.max.load(Relaxed);
        recorder.sum.store(0, Relaxed);
        recorder.max.store(0, Relaxed);
        self.handed_sum = self.handed_sum.wrapping_add(sum);
        let mut place = self.second_mut(second);
        if let Some(place) = place.as_deref_mut() {
            place.max = place.max.max(max);
            place.sum = place.sum.wrapping_add(sum);
        }
        let mut handed = 0;
        for (bucket, count) in recorder.counts.iter().enumerate() {
            let n = count.load(Relaxed);
            if n != 0 {
                count.store(0, Relaxed);
                handed += u64::from(n);
                if let Some(place) = place.as_deref_mut() {
                    place.add(bucket, n);
                }
            }
        }
        self.handed_count += handed;
    }

    /// Adds the handed-over seconds from `oldest` on to `tally`.
    pub(super) fn read(&self, oldest: u64, tally: &mut Tally) {
        tally.total_count += self.handed_count;
        tally.total_sum = tally.total_sum.wrapping_add(self.handed_sum);
        for place in &self.seconds {
            if place.second == UNUSED || place.second < oldest {
                continue;
            }
            for &(bucket, n) in &place.counts {
                tally.add(usize::from(bucket), u64::from(n));
            }
            tally.max = tally.max.max(place.max);
            tally.sum = tally.sum.wrapping_add(place.sum);
        }
    }
}

/// What a read adds up: the merged histogram of the minute, and the totals.
#[derive(Debug)]
pub(crate) struct Tally {
    histogram: Histogram<u64>,
    max: u64,
    sum: u64,
    total_count: u64,
    total_sum: u64,
}

impl Tally {
    /// An empty tally (allocates the histogram, about 14 KiB).
    pub(crate) fn new() -> Self {
        Tally {
            // Two significant digits: every bucket's highest time is a value
            // of its own there, so merging loses nothing.
            histogram: Histogram::new_with_bounds(1, TOP, 2)
                .expect("constant bounds: 1 <= TOP, two significant digits"),
            max: 0,
            sum: 0,
            total_count: 0,
            total_sum: 0,
        }
    }

    pub(super) fn reset(&mut self) {
        self.histogram.reset();
        self.max = 0;
        self.sum = 0;
        self.total_count = 0;
        self.total_sum = 0;
    }

    fn add(&mut self, bucket: usize, n: u64) {
        self.histogram
            .saturating_record_n(buckets::highest(bucket), n);
    }

    /// Adds what `recorder` holds: its counts to the minute when its second
    /// is `oldest` or later, and to the totals in any case.
    pub(super) fn add_recorder(&mut self, recorder: &ThreadRecorder, oldest: u64) {
        let second = recorder.second.load(Relaxed);
        if second == UNUSED {
            return;
        }
        let in_window = second >= oldest;
        let sum = recorder.sum.load(Relaxed);
        self.total_sum = self.total_sum.wrapping_add(sum);
        if in_window {
            self.sum = self.sum.wrapping_add(sum);
            self.max = self.max.max(recorder.max.load(Relaxed));
        }
        for bucket in 0..BUCKETS {
            let n = u64::from(recorder.counts[bucket].load(Relaxed));
            if n != 0 {
                self.total_count += n;
                if in_window {
                    self.add(bucket, n);
                }
            }
        }
    }

    /// The figures added up.
    pub(super) fn percentiles(&self) -> RtPercentiles {
        let count = self.histogram.len();
        // The nearest rank, `ceil(share x count)`, in integers: the
        // histogram's own `ceil(q * count)` in floating point reads one
        // call too far when the product rounds up (0.9 * 100 = 90.000...01).
        let at = |per_cent: u64| match count {
            0 => 0,
            _ => {
                let rank = (u128::from(count) * u128::from(per_cent)).div_ceil(100) as u64;
                let quantile = (rank.max(1) as f64 - 0.5) / count as f64;
                // A bucket reports its highest time; never above the largest seen.
                self.histogram.value_at_quantile(quantile).min(self.max)
            }
        };
        RtPercentiles {
            p50: at(50),
            p90: at(90),
            p99: at(99),
            max: self.max,
            count,
            sum_ms: self.sum,
            total_count: self.total_count,
            total_sum_ms: self.total_sum,
        }
    }
}

impl Default for Tally {
    fn default() -> Self {
        Tally::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bucket_keeps_its_value_in_the_histogram() {
        let tally = Tally::new();
        for bucket in 0..BUCKETS {
            let high = buckets::highest(bucket);
            assert_eq!(
                tally.histogram.highest_equivalent(high),
                high,
                "bucket {bucket}"
            );
        }
    }

    #[test]
    fn a_second_older_than_the_place_holds_is_dropped() {
        let mut minute = Minute::new();
        minute.record(SECONDS + 5, 7);
        minute.record(5, 9);
        let mut tally = Tally::new();
        minute.read(0, &mut tally);
        let p = tally.percentiles();
        assert_eq!((p.count, p.max), (1, 7));
        assert_eq!(
            (p.total_count, p.total_sum_ms),
            (2, 16),
            "lifetime totals keep both"
        );
    }
}
