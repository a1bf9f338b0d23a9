//! What a cluster service is told of a hot-parameter rule in cluster mode
//! ([`ClusterParamFlow`]) and of each value an entry asks for
//! ([`ParamToken`]): the types of the cluster hook's hot-parameter calls,
//! below the hook and the kind's check.

use super::rule::{ParamClusterThresholdType, ParamFlowGrade, ParamFlowRule};
use crate::ParamValue;

/// A hot-parameter rule in cluster mode as a
/// [`ClusterTokens`](crate::flow::ClusterTokens) service sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterParamFlow {
    flow_id: u64,
    threshold_type: ParamClusterThresholdType,
    window_interval_ms: u64,
    sample_count: u32,
    fallback_to_local: bool,
}

impl ClusterParamFlow {
    /// The cluster flow of a QPS-grade rule in cluster mode with a flow id
    /// (`None` for any other rule: those limit on this instance alone).
    pub fn of_rule(rule: &ParamFlowRule) -> Option<Self> {
        if !rule.cluster_mode || rule.grade != ParamFlowGrade::Qps {
            return None;
        }
        let c = &rule.cluster_config;
        Some(ClusterParamFlow {
            flow_id: c.flow_id?,
            threshold_type: c.threshold_type,
            window_interval_ms: c.window_interval_ms,
            sample_count: c.sample_count,
            fallback_to_local: c.fallback_to_local_when_fail,
        })
    }

    /// The id shared across the cluster.
    pub fn flow_id(&self) -> u64 {
        self.flow_id
    }

    /// Whether a value's threshold is per instance
    /// ([`ParamClusterThresholdType::AvgLocal`], times the live instances
    /// across the cluster) or the cluster's.
    pub fn threshold_type(&self) -> ParamClusterThresholdType {
        self.threshold_type
    }

    /// The cluster window, ms.
    pub fn window_interval_ms(&self) -> u64 {
        self.window_interval_ms
    }

    /// Buckets of the cluster window.
    pub fn sample_count(&self) -> u32 {
        self.sample_count
    }

    /// Whether an unanswered request is decided by the rule's local check
    /// (`fallback_to_local_when_fail`); `false`: the entry passes.
    pub fn falls_back_to_local(&self) -> bool {
        self.fallback_to_local
    }
}

/// One value an entry asks the cluster for, with its threshold per
/// window (its item's count, or the rule's; per instance for
/// [`ParamClusterThresholdType::AvgLocal`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ParamToken<'a> {
    value: &'a ParamValue,
    threshold: u64,
}

impl<'a> ParamToken<'a> {
    /// `value` with `threshold`.
    pub fn new(value: &'a ParamValue, threshold: u64) -> Self {
        ParamToken { value, threshold }
    }

    /// The value (never a collection: a collection argument asks for each
    /// of its elements).
    pub fn value(&self) -> &'a ParamValue {
        self.value
    }

    /// Its threshold per window.
    pub fn threshold(&self) -> u64 {
        self.threshold
    }
}
