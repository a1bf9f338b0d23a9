//! Nodes: where statistics are kept (per resource, per context, per origin,
//! and the inbound total).

mod statistic;

pub use statistic::{MetricSnapshot, NodeSnapshot, StatisticNode};
