//! A flow rule's fields, for the codecs: each field's name in a rule file
//! and in Sentinel's JSON, its default, and each enum's words and numbers.

use super::{
    ClusterFlowConfig, ClusterThresholdType, ControlBehavior, FlowGrade, FlowRule, FlowStrategy,
    cluster_problems,
};
use crate::rule::RuleError;
use crate::rule::describe::{Choice, Describe, DescribeRule, Fields, Format, Name};

/// In a rule file's order (problems give Sentinel's numbers in order).
const GRADES: &[Choice<FlowGrade>] = &[
    Choice::new(FlowGrade::Qps, "qps", 1, "QPS"),
    Choice::new(FlowGrade::Concurrency, "concurrency", 0, "thread count"),
];

const STRATEGIES: &[Choice<FlowStrategy>] = &[
    Choice::new(FlowStrategy::Direct, "direct", 0, "direct"),
    Choice::new(FlowStrategy::Relate, "relate", 1, "relate"),
    Choice::new(FlowStrategy::Chain, "chain", 2, "chain"),
];

const BEHAVIORS: &[Choice<ControlBehavior>] = &[
    Choice::new(ControlBehavior::Reject, "reject", 0, "reject"),
    Choice::new(ControlBehavior::WarmUp, "warm_up", 1, "warm up"),
    Choice::new(
        ControlBehavior::RateLimiter,
        "rate_limiter",
        2,
        "rate limiter",
    ),
    Choice::new(
        ControlBehavior::WarmUpRateLimiter,
        "warm_up_rate_limiter",
        3,
        "warm up rate limiter",
    ),
];

/// Sentinel's `ClusterRuleConstant`: 0 is the average per instance, 1 the
/// global threshold.
const THRESHOLDS: &[Choice<ClusterThresholdType>] = &[
    Choice::new(ClusterThresholdType::Global, "global", 1, "global"),
    Choice::new(
        ClusterThresholdType::AvgLocal,
        "avg_local",
        0,
        "average per instance",
    ),
];

/// Sentinel's `regex` resource matching, which sentinel-rs does not have.
const NO_REGEX: &str = "regular-expression resources are not supported by sentinel-rs; send false";

impl Describe for FlowRule {
    fn describe<F: Fields>(&mut self, f: &mut F) {
        let d = FlowRule::default();
        f.refused(Name::json("regex"), NO_REGEX);
        f.optional_whole(Name::new("id", "id").last(), &mut self.id);
        let resource = Name::new("resource", "resource").required().names_rule();
        f.string(resource.first(), &mut self.resource, "");
        f.choice(
            Name::new("grade", "grade"),
            &mut self.grade,
            d.grade,
            GRADES,
        );
        let count = Name::new("count", "count").required().first();
        f.number(count, &mut self.count, d.count);
        let limit_app = Name::new("limit_app", "limitApp");
        f.string(limit_app, &mut self.limit_app, &d.limit_app);
        let strategy = Name::new("strategy", "strategy");
        f.choice(strategy, &mut self.strategy, d.strategy, STRATEGIES);
        let reference = Name::new("ref_resource", "refResource");
        f.optional_string(reference, &mut self.ref_resource);
        let behavior = Name::new("control_behavior", "controlBehavior");
        f.choice(
            behavior,
            &mut self.control_behavior,
            d.control_behavior,
            BEHAVIORS,
        );
        let warm_up = Name::new("warm_up_period_sec", "warmUpPeriodSec");
        f.whole(warm_up, &mut self.warm_up_period_sec, d.warm_up_period_sec);
        let cold = Name::new("warm_up_cold_factor", "warmUpColdFactor");
        f.whole(cold, &mut self.warm_up_cold_factor, d.warm_up_cold_factor);
        let queueing = Name::new("max_queueing_time_ms", "maxQueueingTimeMs");
        f.whole(
            queueing,
            &mut self.max_queueing_time_ms,
            d.max_queueing_time_ms,
        );
        let interval = Name::new("stat_interval_ms", "statIntervalMs");
        f.whole(interval, &mut self.stat_interval_ms, d.stat_interval_ms);
        let samples = Name::new("stat_sample_count", "statSampleCount");
        f.whole(samples, &mut self.stat_sample_count, d.stat_sample_count);
        let mode = Name::new("cluster_mode", "clusterMode");
        f.boolean(mode, &mut self.cluster_mode, d.cluster_mode);
        let config = Name::new("cluster_config", "clusterConfig");
        f.nested(config, &mut self.cluster_config);
    }
}

impl Describe for ClusterFlowConfig {
    fn describe<F: Fields>(&mut self, f: &mut F) {
        let d = ClusterFlowConfig::default();
        f.optional_whole(Name::new("flow_id", "flowId"), &mut self.flow_id);
        // Java's `ClusterFlowConfig` as constructed reads the average per
        // instance, where a rule file's default is global.
        let threshold = match f.format() {
            Format::Json => ClusterThresholdType::AvgLocal,
            _ => d.threshold_type,
        };
        let name = Name::new("threshold_type", "thresholdType");
        f.choice(name, &mut self.threshold_type, threshold, THRESHOLDS);
        let fallback = Name::new("fallback_to_local_when_fail", "fallbackToLocalWhenFail");
        let default = d.fallback_to_local_when_fail;
        f.boolean(fallback, &mut self.fallback_to_local_when_fail, default);
        let samples = Name::new("sample_count", "sampleCount");
        f.whole(samples, &mut self.sample_count, d.sample_count);
        let window = Name::new("window_interval_ms", "windowIntervalMs");
        f.whole(window, &mut self.window_interval_ms, d.window_interval_ms);
        f.whole(
            Name::new("strategy", "strategy"),
            &mut self.strategy,
            d.strategy,
        );
        let timeout = Name::new("resource_timeout", "resourceTimeout");
        f.whole(timeout, &mut self.resource_timeout, d.resource_timeout);
        let name = Name::new("resource_timeout_strategy", "resourceTimeoutStrategy");
        let default = d.resource_timeout_strategy;
        f.whole(name, &mut self.resource_timeout_strategy, default);
        let name = Name::new("acquire_refuse_strategy", "acquireRefuseStrategy");
        f.whole(
            name,
            &mut self.acquire_refuse_strategy,
            d.acquire_refuse_strategy,
        );
        let offline = Name::new("client_offline_time", "clientOfflineTime");
        f.whole(
            offline,
            &mut self.client_offline_time,
            d.client_offline_time,
        );
    }
}

impl DescribeRule for FlowRule {
    const KIND: &'static str = super::rule::KIND_NAME;
    const FILE_ORDER: u32 = 0;

    fn problems(&self, index: usize, max_name_len: usize) -> Vec<RuleError> {
        let mut problems = FlowRule::problems(self, index);
        problems.extend(self.name_problems(index, max_name_len));
        problems
    }

    fn across(rules: &[Self]) -> Vec<RuleError> {
        cluster_problems(rules)
    }
}
