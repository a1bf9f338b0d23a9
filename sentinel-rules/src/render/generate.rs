//! Generators of valid rules of every kind, with names chosen to trip a
//! YAML writer, for the round-trip property.

use proptest::prelude::*;
use sentinel_flow_core::ParamValue;
use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::{
    ClusterFlowConfig, ClusterThresholdType, ControlBehavior, FlowGrade, FlowRule, FlowStrategy,
};
use sentinel_flow_core::param_flow::{
    ParamControlBehavior, ParamFlowGrade, ParamFlowItem, ParamFlowRule,
};
use sentinel_flow_core::system::SystemRule;

/// Strings a YAML writer gets wrong: indicators, quotes, comments, things
/// that read as numbers, booleans or null, spaces at the ends, unicode.
pub(super) const EDGES: &[&str] = &[
    "GET:/orders",
    "a: b",
    "a:",
    ":a",
    "#a",
    "a #b",
    "a#b",
    "\"q\"",
    "'s'",
    "it's",
    " lead",
    "trail ",
    "%x",
    "+1",
    "-1",
    "1.5",
    "1e3",
    "0x1F",
    ".inf",
    ".nan",
    "~",
    "null",
    "true",
    "No",
    "yes",
    "- a",
    "? a",
    "[a]",
    "{a}",
    "a,b",
    "&a",
    "*a",
    "!a",
    "|",
    ">",
    "@a",
    "`a`",
    "a\\b",
    "é",
    "日本語",
    "🦀",
    "a\tb",
    "a\nb",
    "\u{2028}",
    "\u{feff}x",
    "\u{85}",
    "...",
    "---",
    "a%2Bb",
];

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(EDGES).prop_map(str::to_owned),
        "[a-zA-Z0-9_:/.-]{1,24}",
        "\\PC{1,16}",
        any::<String>(),
    ]
    .prop_filter("a name is not blank", |s| !s.trim().is_empty())
}

fn origin() -> impl Strategy<Value = String> {
    name().prop_filter("one trimmed origin", |s| {
        s.trim() == s && !s.contains(',') && !s.chars().any(char::is_control)
    })
}

fn count(max: f64) -> impl Strategy<Value = f64> {
    prop_oneof![
        0.0..max,
        (0u32..100_000).prop_map(f64::from),
        prop::sample::select(vec![0.0, 0.1, 1.0 / 3.0, 5e-324, 1e-7, max]),
    ]
}

fn big_count() -> impl Strategy<Value = f64> {
    prop_oneof![
        count(1e9),
        Just(1e300),
        Just(f64::MAX),
        Just(9_007_199_254_740_993.0)
    ]
}

fn or_default<T: Clone + std::fmt::Debug + 'static>(
    default: T,
    other: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<T> {
    prop_oneof![Just(default), other].boxed()
}

pub(super) fn flow() -> impl Strategy<Value = FlowRule> {
    let d = FlowRule::default();
    let shape = (
        prop::sample::select(vec![FlowGrade::Qps, FlowGrade::Concurrency]),
        prop::sample::select(vec![
            FlowStrategy::Direct,
            FlowStrategy::Relate,
            FlowStrategy::Chain,
        ]),
        prop::sample::select(vec![
            ControlBehavior::Reject,
            ControlBehavior::WarmUp,
            ControlBehavior::RateLimiter,
            ControlBehavior::WarmUpRateLimiter,
        ]),
        prop::option::of(name()),
    );
    let numbers = (
        or_default(d.warm_up_period_sec, 1..=u32::MAX),
        or_default(d.warm_up_cold_factor, 2..=u32::MAX),
        or_default(d.max_queueing_time_ms, any::<u64>()),
        or_default((1_000, 2), (1..=1_000u64, 1..=20u32)),
    );
    let named = (
        prop::option::of(any::<u64>()),
        name(),
        big_count(),
        or_default(d.limit_app.clone(), origin()),
    );
    let dc = ClusterFlowConfig::default();
    let cluster = (
        any::<bool>(),
        prop::option::of(any::<u64>()),
        prop::sample::select(vec![
            ClusterThresholdType::Global,
            ClusterThresholdType::AvgLocal,
        ]),
        any::<bool>(),
        or_default(
            (
                dc.window_interval_ms / u64::from(dc.sample_count),
                dc.sample_count,
            ),
            (1..=1_000u64, 1..=20u32),
        ),
    );
    (named, shape, numbers, cluster).prop_filter_map(
        "a valid flow rule",
        |(
            (id, resource, count, limit_app),
            (grade, strategy, behavior, reference),
            numbers,
            cluster,
        )| {
            let (period, cold, queue, (buckets, samples)) = numbers;
            let (cluster_mode, flow_id, threshold_type, fallback, (bucket_ms, sample_count)) =
                cluster;
            let rule = FlowRule {
                id,
                resource,
                grade,
                count,
                limit_app,
                strategy,
                ref_resource: reference,
                control_behavior: behavior,
                warm_up_period_sec: period,
                warm_up_cold_factor: cold,
                max_queueing_time_ms: queue,
                stat_interval_ms: buckets * u64::from(samples),
                stat_sample_count: samples,
                cluster_mode,
                cluster_config: ClusterFlowConfig {
                    flow_id,
                    threshold_type,
                    fallback_to_local_when_fail: fallback,
                    sample_count,
                    window_interval_ms: bucket_ms * u64::from(sample_count),
                    ..ClusterFlowConfig::default()
                },
            };
            rule.problems(0).is_empty().then_some(rule)
        },
    )
}

