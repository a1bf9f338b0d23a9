//! The statistics engine: LongAdder-like counters, metric buckets, and the
//! `LeapArray` sliding window that holds them.

mod adder;
mod bucket;
mod divisor;
mod leap_array;
mod live;
pub(crate) mod owner;
mod percentiles;
pub(crate) mod tally;

mod window;

pub use adder::Adder;
pub use bucket::{Bucket, MetricBucket, MetricEvent};
pub(crate) use bucket::{SUCCESS_RT_WORD, rt_as_u32};
pub use leap_array::{LeapArray, WindowError};
pub(crate) use live::{LANES, LiveWindows};
pub use percentiles::RtPercentiles;
pub(crate) use percentiles::{BY_CODE, BY_RULES, Percentiles, Tally};
pub use window::{DEFAULT_MAX_RT_MS, StatConfig, WindowShape};
