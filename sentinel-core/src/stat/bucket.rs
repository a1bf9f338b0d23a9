//! One time slice of statistics: a counter per [`MetricEvent`] and the
//! minimum response time seen in the slice.

use crate::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::fmt;

use super::adder::PackedLanes;

/// What a bucket counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum MetricEvent {
    /// Requests let through.
    Pass,
    /// Requests refused by a rule.
    Block,
    /// Completed requests that recorded an error.
    Exception,
    /// Completed requests.
    Success,
    /// The sum of response times, in milliseconds.
    Rt,
    /// Requests let through against a future window's quota.
    OccupiedPass,
}

impl MetricEvent {
    /// Every event, in declaration order.
    pub const ALL: [MetricEvent; 6] = [
        MetricEvent::Pass,
        MetricEvent::Block,
        MetricEvent::Exception,
        MetricEvent::Success,
        MetricEvent::Rt,
        MetricEvent::OccupiedPass,
    ];

    /// The lane of the packed counters: success and RT share a word, so a
    /// completion is one atomic operation.
    #[inline]
    pub(crate) fn lane(self) -> usize {
        match self {
            MetricEvent::Pass => 0,
            MetricEvent::Block => 1,
            MetricEvent::Exception => 2,
            MetricEvent::OccupiedPass => 3,
            MetricEvent::Success => SUCCESS_RT_WORD * 2,
            MetricEvent::Rt => SUCCESS_RT_WORD * 2 + 1,
        }
    }
}

/// A response time in milliseconds as a bucket keeps it: times past
/// `u32::MAX - 1` ms (49 days) are kept as that.
#[inline]
pub(crate) fn rt_as_u32(rt_ms: u64) -> u32 {
    u32::try_from(rt_ms).unwrap_or(NO_RT - 1).min(NO_RT - 1)
}

/// A bucket that a [`LeapArray`](super::LeapArray) can hold: created empty,
/// reset in place when its slot is reused for a newer time slice.
pub(crate) trait Bucket: Send + Sync + 'static {
    /// An empty bucket.
    fn empty() -> Self;

    /// Makes the bucket empty again. Writers may race with a reset.
    fn reset(&self);
}

/// No response time recorded yet.
pub(crate) const NO_RT: u32 = u32::MAX;

/// The word holding the success (low) and RT sum (high) lanes.
pub(crate) const SUCCESS_RT_WORD: usize = 2;
/// The pass lane (low half of word 0).
pub(crate) const LANE_PASS: usize = 0;
/// The success lane.
pub(crate) const LANE_SUCCESS: usize = SUCCESS_RT_WORD * 2;

/// Counters for one time slice: one LongAdder-like counter per [`MetricEvent`]
/// plus the minimum response time.
///
/// The counters are packed and striped together: an uncontended add is one
/// compare-and-swap, contended adds go to per-thread cells, and the bucket
/// takes 40 bytes until contention allocates its cells.
pub(crate) struct MetricBucket {
    counters: PackedLanes,
    min_rt: AtomicU32,
}

impl MetricBucket {
    /// An empty bucket.
    pub(crate) fn new() -> Self {
        MetricBucket {
            counters: PackedLanes::default(),
            min_rt: AtomicU32::new(NO_RT),
        }
    }

    /// Adds `n` to `event`. Adding to [`MetricEvent::Rt`] this way does not
    /// update the minimum; use [`add_rt`](Self::add_rt).
    #[inline]
    pub(crate) fn add(&self, event: MetricEvent, n: u64) {
        self.counters.add(event.lane(), n);
    }

    #[cfg(test)]
    /// Adds one response time (milliseconds) to the RT sum and the minimum.
    #[inline]
    pub(crate) fn add_rt(&self, rt_ms: u64) {
        self.counters.add(MetricEvent::Rt.lane(), rt_ms);
        self.record_min_rt(rt_ms);
    }

