//! The shape of a sliding window (its length and how many buckets split
//! it), and why a shape is refused. Below both [`LeapArray`](super::LeapArray)
//! and the node's windows, which are built from shapes.

use std::fmt;

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

/// Why a window's shape was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WindowError {
    /// The interval was zero.
    ZeroInterval,
    /// The sample count was zero.
    ZeroSamples,
    /// The interval is not a whole multiple of the sample count.
    Uneven {
        /// The interval asked for, in milliseconds.
        interval_ms: u64,
        /// The sample count asked for.
        sample_count: u32,
    },
}

impl fmt::Display for WindowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WindowError::ZeroInterval => f.write_str("window interval must be > 0 ms"),
            WindowError::ZeroSamples => f.write_str("window sample count must be > 0"),
            WindowError::Uneven {
                interval_ms,
                sample_count,
            } => write!(
                f,
                "window interval {interval_ms} ms is not a multiple of the sample count {sample_count}"
            ),
        }
    }
}

impl std::error::Error for WindowError {}

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
}
