//! Hot-parameter flow control (Sentinel's param flow): limit each value of
//! one argument of a resource on its own — each user, each product id —
//! with bounded memory whatever the number of distinct values.
//!
//! A [`ParamFlowRule`] names the argument (`param_idx`, negative from the
//! end) of the [`ParamValue`](crate::ParamValue)s an entry passes with
//! [`EntryBuilder::args`](crate::EntryBuilder::args), and a threshold per
//! value:
//!
//! - **QPS, reject**: a token bucket per value with Sentinel's formula. The
//!   first request of a value leaves `count + burst_count - batch` tokens;
//!   when more than `duration_in_sec` has passed since the last refill,
//!   `elapsed_ms × count / (duration_in_sec × 1000)` tokens are added,
//!   capped at `count + burst_count`; otherwise a request takes `batch`
//!   tokens or is refused.
//! - **QPS, rate limiter**: requests of one value pass spaced
//!   `round(1000 × batch × duration_in_sec / count)` ms apart; one that
//!   would wait `max_queueing_time_ms` or more is refused. The entry waits,
//!   the check never sleeps.
//! - **Concurrency**: at most `count` calls with the value inside at once,
//!   exact under any number of threads (one compare-and-swap counts and
//!   checks); the entry gives its count back at exit.
//!
//! Thresholds are whole numbers (Sentinel reads `(long) count`); a value
//! with threshold 0 is always refused. Values in `param_flow_item_list`
//! have thresholds of their own. A call without the argument passes; a
//! collection argument ([`ParamValue::List`](crate::ParamValue::List))
//! passes if each of its elements does.
//!
//! Each rule keeps its values in a table of at most
//! [`ParamFlowRule::effective_capacity`] values (24 bytes each). A freshly
//! loaded rule's table holds no value and costs about a hundred bytes
//! (at most 8 KiB for the largest capacity); it grows by chunks of at
//! least 512 values as values arrive, never past the capacity
//! ([`ParamTableStats::bytes`]). Past capacity a new value evicts the least
//! frequent one (frequencies halve for each second a value goes unseen),
//! so a value that keeps coming back, refused or not, stays tracked and
//! limited under any flood of values seen once: see `cache.rs` for the
//! layout, the collision odds and what happens past capacity.
//!
//! The module is the kind alone: `rule.rs` the rule as loaded,
//! `checker.rs` and `cache.rs` the compiled rule and its value table,
//! `cluster_flow.rs` what the cluster service is told of a rule in cluster
//! mode and of each value, `cluster.rs` the check of QPS rules in cluster
//! mode (each value counted across instances by the cluster service) and
//! the report of those that limit locally. The tables' figures are read through the instance's rule set,
//! which composes every kind ([`RuleManager::tables`](crate::RuleManager::tables)).

mod cache;
mod checker;
mod cluster;
mod cluster_flow;
mod fields;
mod rule;
mod slot;
#[cfg(test)]
mod tests;

pub(crate) use checker::{CompiledParamFlow, ParamDecision, ParamHeld};
#[cfg(feature = "prometheus")]
pub(crate) use cluster::by_resource as cluster_rules_by_resource;
pub(crate) use cluster::warn as warn_cluster_rules;
pub use cluster_flow::{ClusterParamFlow, ParamToken};
pub use rule::{
    BASE_PARAM_CAPACITY, MAX_PARAM_CAPACITY, MAX_PARAM_COUNT, ParamControlBehavior, ParamFlowGrade,
    ParamFlowItem, ParamFlowRule, TOTAL_PARAM_CAPACITY,
};
pub use rule::{
    MAX_PARAM_CLUSTER_SAMPLE_COUNT, MAX_PARAM_CLUSTER_WINDOW_MS, MAX_PARAM_DURATION_SEC,
    MAX_PARAM_ITEMS, MAX_PARAM_QUEUEING_TIME_MS, PARAM_CLASS_TYPES, PARAM_VALUE_BYTES,
    ParamClassKind, ParamClusterThresholdType, ParamFlowClusterConfig, param_class_kind,
};
pub(crate) use slot::ParamFlowKind;

use crate::rule::compiled::{CompiledRule, List};
use crate::rule::footprint::Footprint;

impl ParamFlowRule {
    /// The most memory the rule may take once loaded: the rule, its
    /// resource's name, its items and its value table full.
    pub(crate) fn footprint(&self) -> Footprint {
        self.footprint_compiled_as::<CompiledParamFlow>()
    }
}

impl CompiledRule for CompiledParamFlow {
    type Rule = ParamFlowRule;
    type PerResource = List<Self>;

    fn compile(rule: &ParamFlowRule) -> Self {
        CompiledParamFlow::new(rule.clone())
    }

    fn source(&self) -> &ParamFlowRule {
        self.rule()
    }

    fn resource(rule: &ParamFlowRule) -> &str {
        &rule.resource
    }

    fn per_resource(list: List<Self>) -> List<Self> {
        list
    }
}

/// The value table of one hot-parameter rule, as
/// [`RuleManager::tables`](crate::RuleManager::tables) reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ParamTableStats {
    /// Values tracked now.
    pub values: usize,
    /// Values evicted to make room for others since the rule was loaded: a
    /// returning evicted value starts afresh, as a first request.
    pub evictions: u64,
    /// Values that passed untracked because their part of the table was
    /// full of values with calls in flight (concurrency grade; logged once).
    pub overflows: u64,
    /// Bytes the table holds now: a few hundred when the rule is loaded
    /// (at most 8 KiB), growing by chunks as values arrive, up to about
    /// 24 bytes per value of [`ParamFlowRule::effective_capacity`].
    pub bytes: usize,
}
