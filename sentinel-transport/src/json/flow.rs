//! `FlowRule` as Sentinel's JSON.

use sentinel_core::RuleError;
use sentinel_core::flow::{ControlBehavior, FlowGrade, FlowRule, FlowStrategy};
use serde_json::{Value, json};

use super::JsonRule;
use super::fields::{Object, Problems};

const GRADES: &[(i64, FlowGrade, &str)] = &[
    (0, FlowGrade::Concurrency, "thread count"),
    (1, FlowGrade::Qps, "QPS"),
];

const STRATEGIES: &[(i64, FlowStrategy, &str)] = &[
    (0, FlowStrategy::Direct, "direct"),
    (1, FlowStrategy::Relate, "relate"),
    (2, FlowStrategy::Chain, "chain"),
];

const BEHAVIORS: &[(i64, ControlBehavior, &str)] = &[
    (0, ControlBehavior::Reject, "reject"),
    (1, ControlBehavior::WarmUp, "warm up"),
    (2, ControlBehavior::RateLimiter, "rate limiter"),
    (
        3,
        ControlBehavior::WarmUpRateLimiter,
        "warm up rate limiter",
    ),
];

/// The number Sentinel gives `value` in `table`.
pub(super) fn code<T: PartialEq>(table: &[(i64, T, &str)], value: &T) -> i64 {
    table
        .iter()
        .find(|(_, v, _)| v == value)
        .map_or(0, |(k, _, _)| *k)
}

impl JsonRule for FlowRule {
    const KIND: &'static str = "flow";

    fn to_json(&self) -> Value {
        let mut value = json!({
            "resource": self.resource,
            "limitApp": self.limit_app,
            "grade": code(GRADES, &self.grade),
            "count": self.count,
            "strategy": code(STRATEGIES, &self.strategy),
            "controlBehavior": code(BEHAVIORS, &self.control_behavior),
            "warmUpPeriodSec": self.warm_up_period_sec,
            "maxQueueingTimeMs": self.max_queueing_time_ms,
            "clusterMode": false,
            // Ours, beyond Sentinel's rule (the dashboard drops them).
            "warmUpColdFactor": self.warm_up_cold_factor,
            "statIntervalMs": self.stat_interval_ms,
            "statSampleCount": self.stat_sample_count,
        });
        if let Some(id) = self.id {
            value["id"] = json!(id);
        }
        // fastjson leaves out nulls.
        if let Some(reference) = &self.ref_resource {
            value["refResource"] = json!(reference);
        }
        value
    }

    fn from_json(o: &Object<'_>, p: &mut Problems) -> Self {
        o.no_cluster(p);
        o.no_regex(p);
        let d = FlowRule::default();
        FlowRule {
            id: o.unsigned("id", p),
            resource: o.string("resource", p).unwrap_or_default(),
            grade: o.enumerated("grade", p, GRADES, d.grade),
            count: o.number("count", p).unwrap_or(d.count),
            limit_app: o.string("limitApp", p).unwrap_or(d.limit_app),
            strategy: o.enumerated("strategy", p, STRATEGIES, d.strategy),
            ref_resource: o.string("refResource", p).filter(|r| !r.is_empty()),
            control_behavior: o.enumerated("controlBehavior", p, BEHAVIORS, d.control_behavior),
            warm_up_period_sec: o
                .unsigned("warmUpPeriodSec", p)
                .unwrap_or(d.warm_up_period_sec),
            warm_up_cold_factor: o
                .unsigned("warmUpColdFactor", p)
                .unwrap_or(d.warm_up_cold_factor),
            max_queueing_time_ms: o
                .unsigned("maxQueueingTimeMs", p)
                .unwrap_or(d.max_queueing_time_ms),
            stat_interval_ms: o
                .unsigned("statIntervalMs", p)
                .unwrap_or(d.stat_interval_ms),
            stat_sample_count: o
                .unsigned("statSampleCount", p)
                .unwrap_or(d.stat_sample_count),
        }
    }

    fn core_problems(&self, index: usize) -> Vec<RuleError> {
        self.problems(index)
    }
}
