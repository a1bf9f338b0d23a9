//! Logs written by an instance: the metric log, one line per resource and
//! second in Alibaba Sentinel's format, and its reader; the block log, one
//! line per second, resource, kind, rule and origin that blocked (also sent
//! as `tracing` events).
//!
//! ```no_run
//! use std::sync::Arc;
//! use sentinel_flow_core::Sentinel;
//! use sentinel_flow_core::log::{MetricLogConfig, MetricSearcher};
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
pub use metric::{
    DEFAULT_LOG_DIR, DEFAULT_MAX_FILE_SIZE, DEFAULT_MAX_FILES, MetricLogConfig, MetricWriter,
    MetricWriterHandle,
};
pub use searcher::MetricSearcher;
