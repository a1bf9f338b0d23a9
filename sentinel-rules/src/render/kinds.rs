//! Each rule kind's fields as `(name, YAML value)` pairs, in the order the
//! README documents them; a field at its default is left out where the
//! parser gives that default back.

use sentinel_flow_core::ParamValue;
use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::{
    ClusterFlowConfig, ClusterThresholdType, ControlBehavior, FlowGrade, FlowRule, FlowStrategy,
};
use sentinel_flow_core::param_flow::{
    ParamControlBehavior, ParamFlowClusterConfig, ParamFlowGrade, ParamFlowRule,
};
use sentinel_flow_core::system::SystemRule;

use super::scalar::{float, string};

pub(crate) type Fields = Vec<(&'static str, String)>;

/// `Err` names a value the file format has no word for.
pub(crate) type Rendered = Result<Fields, String>;

/// Pushes `field` when `value` differs from `default`.
fn unless<T: PartialEq>(
    fields: &mut Fields,
    field: &'static str,
    value: T,
    default: T,
    show: impl Fn(T) -> String,
) {
    if value != default {
        fields.push((field, show(value)));
    }
}

fn id(fields: &mut Fields, id: Option<u64>) {
    if let Some(id) = id {
        fields.push(("id", id.to_string()));
    }
}

pub(crate) fn flow(rule: &FlowRule) -> Rendered {
    let d = FlowRule::default();
    let mut f = vec![
        ("resource", string(&rule.resource).into_owned()),
        ("count", float(rule.count)),
    ];
    let grade = |g| match g {
        FlowGrade::Qps => "qps",
        FlowGrade::Concurrency => "concurrency",
    };
    unless(&mut f, "grade", rule.grade, d.grade, |g| grade(g).into());
    unless(&mut f, "limit_app", &rule.limit_app, &d.limit_app, |s| {
        string(s).into_owned()
    });
    let strategy = |s| match s {
        FlowStrategy::Direct => "direct",
        FlowStrategy::Relate => "relate",
        FlowStrategy::Chain => "chain",
    };
    unless(&mut f, "strategy", rule.strategy, d.strategy, |s| {
        strategy(s).into()
    });
    if let Some(other) = &rule.ref_resource {
        f.push(("ref_resource", string(other).into_owned()));
    }
    let behavior = |b| match b {
        ControlBehavior::Reject => "reject",
        ControlBehavior::WarmUp => "warm_up",
        ControlBehavior::RateLimiter => "rate_limiter",
        ControlBehavior::WarmUpRateLimiter => "warm_up_rate_limiter",
    };
    let (b, db) = (rule.control_behavior, d.control_behavior);
    unless(&mut f, "control_behavior", b, db, |b| behavior(b).into());
    let text = |n: u64| n.to_string();
    let (w, dw) = (rule.warm_up_period_sec.into(), d.warm_up_period_sec.into());
    unless(&mut f, "warm_up_period_sec", w, dw, text);
    let (c, dc) = (
        rule.warm_up_cold_factor.into(),
        d.warm_up_cold_factor.into(),
    );
    unless(&mut f, "warm_up_cold_factor", c, dc, text);
    let (q, dq) = (rule.max_queueing_time_ms, d.max_queueing_time_ms);
    unless(&mut f, "max_queueing_time_ms", q, dq, text);
    let (i, di) = (rule.stat_interval_ms, d.stat_interval_ms);
    unless(&mut f, "stat_interval_ms", i, di, text);
    let (s, ds) = (rule.stat_sample_count.into(), d.stat_sample_count.into());
    unless(&mut f, "stat_sample_count", s, ds, text);
    if rule.cluster_mode {
        f.push(("cluster_mode", "true".to_owned()));
    }
    if let Some(config) = cluster_config(&rule.cluster_config) {
        f.push(("cluster_config", config));
    }
    id(&mut f, rule.id);
    Ok(f)
}

/// `cluster_config` as a flow mapping of the fields not at their default,
/// `None` when all are.
fn cluster_config(config: &ClusterFlowConfig) -> Option<String> {
    let d = ClusterFlowConfig::default();
    let mut f = Fields::new();
    if let Some(id) = config.flow_id {
        f.push(("flow_id", id.to_string()));
    }
    if config.threshold_type == ClusterThresholdType::AvgLocal {
        f.push(("threshold_type", "avg_local".to_owned()));
    }
    let text = |b: bool| b.to_string();
    let (b, db) = (
        config.fallback_to_local_when_fail,
        d.fallback_to_local_when_fail,
    );
    unless(&mut f, "fallback_to_local_when_fail", b, db, text);
    let number = |n: u64| n.to_string();
    let (s, ds) = (config.sample_count.into(), d.sample_count.into());
    unless(&mut f, "sample_count", s, ds, number);
    let (w, dw) = (config.window_interval_ms, d.window_interval_ms);
    unless(&mut f, "window_interval_ms", w, dw, number);
    let (v, dv) = (config.strategy.into(), d.strategy.into());
    unless(&mut f, "strategy", v, dv, number);
    let (v, dv) = (config.resource_timeout, d.resource_timeout);
    unless(&mut f, "resource_timeout", v, dv, number);
    let (v, dv) = (
        config.resource_timeout_strategy.into(),
        d.resource_timeout_strategy.into(),
    );
    unless(&mut f, "resource_timeout_strategy", v, dv, number);
    let (v, dv) = (
        config.acquire_refuse_strategy.into(),
        d.acquire_refuse_strategy.into(),
    );
    unless(&mut f, "acquire_refuse_strategy", v, dv, number);
    let (v, dv) = (config.client_offline_time, d.client_offline_time);
    unless(&mut f, "client_offline_time", v, dv, number);
    let fields: Vec<String> = f.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    (!fields.is_empty()).then(|| format!("{{{}}}", fields.join(", ")))
}

/// A hot-parameter rule's `cluster_config` as a flow mapping of the fields
/// not at that kind's defaults, `None` when all are.
fn param_cluster_config(config: &ParamFlowClusterConfig) -> Option<String> {
    let d = ParamFlowClusterConfig::default();
    let mut f = Fields::new();
    if let Some(id) = config.flow_id {
        f.push(("flow_id", id.to_string()));
    }
    if config.threshold_type != d.threshold_type {
        f.push(("threshold_type", "global".to_owned()));
    }
    let text = |b: bool| b.to_string();
    let (b, db) = (
        config.fallback_to_local_when_fail,
        d.fallback_to_local_when_fail,
    );
    unless(&mut f, "fallback_to_local_when_fail", b, db, text);
    let number = |n: u64| n.to_string();
    let (s, ds) = (config.sample_count.into(), d.sample_count.into());
    unless(&mut f, "sample_count", s, ds, number);
    let (w, dw) = (config.window_interval_ms, d.window_interval_ms);
    unless(&mut f, "window_interval_ms", w, dw, number);
    let fields: Vec<String> = f.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    (!fields.is_empty()).then(|| format!("{{{}}}", fields.join(", ")))
}

pub(crate) fn degrade(rule: &DegradeRule) -> Rendered {
    let d = DegradeRule::default();
    let grade = match rule.grade {
        DegradeGrade::SlowRequestRatio => "slow_request_ratio",
        DegradeGrade::ErrorRatio => "error_ratio",
        DegradeGrade::ErrorCount => "error_count",
    };
    let mut f = vec![
        ("resource", string(&rule.resource).into_owned()),
        ("grade", grade.to_owned()),
        ("count", float(rule.count)),
    ];
    let (s, ds) = (rule.slow_ratio_threshold, d.slow_ratio_threshold);
    // Compared by bits: a NaN never equals the default and is written out.
    unless(
        &mut f,
        "slow_ratio_threshold",
        s.to_bits(),
        ds.to_bits(),
        |b| float(f64::from_bits(b)),
    );
    let text = |n: u64| n.to_string();
    let (t, dt) = (rule.time_window_sec.into(), d.time_window_sec.into());
    unless(&mut f, "time_window_sec", t, dt, text);
    let (m, dm) = (rule.min_request_amount, d.min_request_amount);
    unless(&mut f, "min_request_amount", m, dm, text);
    let (i, di) = (rule.stat_interval_ms, d.stat_interval_ms);
    unless(&mut f, "stat_interval_ms", i, di, text);
    let (p, dp) = (rule.probe_num.into(), d.probe_num.into());
    unless(&mut f, "probe_num", p, dp, text);
    id(&mut f, rule.id);
    Ok(f)
}

pub(crate) fn system(rule: &SystemRule) -> Rendered {
    let mut f = Fields::new();
    let numbers = [
        ("highest_system_load", rule.highest_system_load),
        ("highest_cpu_usage", rule.highest_cpu_usage),
        ("qps", rule.qps),
    ];
    for (name, value) in numbers {
        if let Some(value) = value {
            f.push((name, float(value)));
        }
    }
    for (name, value) in [("avg_rt", rule.avg_rt), ("max_thread", rule.max_thread)] {
        if let Some(value) = value {
            f.push((name, value.to_string()));
        }
    }
    id(&mut f, rule.id);
    Ok(f)
}

pub(crate) fn authority(rule: &AuthorityRule) -> Rendered {
    let mut f = vec![("resource", string(&rule.resource).into_owned())];
    if rule.strategy == AuthorityStrategy::Black {
        f.push(("strategy", "black".to_owned()));
    }
    let origins: Vec<_> = rule.limit_app.iter().map(|o| string(o)).collect();
    f.push(("limit_app", format!("[{}]", origins.join(", "))));
    id(&mut f, rule.id);
    Ok(f)
}

pub(crate) fn param_flow(rule: &ParamFlowRule) -> Rendered {
    let d = ParamFlowRule::default();
    let mut f = vec![
        ("resource", string(&rule.resource).into_owned()),
        ("param_idx", rule.param_idx.to_string()),
        ("count", float(rule.count)),
    ];
    match rule.grade {
        ParamFlowGrade::Qps => {}
        ParamFlowGrade::Concurrency => f.push(("grade", "concurrency".into())),
        other => return Err(format!("grade {other:?} has no word in the rule file")),
    }
    match rule.control_behavior {
        ParamControlBehavior::Reject => {}
        ParamControlBehavior::RateLimiter => f.push(("control_behavior", "rate_limiter".into())),
        other => {
            return Err(format!(
                "control_behavior {other:?} has no word in the rule file"
            ));
        }
    }
    let text = |n: u64| n.to_string();
    let (w, dw) = (rule.duration_in_sec, d.duration_in_sec);
    unless(&mut f, "duration_in_sec", w, dw, text);
    unless(&mut f, "burst_count", rule.burst_count, d.burst_count, text);
    let (q, dq) = (rule.max_queueing_time_ms, d.max_queueing_time_ms);
    unless(&mut f, "max_queueing_time_ms", q, dq, text);
    if let Some(capacity) = rule.capacity {
        f.push(("capacity", capacity.to_string()));
    }
    if rule.cluster_mode {
        f.push(("cluster_mode", "true".to_owned()));
    }
    if let Some(config) = param_cluster_config(&rule.cluster_config) {
        f.push(("cluster_config", config));
    }
    if !rule.param_flow_item_list.is_empty() {
        let mut items = String::new();
        for item in &rule.param_flow_item_list {
            let value = param_value(&item.value)?;
            let class = item
                .class_type
                .map(|name| format!(", class_type: {}", string(name)))
                .unwrap_or_default();
            items.push_str(&format!(
                "\n      - {{value: {value}, count: {}{class}}}",
                float(item.count)
            ));
        }
        f.push(("param_flow_item_list", items));
    }
    id(&mut f, rule.id);
    Ok(f)
}

/// A hot-parameter value as the parser tells them apart: `42` a number,
/// `"42"` a string, `true` a boolean. A list (which no rule accepts) is
/// written as one, so that the load refuses it with its position and the
/// rule's other problems.
fn param_value(value: &ParamValue) -> Result<String, String> {
    if let Some(s) = value.as_str() {
        return Ok(string(s).into_owned());
    }
    match value {
        ParamValue::Bool(b) => Ok(b.to_string()),
        ParamValue::Int(i) => Ok(i.to_string()),
        ParamValue::UInt(u) => Ok(u.to_string()),
        // Always with a fraction or an exponent, so that it reads back as
        // a float and not as a whole number.
        ParamValue::Float(v) if v.is_nan() => Ok(".nan".into()),
        ParamValue::Float(v) if v.is_infinite() => Ok(float(*v)),
        ParamValue::Float(v) => Ok(format!("{v:?}")),
        ParamValue::List(list) => {
            let items: Result<Vec<String>, String> = list.iter().map(param_value).collect();
            Ok(format!("[{}]", items?.join(", ")))
        }
        other => Err(format!(
            "param_flow_item_list value {other:?} has no form in the rule file"
        )),
    }
}