    #[cfg(test)]
    /// Records `n` completions that took `rt_ms` in total: success and RT sum
    /// in one atomic operation, and `rt_ms` as a candidate minimum.
    #[inline]
    pub(crate) fn add_success_and_rt(&self, n: u64, rt_ms: u64) {
        self.counters.add_pair(SUCCESS_RT_WORD, n, rt_ms);
        self.record_min_rt(rt_ms);
    }

    #[cfg(test)]
    #[inline]
    fn record_min_rt(&self, rt_ms: u64) {
        self.record_min_rt_raw(rt_as_u32(rt_ms));
    }

    /// Records `rt` (already narrowed; [`NO_RT`] records nothing) as a
    /// candidate minimum.
    #[inline]
    pub(crate) fn record_min_rt_raw(&self, rt: u32) {
        if rt < self.min_rt.load(Relaxed) {
            self.min_rt.fetch_min(rt, Relaxed);
        }
    }

    /// Adds `n` to counter `lane` (see [`MetricEvent::lane`]).
    #[inline]
    pub(crate) fn add_lane(&self, lane: usize, n: u64) {
        self.counters.add(lane, n);
    }

    /// The count in `lane`.
    #[inline]
    pub(crate) fn lane(&self, lane: usize) -> u64 {
        self.counters.sum(lane)
    }

    /// The minimum RT as stored ([`NO_RT`] when none).
    pub(crate) fn min_rt_raw(&self) -> u32 {
        self.min_rt.load(Relaxed)
    }

    /// The count of `event`.
    #[inline]
    pub(crate) fn get(&self, event: MetricEvent) -> u64 {
        self.counters.sum(event.lane())
    }

    /// The smallest response time recorded, if any.
    pub(crate) fn min_rt(&self) -> Option<u64> {
        match self.min_rt.load(Relaxed) {
            NO_RT => None,
            rt => Some(u64::from(rt)),
        }
    }

    /// Empties the bucket.
    pub(crate) fn reset(&self) {
        self.counters.reset();
        self.min_rt.store(NO_RT, Relaxed);
    }
}

impl Default for MetricBucket {
    fn default() -> Self {
        Self::new()
    }
}

impl Bucket for MetricBucket {
    fn empty() -> Self {
        Self::new()
    }

    fn reset(&self) {
        MetricBucket::reset(self);
    }
}

impl fmt::Debug for MetricBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = f.debug_struct("MetricBucket");
        for event in MetricEvent::ALL {
            s.field(&format!("{event:?}"), &self.get(event));
        }
        s.field("min_rt", &self.min_rt()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_event_separately() {
        let bucket = MetricBucket::new();
        for (i, event) in MetricEvent::ALL.into_iter().enumerate() {
            bucket.add(event, i as u64 + 1);
        }
        for (i, event) in MetricEvent::ALL.into_iter().enumerate() {
            assert_eq!(bucket.get(event), i as u64 + 1);
        }
    }

    #[test]
    fn min_rt_tracks_smallest_and_resets() {
        let bucket = MetricBucket::new();
        assert_eq!(bucket.min_rt(), None);
        bucket.add_rt(30);
        bucket.add_rt(12);
        bucket.add_rt(40);
        assert_eq!(bucket.min_rt(), Some(12));
        assert_eq!(bucket.get(MetricEvent::Rt), 82);
        bucket.reset();
        assert_eq!(bucket.min_rt(), None);
        assert_eq!(bucket.get(MetricEvent::Rt), 0);
    }

    #[test]
    fn success_and_rt_together() {
        let bucket = MetricBucket::new();
        bucket.add_success_and_rt(2, 30);
        bucket.add_success_and_rt(1, 9);
        bucket.add(MetricEvent::Pass, 3);
        assert_eq!(bucket.get(MetricEvent::Success), 3);
        assert_eq!(bucket.get(MetricEvent::Rt), 39);
        assert_eq!(bucket.get(MetricEvent::Pass), 3);
        assert_eq!(bucket.min_rt(), Some(9));
    }

    #[test]
    fn stays_small() {
        assert!(std::mem::size_of::<MetricBucket>() <= 40);
    }
}