pub(super) fn degrade() -> impl Strategy<Value = DegradeRule> {
    let d = DegradeRule::default();
    let grade = prop::sample::select(vec![
        DegradeGrade::SlowRequestRatio,
        DegradeGrade::ErrorRatio,
        DegradeGrade::ErrorCount,
    ]);
    let numbers = (
        or_default(d.time_window_sec, 1..=u32::MAX),
        or_default(d.min_request_amount, 1..=u64::MAX),
        or_default(d.slow_ratio_threshold, count(1.0)),
        or_default(d.stat_interval_ms, 1..=120_000u64),
        or_default(d.probe_num, 1..=16u32),
    );
    let named = (
        prop::option::of(any::<u64>()),
        name(),
        grade,
        big_count(),
        count(1.0),
    );
    (named, numbers).prop_filter_map(
        "a valid degrade rule",
        |((id, resource, grade, count, ratio), (window, min, slow, interval, probes))| {
            let rule = DegradeRule {
                id,
                resource,
                grade,
                count: if grade == DegradeGrade::ErrorRatio {
                    ratio
                } else {
                    count
                },
                time_window_sec: window,
                min_request_amount: min,
                slow_ratio_threshold: slow,
                stat_interval_ms: interval,
                probe_num: probes,
            };
            rule.problems(0).is_empty().then_some(rule)
        },
    )
}

pub(super) fn system() -> impl Strategy<Value = SystemRule> {
    let limits = (
        prop::option::of(big_count()),
        prop::option::of(count(1.0)),
        prop::option::of(big_count()),
        prop::option::of(any::<u64>()),
        prop::option::of(any::<u64>()),
    );
    (prop::option::of(any::<u64>()), limits).prop_filter_map(
        "a valid system rule",
        |(id, (load, cpu, qps, avg_rt, max_thread))| {
            let rule = SystemRule {
                id,
                highest_system_load: load,
                highest_cpu_usage: cpu,
                qps,
                avg_rt,
                max_thread,
            };
            rule.problems(0).is_empty().then_some(rule)
        },
    )
}

pub(super) fn authority() -> impl Strategy<Value = AuthorityRule> {
    let strategy = prop::sample::select(vec![AuthorityStrategy::White, AuthorityStrategy::Black]);
    let origins = prop::collection::vec(origin(), 1..4);
    (prop::option::of(any::<u64>()), name(), strategy, origins).prop_map(
        |(id, resource, strategy, limit_app)| AuthorityRule {
            id,
            resource,
            strategy,
            limit_app,
        },
    )
}

fn param_value() -> impl Strategy<Value = ParamValue> {
    prop_oneof![
        any::<i64>().prop_map(ParamValue::from),
        any::<u64>().prop_map(ParamValue::from),
        any::<bool>().prop_map(ParamValue::from),
        any::<f64>().prop_map(ParamValue::from),
        name().prop_map(ParamValue::from),
        Just(ParamValue::from("")),
    ]
}

pub(super) fn param_flow() -> impl Strategy<Value = ParamFlowRule> {
    let d = ParamFlowRule::default();
    let shape = (
        prop::sample::select(vec![ParamFlowGrade::Qps, ParamFlowGrade::Concurrency]),
        prop::sample::select(vec![
            ParamControlBehavior::Reject,
            ParamControlBehavior::RateLimiter,
        ]),
        or_default(d.max_queueing_time_ms, any::<u64>()),
        or_default(d.burst_count, 0..1_000u64),
        or_default(d.duration_in_sec, 1..=u64::MAX),
        prop::option::of(1..=(1usize << 24)),
    );
    let items = prop::collection::vec((param_value(), count(1e7)), 0..4);
    let named = (
        prop::option::of(any::<u64>()),
        name(),
        any::<i32>(),
        count(1e7),
    );
    (named, shape, items).prop_filter_map(
        "a valid param_flow rule",
        |((id, resource, param_idx, count), shape, items)| {
            let (grade, behavior, queue, burst, duration, capacity) = shape;
            let mut list: Vec<ParamFlowItem> = Vec::new();
            for (value, count) in items {
                if !list.iter().any(|item| item.value == value) {
                    list.push(ParamFlowItem::new(value, count));
                }
            }
            let rule = ParamFlowRule {
                id,
                resource,
                param_idx,
                grade,
                count,
                control_behavior: behavior,
                max_queueing_time_ms: queue,
                burst_count: burst,
                duration_in_sec: duration,
                param_flow_item_list: list,
                capacity,
                ..ParamFlowRule::default()
            };
            rule.problems(0).is_empty().then_some(rule)
        },
    )
}
