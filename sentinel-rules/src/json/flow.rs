//! `FlowRule` as Sentinel's JSON.

use sentinel_flow_core::RuleError;
use sentinel_flow_core::flow::{
    ClusterFlowConfig, ClusterThresholdType, ControlBehavior, FlowGrade, FlowRule, FlowStrategy,
};
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

/// Sentinel's `ClusterRuleConstant`: 0 is the average per instance, 1 the
/// global threshold.
const THRESHOLDS: &[(i64, ClusterThresholdType, &str)] = &[
    (0, ClusterThresholdType::AvgLocal, "average per instance"),
    (1, ClusterThresholdType::Global, "global"),
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
            "clusterMode": self.cluster_mode,
            // Ours, beyond Sentinel's rule (the dashboard drops them).
            "warmUpColdFactor": self.warm_up_cold_factor,
            "statIntervalMs": self.stat_interval_ms,
            "statSampleCount": self.stat_sample_count,
        });
        // Always written, as a Java machine echoes the `clusterConfig` the
        // dashboard always sends, cluster mode on or off.
        let c = &self.cluster_config;
        let mut config = json!({
            "thresholdType": code(THRESHOLDS, &c.threshold_type),
            "fallbackToLocalWhenFail": c.fallback_to_local_when_fail,
            "sampleCount": c.sample_count,
            "windowIntervalMs": c.window_interval_ms,
            "strategy": c.strategy,
            "resourceTimeout": c.resource_timeout,
            "resourceTimeoutStrategy": c.resource_timeout_strategy,
            "acquireRefuseStrategy": c.acquire_refuse_strategy,
            "clientOfflineTime": c.client_offline_time,
        });
        if let Some(id) = c.flow_id {
            config["flowId"] = json!(id);
        }
        value["clusterConfig"] = config;
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
        o.no_regex(p);
        let d = FlowRule::default();
        let cluster_config = cluster_config(o, p);
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
            cluster_mode: o.boolean("clusterMode", p).unwrap_or(d.cluster_mode),
            cluster_config,
        }
    }

    fn core_problems(&self, index: usize) -> Vec<RuleError> {
        self.problems(index)
    }
}

/// Sentinel's `clusterConfig`, read whether or not `clusterMode` is on (the
/// dashboard sends it either way); its absent fields take Java's defaults
/// (per instance, with fallback). A rule without one (Java's null) has the
/// core's defaults, which a rule file leaves out.
fn cluster_config(o: &Object<'_>, p: &mut Problems) -> ClusterFlowConfig {
    let Some(c) = o.nested("clusterConfig", p) else {
        return ClusterFlowConfig::default();
    };
    let d = java_cluster_default();
    ClusterFlowConfig {
        flow_id: c.unsigned("flowId", p),
        threshold_type: c.enumerated("thresholdType", p, THRESHOLDS, d.threshold_type),
        fallback_to_local_when_fail: c
            .boolean("fallbackToLocalWhenFail", p)
            .unwrap_or(d.fallback_to_local_when_fail),
        sample_count: c.unsigned("sampleCount", p).unwrap_or(d.sample_count),
        window_interval_ms: c
            .unsigned("windowIntervalMs", p)
            .unwrap_or(d.window_interval_ms),
        strategy: c.unsigned("strategy", p).unwrap_or(d.strategy),
        resource_timeout: c
            .unsigned("resourceTimeout", p)
            .unwrap_or(d.resource_timeout),
        resource_timeout_strategy: c
            .unsigned("resourceTimeoutStrategy", p)
            .unwrap_or(d.resource_timeout_strategy),
        acquire_refuse_strategy: c
            .unsigned("acquireRefuseStrategy", p)
            .unwrap_or(d.acquire_refuse_strategy),
        client_offline_time: c
            .unsigned("clientOfflineTime", p)
            .unwrap_or(d.client_offline_time),
    }
}

/// Java's `ClusterFlowConfig` as constructed: its threshold type is the
/// average per instance, where a rule file's default is global.
fn java_cluster_default() -> ClusterFlowConfig {
    ClusterFlowConfig {
        threshold_type: ClusterThresholdType::AvgLocal,
        ..ClusterFlowConfig::default()
    }
}
