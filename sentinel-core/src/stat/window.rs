//! The windows a node keeps: the statistics configuration of an instance
//! (the two window shapes, 1 s / 2 samples and 60 s / 60 samples by default,
//! and the RT ceiling), and the reads over a window of [`MetricBucket`]s.

use std::num::NonZeroU64;

use super::bucket::{MetricBucket, MetricEvent};
use super::leap_array::LeapArray;
use super::shape::WindowShape;

/// How every node of an instance keeps its statistics.
///
/// ```
/// use sentinel_flow_core::stat::{StatConfig, WindowShape};
/// use std::num::NonZeroU64;
///
/// let config = StatConfig::default()
///     .second_window(WindowShape::new(1_000, 10)?)
///     .max_rt_ms(NonZeroU64::new(10_000).unwrap());
/// assert_eq!(config.second().bucket_ms(), 100);
/// # Ok::<(), sentinel_flow_core::stat::WindowError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatConfig {
    second: WindowShape,
    minute: WindowShape,
    max_rt_ms: NonZeroU64,
}

impl Default for StatConfig {
    fn default() -> Self {
        StatConfig {
            second: WindowShape::SECOND,
            minute: WindowShape::MINUTE,
            max_rt_ms: NonZeroU64::new(DEFAULT_MAX_RT_MS).unwrap_or(NonZeroU64::MIN),
        }
    }
}

/// The default response-time ceiling, as in Sentinel (`csp.sentinel.statistic.max.rt`).
pub const DEFAULT_MAX_RT_MS: u64 = 5_000;

impl StatConfig {
    /// The window that QPS, RT and concurrency checks read (default 1 s / 2).
    pub fn second_window(mut self, shape: WindowShape) -> Self {
        self.second = shape;
        self
    }

    /// The window behind totals and per-second history (default 60 s / 60).
    pub fn minute_window(mut self, shape: WindowShape) -> Self {
        self.minute = shape;
        self
    }

    /// The ceiling of a recorded response time and the minimum RT reported
    /// when none was recorded (default 5 000 ms).
    pub fn max_rt_ms(mut self, max_rt_ms: NonZeroU64) -> Self {
        self.max_rt_ms = max_rt_ms;
        self
    }

    /// The second window's shape.
    pub fn second(&self) -> WindowShape {
        self.second
    }

    /// The minute window's shape.
    pub fn minute(&self) -> WindowShape {
        self.minute
    }

    /// The response-time ceiling in milliseconds.
    pub fn max_rt(&self) -> u64 {
        self.max_rt_ms.get()
    }
}

/// Reads over a window of metric buckets. None of them allocates or writes.
impl LeapArray<MetricBucket> {
    /// Adds `n` to `event` in the bucket for `now`.
    #[inline]
    pub(crate) fn add(&self, now: u64, event: MetricEvent, n: u64) {
        self.current(now).add(event, n);
    }

    /// The count of `event` over the window at `now`.
    pub(crate) fn sum(&self, now: u64, event: MetricEvent) -> u64 {
        self.values(now)
            .fold(0u64, |sum, (_, bucket)| sum.wrapping_add(bucket.get(event)))
    }

    #[cfg(test)]
    /// The largest count of `event` in one bucket of the window at `now`.
    pub(crate) fn max(&self, now: u64, event: MetricEvent) -> u64 {
        self.values(now)
            .map(|(_, bucket)| bucket.get(event))
            .max()
            .unwrap_or(0)
    }

    #[cfg(test)]
    /// The smallest response time recorded in the window at `now`, if any.
    pub(crate) fn min_rt(&self, now: u64) -> Option<u64> {
        self.values(now)
            .filter_map(|(_, bucket)| bucket.min_rt())
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_over_metric_window() {
        let window = LeapArray::<MetricBucket>::with_shape(WindowShape::SECOND);
        window.add(0, MetricEvent::Success, 3);
        window.current(100).add_rt(20);
        window.add(600, MetricEvent::Success, 5);
        window.current(700).add_rt(7);
        assert_eq!(window.sum(999, MetricEvent::Success), 8);
        assert_eq!(window.max(999, MetricEvent::Success), 5);
        assert_eq!(window.min_rt(999), Some(7));
        assert_eq!(window.sum(999, MetricEvent::Rt), 27);
        // [0, 500) leaves the window at 1 000.
        assert_eq!(window.max(1_000, MetricEvent::Success), 5);
        assert_eq!(window.min_rt(1_500), None);
        assert_eq!(window.max(1_500, MetricEvent::Success), 0);
    }
}
