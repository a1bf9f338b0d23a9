//! The instance's metric log: its writer, made for this instance.

use super::Sentinel;
use crate::log::{MetricLogConfig, MetricWriter};

impl Sentinel {
    /// A metric log writer for this instance, which writes the seconds from
    /// the current one on.
    pub fn metric_writer(&self, config: MetricLogConfig) -> MetricWriter {
        MetricWriter::new(config, &self.engine.parts.ledger, self.uid(), self.now_ms())
    }
}
