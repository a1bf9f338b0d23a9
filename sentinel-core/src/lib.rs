//! Flow control, circuit breaking and overload protection per named resource,
//! in the model of Alibaba Sentinel.
//!
//! This crate holds the engine: the [`Clock`], the statistics
//! ([`stat`]: LongAdder-like counters, metric buckets, the `LeapArray` sliding
//! window) and the [`node`]s that keep a second and a minute window of them.
//!
//! ```
//! use sentinel_core::node::StatisticNode;
//! use sentinel_core::stat::StatConfig;
//! use sentinel_core::{Clock, ManualClock};
//!
//! let clock = ManualClock::new(1_700_000_000_000);
//! let node = StatisticNode::new(&StatConfig::default());
//!
//! for _ in 0..10 {
//!     let now = clock.now_ms();
//!     node.add_pass(now, 1);
//!     node.add_rt_and_success(now, 3, 1);
//!     clock.advance_ms(50);
//! }
//! let now = clock.now_ms();
//! assert_eq!(node.pass_qps(now), 10.0);
//! assert_eq!(node.avg_rt(now), 3.0);
//! ```

mod clock;
pub mod node;
pub mod stat;

pub use clock::{Clock, ManualClock, MonotonicClock, SystemClock};
