//! One time slice of statistics: a counter per [`MetricEvent`] and the
//! minimum response time seen in the slice.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::adder::Striped;

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

    const COUNT: usize = Self::ALL.len();

    #[inline]
    fn lane(self) -> usize {
        self as usize
    }
}

/// A bucket that a [`LeapArray`](super::LeapArray) can hold: created empty,
/// reset in place when its slot is reused for a newer time slice.
pub trait Bucket: Send + Sync + 'static {
    /// An empty bucket.
    fn empty() -> Self;

    /// Makes the bucket empty again. Writers may race with a reset.
    fn reset(&self);
}

/// No response time recorded yet.
const NO_RT: u64 = u64::MAX;

/// Counters for one time slice: one LongAdder-like counter per [`MetricEvent`]
/// plus the minimum response time.
///
/// The counters are striped together, so an uncontended add is one
/// compare-and-swap and contended adds go to per-thread cells.
pub struct MetricBucket {
    counters: Striped<{ MetricEvent::COUNT }>,
    min_rt: AtomicU64,
}

impl MetricBucket {
    /// An empty bucket.
    pub fn new() -> Self {
        MetricBucket {
            counters: Striped::default(),
            min_rt: AtomicU64::new(NO_RT),
        }
    }

    /// Adds `n` to `event`. Adding to [`MetricEvent::Rt`] this way does not
    /// update the minimum; use [`add_rt`](Self::add_rt).
    #[inline]
    pub fn add(&self, event: MetricEvent, n: u64) {
        self.counters.add(event.lane(), n);
    }

    /// Adds one response time (milliseconds) to the RT sum and the minimum.
    #[inline]
    pub fn add_rt(&self, rt_ms: u64) {
        self.counters.add(MetricEvent::Rt.lane(), rt_ms);
        if rt_ms < self.min_rt.load(Relaxed) {
            self.min_rt.fetch_min(rt_ms, Relaxed);
        }
    }

    /// The count of `event`.
    #[inline]
    pub fn get(&self, event: MetricEvent) -> u64 {
        self.counters.sum(event.lane())
    }

    /// The smallest response time recorded, if any.
    pub fn min_rt(&self) -> Option<u64> {
        match self.min_rt.load(Relaxed) {
            NO_RT => None,
            rt => Some(rt),
        }
    }

    /// Empties the bucket.
    pub fn reset(&self) {
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
}
