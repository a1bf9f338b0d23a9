//! The statistics engine: what a node counts, and how it counts without a
//! lock on the entry path.
//!
//! The folder, lowest layer first; each module imports only from modules
//! above it in this list (never from one below, never in a circle):
//!
//! ```text
//! adder.rs        Adder: LongAdder-like striped counter; PackedLanes, a
//!                 bucket's six counters two to a word
//! divisor.rs      division by a fixed bucket length without a `div`
//! shape.rs        WindowShape (length, sample count) and WindowError
//! owner.rs        thread tokens: which thread may own a per-thread part
//! bucket.rs       MetricEvent, MetricBucket (+ min RT)          <- adder
//! leap_array.rs   LeapArray<B>: ring of buckets keyed by window start
//!                                                 <- bucket, divisor, shape
//! window.rs       StatConfig, reads over a window of metric buckets
//!                                               <- bucket, leap_array, shape
//! live/           LiveWindows: a node's second window written by owner
//!                 threads, folded into the minute window and lifetime
//!                 totals (one file per protocol; see live/mod.rs)
//!                      <- adder, bucket, divisor, leap_array, shape, owner
//! percentiles/    RtPercentiles of one resource: per-thread recorders
//!                 handed over once a second             <- owner
//! tally.rs        blocks counted per thread, for the block log
//!                 <- owner (and the crate's BlockKind and Rule)
//! ```
//!
//! Inside a folder the same holds between siblings; a child may use what
//! its `mod.rs` declares (the type it extends, shared constants).

mod adder;
mod bucket;
mod divisor;
mod leap_array;
mod live;
#[cfg(test)]
mod model_tests;
pub(crate) mod owner;
mod percentiles;
mod shape;
pub(crate) mod tally;
#[cfg(test)]
mod threads_tests;
mod window;

pub(crate) use adder::Adder;
pub use bucket::MetricEvent;
pub(crate) use bucket::{MetricBucket, SUCCESS_RT_WORD, rt_as_u32};
pub(crate) use leap_array::LeapArray;
pub(crate) use live::{LANES, LiveWindows};
pub use percentiles::RtPercentiles;
pub(crate) use percentiles::{BY_CODE, BY_RULES, Percentiles, Tally};
pub use shape::{WindowError, WindowShape};
pub use window::{DEFAULT_MAX_RT_MS, StatConfig};
