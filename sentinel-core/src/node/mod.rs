//! Nodes: where statistics are kept (per resource, per context, per origin,
//! and the inbound total) and how they form the invocation tree.

pub(crate) mod invocation;
pub(crate) mod nodes;
pub(crate) mod overflow;
pub(crate) mod registry;
pub(crate) mod reserved;
mod resource;
mod statistic;
#[cfg(test)]
mod statistic_threads_tests;
pub(crate) mod tree;
mod views;

pub use resource::{OriginNode, PAST_MAX_ORIGINS, ResourceNode};
pub use statistic::{MetricSnapshot, NodeSnapshot, StatisticNode, Totals};
pub use views::{ContextNode, Entrance};
