//! The windows a node keeps: the shapes (1 s / 2 samples and 60 s / 60 samples
//! by default), the statistics configuration of an instance, and the reads
//! over a window of [`MetricBucket`]s.

use std::num::NonZeroU64;

use super::bucket::{MetricBucket, MetricEvent};
use super::leap_array::{LeapArray, WindowError};

/// The shape of a sliding window: its length and how many buckets split it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowShape {
    interval_ms: u64,
    sample_count: u32,
}

impl WindowShape {
    /// A window of `interval_ms` split into `sample_count` equal buckets.
    pub const fn new(interval_ms: u64, sample_count: u32) -> Result<Self, WindowError> {
        if interval_ms == 0 {
            return Err(WindowError::ZeroInterval);
        }
        if sample_count == 0 {
            return Err(WindowError::ZeroSamples);
        }
        if interval_ms % sample_count as u64 != 0 {
            return Err(WindowError::Uneven {
                interval_ms,
                sample_count,
            });
        }
        Ok(WindowShape {
            interval_ms,
            sample_count,
        })
    }

    /// Sentinel's second window: 1 000 ms in 2 buckets of 500 ms.
    pub const SECOND: WindowShape = WindowShape {
        interval_ms: 1_000,
        sample_count: 2,
    };

    /// Sentinel's minute window: 60 000 ms in 60 buckets of one second.
    pub const MINUTE: WindowShape = WindowShape {
        interval_ms: 60_000,
        sample_count: 60,
    };

    /// The window's length in milliseconds.
    pub const fn interval_ms(self) -> u64 {
        self.interval_ms
    }

    /// The number of buckets.
    pub const fn sample_count(self) -> u32 {
        self.sample_count
    }

    /// The length of one bucket in milliseconds.
    pub const fn bucket_ms(self) -> u64 {
        self.interval_ms / self.sample_count as u64
    }
}

/// How every node of an instance keeps its statistics.
///
/// ```
/// use sentinel_core::stat::{StatConfig, WindowShape};
/// use std::num::NonZeroU64;
///
/// let config = StatConfig::default()
///     .second_window(WindowShape::new(1_000, 10)?)
///     .max_rt_ms(NonZeroU64::new(10_000).unwrap());
/// assert_eq!(config.second().bucket_ms(), 100);
/// # Ok::<(), sentinel_core::stat::WindowError>(())
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
    pub fn add(&self, now: u64, event: MetricEvent, n: u64) {
        self.current(now).add(event, n);
    }

    /// The count of `event` over the window at `now`.
    pub fn sum(&self, now: u64, event: MetricEvent) -> u64 {
        self.values(now)
            .fold(0u64, |sum, (_, bucket)| sum.wrapping_add(bucket.get(event)))
    }

    /// The largest count of `event` in one bucket of the window at `now`.
    pub fn max(&self, now: u64, event: MetricEvent) -> u64 {
        self.values(now)
            .map(|(_, bucket)| bucket.get(event))
            .max()
            .unwrap_or(0)
    }

    /// The smallest response time recorded in the window at `now`, if any.
    pub fn min_rt(&self, now: u64) -> Option<u64> {
        self.values(now)
            .filter_map(|(_, bucket)| bucket.min_rt())
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_validate() {
        assert_eq!(WindowShape::new(1_000, 2), Ok(WindowShape::SECOND));
        assert_eq!(WindowShape::new(60_000, 60), Ok(WindowShape::MINUTE));
        assert!(WindowShape::new(0, 1).is_err());
        assert!(WindowShape::new(10, 0).is_err());
        assert!(WindowShape::new(1_000, 7).is_err());
        assert_eq!(WindowShape::SECOND.bucket_ms(), 500);
    }

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
