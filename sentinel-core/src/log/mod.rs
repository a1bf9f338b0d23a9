//! Logs written by an instance: the metric log, one line per resource and
//! second in Alibaba Sentinel's format, and its reader; the block log, one
//! line per second, resource, kind, rule and origin that blocked (also sent
//! as `tracing` events).
//!
//! ```no_run
//! use std::sync::Arc;
//! use sentinel_core::Sentinel;
//! use sentinel_core::log::{MetricLogConfig, MetricSearcher};
//!
//! let sentinel = Arc::new(Sentinel::builder().build());
//! let config = MetricLogConfig::new("orders").dir("/var/log/sentinel");
//! // Writes once per second until the handle is dropped.
//! let _writer = sentinel.metric_writer(config).start(Arc::clone(&sentinel));
//!
//! let lines = MetricSearcher::new("/var/log/sentinel", "orders").find(0, u64::MAX, Some("GET:/orders"))?;
//! # Ok::<(), std::io::Error>(())
//! ```

mod blocks;
mod date;
mod files;
mod index;
mod line;
mod metric;
mod searcher;

pub(crate) use blocks::BlockLedger;
pub use blocks::{BlockCount, BlockLine};
pub use line::MetricLine;
pub use metric::{MetricLogConfig, MetricWriter, MetricWriterHandle};
pub use searcher::MetricSearcher;

/// The default directory of log files.
pub const DEFAULT_LOG_DIR: &str = "./logs/sentinel/";
/// The default size past which a metric log file is rolled: 50 MiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 50 * 1024 * 1024;
/// The default number of metric log files kept per app.
pub const DEFAULT_MAX_FILES: usize = 6;
