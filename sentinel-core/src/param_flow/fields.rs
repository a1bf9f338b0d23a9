//! A hot-parameter rule's fields, for the codecs: each field's name in a
//! rule file and in Sentinel's JSON, its default, each enum's words and
//! numbers, and the exception items (`{value, count}` in a rule file,
//! Sentinel's `{object, count, classType}`).

use super::{
    ParamClusterThresholdType, ParamControlBehavior, ParamFlowClusterConfig, ParamFlowGrade,
    ParamFlowItem, ParamFlowRule,
};
use crate::rule::RuleError;
use crate::rule::describe::{Choice, Commands, Describe, DescribeRule, Fields, Name};

/// In a rule file's order (problems give Sentinel's numbers in order).
const GRADES: &[Choice<ParamFlowGrade>] = &[
    Choice::new(ParamFlowGrade::Qps, "qps", 1, "QPS"),
    Choice::new(
        ParamFlowGrade::Concurrency,
        "concurrency",
        0,
        "thread count",
    ),
];

const BEHAVIORS: &[Choice<ParamControlBehavior>] = &[
    Choice::new(ParamControlBehavior::Reject, "reject", 0, "reject"),
    Choice::new(
        ParamControlBehavior::RateLimiter,
        "rate_limiter",
        2,
        "rate limiter",
    ),
];

/// Sentinel's `ClusterRuleConstant`: 0 the average per instance, 1 global.
const THRESHOLDS: &[Choice<ParamClusterThresholdType>] = &[
    Choice::new(ParamClusterThresholdType::Global, "global", 1, "global"),
    Choice::new(
        ParamClusterThresholdType::AvgLocal,
        "avg_local",
        0,
        "average per instance",
    ),
];

const EVERY_ORIGIN: &str = "rules apply to every origin in sentinel-rs";
const NO_REGEX: &str = "regular-expression resources are not supported by sentinel-rs; send false";

impl Describe for ParamFlowRule {
    fn describe<F: Fields>(&mut self, f: &mut F) {
        let d = ParamFlowRule::default();
        f.fixed(Name::json("limitApp"), "default", EVERY_ORIGIN);
        f.refused(Name::json("regex"), NO_REGEX);
        f.optional_whole(Name::new("id", "id").last(), &mut self.id);
        let resource = Name::new("resource", "resource").required().names_rule();
        f.string(resource, &mut self.resource, "");
        let index = Name::new("param_idx", "paramIdx")
            .required()
            .required_in_json("0 is the first argument");
        f.signed(index, &mut self.param_idx, d.param_idx);
        f.number(
            Name::new("count", "count").required(),
            &mut self.count,
            d.count,
        );
        f.choice(
            Name::new("grade", "grade"),
            &mut self.grade,
            d.grade,
            GRADES,
        );
        let behavior = Name::new("control_behavior", "controlBehavior");
        f.choice(
            behavior,
            &mut self.control_behavior,
            d.control_behavior,
            BEHAVIORS,
        );
        let duration = Name::new("duration_in_sec", "durationInSec");
        f.whole(duration, &mut self.duration_in_sec, d.duration_in_sec);
        let burst = Name::new("burst_count", "burstCount");
        f.whole(burst, &mut self.burst_count, d.burst_count);
        let queueing = Name::new("max_queueing_time_ms", "maxQueueingTimeMs");
        f.whole(
            queueing,
            &mut self.max_queueing_time_ms,
            d.max_queueing_time_ms,
        );
        f.optional_whole(Name::new("capacity", "capacity"), &mut self.capacity);
        let mode = Name::new("cluster_mode", "clusterMode");
        f.boolean(mode, &mut self.cluster_mode, d.cluster_mode);
        let config = Name::new("cluster_config", "clusterConfig");
        f.nested(config, &mut self.cluster_config);
        let items = Name::new("param_flow_item_list", "paramFlowItemList");
        f.list(items, &mut self.param_flow_item_list);
    }
}

impl Describe for ParamFlowClusterConfig {
    fn describe<F: Fields>(&mut self, f: &mut F) {
        let d = ParamFlowClusterConfig::default();
        f.optional_whole(Name::new("flow_id", "flowId"), &mut self.flow_id);
        let name = Name::new("threshold_type", "thresholdType");
        f.choice(name, &mut self.threshold_type, d.threshold_type, THRESHOLDS);
        let fallback = Name::new("fallback_to_local_when_fail", "fallbackToLocalWhenFail");
        let default = d.fallback_to_local_when_fail;
        f.boolean(fallback, &mut self.fallback_to_local_when_fail, default);
        let samples = Name::new("sample_count", "sampleCount");
        f.whole(samples, &mut self.sample_count, d.sample_count);
        let window = Name::new("window_interval_ms", "windowIntervalMs");
        f.whole(window, &mut self.window_interval_ms, d.window_interval_ms);
    }
}

/// An empty item, what a codec reads one into.
impl Default for ParamFlowItem {
    fn default() -> Self {
        ParamFlowItem::new("", 0.0)
    }
}

impl Describe for ParamFlowItem {
    fn describe<F: Fields>(&mut self, f: &mut F) {
        let value = Name::new("value", "object").required().required_in_json("");
        let class = Name::new("class_type", "classType");
        f.value(value, class, &mut self.value, &mut self.class_type);
        // Sentinel's item count is an `Integer`.
        let count = Name::new("count", "count")
            .required()
            .required_in_json("")
            .json_whole();
        f.number(count, &mut self.count, 0.0);
    }
}

impl DescribeRule for ParamFlowRule {
    const KIND: &'static str = super::rule::KIND_NAME;
    const SENTINEL_KIND: &'static str = "paramFlow";
    const FILE_ORDER: u32 = 4;
    const COMMANDS: Option<Commands> = Some(Commands {
        get: "getParamFlowRules",
        get_help: "get all active parameter flow rules",
        set: "setParamFlowRules",
        set_help: "set parameter flow rules, accept param: data={paramFlowRuleJson}",
    });

    fn problems(&self, index: usize, max_name_len: usize) -> Vec<RuleError> {
        let mut problems = ParamFlowRule::problems(self, index);
        problems.extend(self.name_problems(index, max_name_len));
        problems
    }
}
