//! One function per rule kind: a rule's mapping to the core rule type, with
//! the core's own checks reported at the fields' positions.

use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::{
    ControlBehavior, FlowGrade, FlowRule, FlowStrategy, cluster_problems,
};
use sentinel_flow_core::param_flow::{
    ParamControlBehavior, ParamFlowGrade, ParamFlowItem, ParamFlowRule,
};
use sentinel_flow_core::system::SystemRule;
use sentinel_flow_core::{ParamValue, RuleError};

use super::fields::RuleFields;
use super::scalar::{Scalar, resolve};
use super::tree::{Node, Value};
use crate::error::{Position, Problem, RuleRef};

/// A rule's own problems, then its names over the length limit.
fn with_names(mut problems: Vec<RuleError>, names: Vec<RuleError>) -> Vec<RuleError> {
    problems.extend(names);
    problems
}

pub(crate) fn flow(
    index: usize,
    node: &Node<'_>,
    max_name_len: usize,
    problems: &mut Vec<Problem>,
) -> Option<FlowRule> {
    const KNOWN: &[&str] = &[
        "id",
        "resource",
        "grade",
        "count",
        "limit_app",
        "strategy",
        "ref_resource",
        "control_behavior",
        "warm_up_period_sec",
        "warm_up_cold_factor",
        "max_queueing_time_ms",
        "stat_interval_ms",
        "stat_sample_count",
        "cluster_mode",
        "cluster_config",
    ];
    let mut f = RuleFields::new("flow", index, node, KNOWN, problems)?;
    let d = FlowRule::default();
    let resource = f.resource();
    let count = f.number("count");
    let count = f.required("count", count);
    let cluster = super::cluster::config(&mut f);
    let rule = FlowRule {
        id: f.u64("id"),
        resource: resource.unwrap_or_default(),
        grade: f
            .word(
                "grade",
                &[
                    ("qps", FlowGrade::Qps),
                    ("concurrency", FlowGrade::Concurrency),
                ],
            )
            .unwrap_or(d.grade),
        count: count.unwrap_or(d.count),
        limit_app: f.string("limit_app").unwrap_or(d.limit_app),
        strategy: f
            .word(
                "strategy",
                &[
                    ("direct", FlowStrategy::Direct),
                    ("relate", FlowStrategy::Relate),
                    ("chain", FlowStrategy::Chain),
                ],
            )
            .unwrap_or(d.strategy),
        ref_resource: f.string("ref_resource"),
        control_behavior: f
            .word(
                "control_behavior",
                &[
                    ("reject", ControlBehavior::Reject),
                    ("warm_up", ControlBehavior::WarmUp),
                    ("rate_limiter", ControlBehavior::RateLimiter),
                    ("warm_up_rate_limiter", ControlBehavior::WarmUpRateLimiter),
                ],
            )
            .unwrap_or(d.control_behavior),
        warm_up_period_sec: f.u32("warm_up_period_sec").unwrap_or(d.warm_up_period_sec),
        warm_up_cold_factor: f
            .u32("warm_up_cold_factor")
            .unwrap_or(d.warm_up_cold_factor),
        max_queueing_time_ms: f
            .u64("max_queueing_time_ms")
            .unwrap_or(d.max_queueing_time_ms),
        stat_interval_ms: f.u64("stat_interval_ms").unwrap_or(d.stat_interval_ms),
        stat_sample_count: f.u32("stat_sample_count").unwrap_or(d.stat_sample_count),
        cluster_mode: f.boolean("cluster_mode").unwrap_or(d.cluster_mode),
        cluster_config: cluster.config.clone(),
    };
    let mut errors = with_names(
        rule.problems(index),
        rule.name_problems(index, max_name_len),
    );
    errors.retain(|e| !cluster.reported(e));
    f.finish(errors, |e| cluster.position_of(e), problems);
    Some(rule)
}

/// The flow rules of a file's `flow` list, then the problems between them:
/// each rule whose flow id another rule uses with another threshold is
/// reported at its `flow_id`.
pub(crate) fn flow_rules(
    nodes: &[Node<'_>],
    problems: &mut Vec<Problem>,
    max_name_len: usize,
) -> Vec<FlowRule> {
    let mut rules = Vec::new();
    let mut read_from = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        if let Some(rule) = flow(i, node, max_name_len, problems) {
            rules.push(rule);
            read_from.push(i);
        }
    }
    for error in cluster_problems(&rules) {
        let index = read_from[error.index];
        let node = &nodes[index];
        problems.push(Problem {
            rule: Some(RuleRef {
                kind: "flow",
                index,
                resource: Some(error.resource.clone()),
            }),
            field: Some(error.field.to_owned()),
            ..Problem::new(
                Some(super::cluster::flow_id_position(node).unwrap_or(node.pos)),
                error.message,
            )
        });
    }
    rules
}

pub(crate) fn degrade(
    index: usize,
    node: &Node<'_>,
    max_name_len: usize,
    problems: &mut Vec<Problem>,
) -> Option<DegradeRule> {
    const KNOWN: &[&str] = &[
        "id",
        "resource",
        "grade",
        "count",
        "time_window_sec",
        "min_request_amount",
        "slow_ratio_threshold",
        "stat_interval_ms",
        "probe_num",
    ];
    let mut f = RuleFields::new("degrade", index, node, KNOWN, problems)?;
    let d = DegradeRule::default();
    let resource = f.resource();
    let grade = f.word(
        "grade",
        &[
            ("slow_request_ratio", DegradeGrade::SlowRequestRatio),
            ("error_ratio", DegradeGrade::ErrorRatio),
            ("error_count", DegradeGrade::ErrorCount),
        ],
    );
    let grade = f.required("grade", grade);
    let count = f.number("count");
    let count = f.required("count", count);
    let rule = DegradeRule {
        id: f.u64("id"),
        resource: resource.unwrap_or_default(),
        grade: grade.unwrap_or(d.grade),
        count: count.unwrap_or(d.count),
        time_window_sec: f.u32("time_window_sec").unwrap_or(d.time_window_sec),
        min_request_amount: f.u64("min_request_amount").unwrap_or(d.min_request_amount),
        slow_ratio_threshold: f
            .number("slow_ratio_threshold")
            .unwrap_or(d.slow_ratio_threshold),
        stat_interval_ms: f.u64("stat_interval_ms").unwrap_or(d.stat_interval_ms),
        probe_num: f.u32("probe_num").unwrap_or(d.probe_num),
    };
    f.finish(
        with_names(
            rule.problems(index),
            rule.name_problems(index, max_name_len),
        ),
        |_| None,
        problems,
    );
    Some(rule)
}

pub(crate) fn system(
    index: usize,
    node: &Node<'_>,
    _max_name_len: usize,
    problems: &mut Vec<Problem>,
) -> Option<SystemRule> {
    const KNOWN: &[&str] = &[
        "id",
        "highest_system_load",
        "highest_cpu_usage",
        "qps",
        "avg_rt",
        "max_thread",
    ];
    let mut f = RuleFields::new("system", index, node, KNOWN, problems)?;
    let rule = SystemRule {
        id: f.u64("id"),
        highest_system_load: f.number("highest_system_load"),
        highest_cpu_usage: f.number("highest_cpu_usage"),
        qps: f.number("qps"),
        avg_rt: f.u64("avg_rt"),
        max_thread: f.u64("max_thread"),
    };
    f.finish(rule.problems(index), |_| None, problems);
    Some(rule)
}

pub(crate) fn authority(
    index: usize,
    node: &Node<'_>,
    max_name_len: usize,
    problems: &mut Vec<Problem>,
) -> Option<AuthorityRule> {
    const KNOWN: &[&str] = &["id", "resource", "strategy", "limit_app"];
    let mut f = RuleFields::new("authority", index, node, KNOWN, problems)?;
    let resource = f.resource();
    let strategy = f
        .word(
            "strategy",
            &[
                ("white", AuthorityStrategy::White),
                ("black", AuthorityStrategy::Black),
            ],
        )
        .unwrap_or_default();
    let origins = match f.take("limit_app") {
        Some(node) => origins(&mut f, node),
        None => f.required("limit_app", None),
    };
    let rule = AuthorityRule {
        id: f.u64("id"),
        resource: resource.unwrap_or_default(),
        strategy,
        limit_app: origins.unwrap_or_default(),
    };
    f.finish(
        with_names(
            rule.problems(index),
            rule.name_problems(index, max_name_len),
        ),
        |_| None,
        problems,
    );
    Some(rule)
}

/// `limit_app`: a list of origins, or one origin.
fn origins(f: &mut RuleFields<'_>, node: &Node<'_>) -> Option<Vec<String>> {
    let items: &[Node<'_>] = match &node.value {
        Value::Seq(items) => items,
        Value::Scalar { text, .. } => return Some(vec![text.to_string()]),
        other => {
            let message = format!("must be a list of origins, got {}", other.describe());
            f.report_in("limit_app", "limit_app".into(), node.pos, message);
            return None;
        }
    };
    let mut list = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match &item.value {
            Value::Scalar { text, .. } => list.push(text.to_string()),
            other => {
                let message = format!("must be an origin name, got {}", other.describe());
                f.report_in("limit_app", format!("limit_app[{i}]"), item.pos, message);
            }
        }
    }
    Some(list)
}

pub(crate) fn param_flow(
    index: usize,
    node: &Node<'_>,
    max_name_len: usize,
    problems: &mut Vec<Problem>,
) -> Option<ParamFlowRule> {
    const KNOWN: &[&str] = &[
        "id",
        "resource",
        "param_idx",
        "grade",
        "count",
        "control_behavior",
        "max_queueing_time_ms",
        "burst_count",
        "duration_in_sec",
        "param_flow_item_list",
        "capacity",
        "cluster_mode",
        "cluster_config",
    ];
    let mut f = RuleFields::new("param_flow", index, node, KNOWN, problems)?;
    let d = ParamFlowRule::default();
    let resource = f.resource();
    let param_idx = f.integer("param_idx", i32::MIN.into(), i32::MAX.into());
    let param_idx = f
        .required("param_idx", param_idx)
        .and_then(|i| i32::try_from(i).ok());
    let count = f.number("count");
    let count = f.required("count", count);
    let cluster = super::cluster::config(&mut f);
    let mut positions = Vec::new();
    let items = match f.list("param_flow_item_list") {
        Some(nodes) => items(&mut f, nodes, &mut positions),
        None => Vec::new(),
    };
    let rule = ParamFlowRule {
        id: f.u64("id"),
        resource: resource.unwrap_or_default(),
        param_idx: param_idx.unwrap_or(d.param_idx),
        grade: f
            .word(
                "grade",
                &[
                    ("qps", ParamFlowGrade::Qps),
                    ("concurrency", ParamFlowGrade::Concurrency),
                ],
            )
            .unwrap_or(d.grade),
        count: count.unwrap_or(d.count),
        control_behavior: f
            .word(
                "control_behavior",
                &[
                    ("reject", ParamControlBehavior::Reject),
                    ("rate_limiter", ParamControlBehavior::RateLimiter),
                ],
            )
            .unwrap_or(d.control_behavior),
        max_queueing_time_ms: f
            .u64("max_queueing_time_ms")
            .unwrap_or(d.max_queueing_time_ms),
        burst_count: f.u64("burst_count").unwrap_or(d.burst_count),
        duration_in_sec: f.u64("duration_in_sec").unwrap_or(d.duration_in_sec),
        param_flow_item_list: items,
        capacity: f
            .integer("capacity", 0, usize::MAX as i128)
            .and_then(|c| usize::try_from(c).ok()),
        cluster_mode: f.boolean("cluster_mode").unwrap_or(d.cluster_mode),
        cluster_config: cluster.param_config(),
    };
    // The core names an item by its index in its message: "item 2 (...): count ...".
    let locate = |error: &sentinel_flow_core::RuleError| {
        let rest = error.message.strip_prefix("item ")?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let (value, count) = positions.get(digits.parse::<usize>().ok()?)?;
        Some(if error.message.contains("): count") {
            *count
        } else {
            *value
        })
    };
    let mut errors = with_names(
        rule.problems(index),
        rule.name_problems(index, max_name_len),
    );
    errors.retain(|e| !cluster.reported(e));
    f.finish(
        errors,
        |e| cluster.position_of(e).or_else(|| locate(e)),
        problems,
    );
    Some(rule)
}

/// The items of `param_flow_item_list`, each `{value, count}`; the
/// positions of each item's value and count go to `positions`, in the
/// order of the returned items.
fn items(
    f: &mut RuleFields<'_>,
    nodes: &[Node<'_>],
    positions: &mut Vec<(Position, Position)>,
) -> Vec<ParamFlowItem> {
    const FIELD: &str = "param_flow_item_list";
    let mut items = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let part = |name: &str| format!("{FIELD}[{i}]{name}");
        let Value::Map(entries) = &node.value else {
            let message = format!(
                "must be a mapping {{value, count}}, got {}",
                node.value.describe()
            );
            f.report_in(FIELD, part(""), node.pos, message);
            continue;
        };
        let (mut value, mut count, mut class) = (None, None, None);
        let mut ok = true;
        for (key, v) in entries {
            let name = match &key.value {
                Value::Scalar { text, .. } => text.as_ref(),
                _ => "?",
            };
            match name {
                "value" => value = Some(v),
                "count" => count = Some(v),
                "class_type" => class = Some(v),
                _ => {
                    let message =
                        "is not a field of an item (known: value, count, class_type)".to_owned();
                    f.report_in(FIELD, part(&format!(".{name}")), key.pos, message);
                    ok = false;
                }
            }
        }
        let value = match value.map(|v| (v, item_value(v))) {
            Some((v, Ok(value))) => Some((v.pos, value)),
            Some((v, Err(message))) => {
                f.report_in(FIELD, part(".value"), v.pos, message);
                None
            }
            None => {
                f.report_in(FIELD, part(".value"), node.pos, "is required".into());
                None
            }
        };
        let count = match count.map(|c| (c, number(c))) {
            Some((c, Some(n))) => Some((c.pos, n)),
            Some((c, None)) => {
                let message = format!("must be a number, got {}", c.value.describe());
                f.report_in(FIELD, part(".count"), c.pos, message);
                None
            }
            None => {
                f.report_in(FIELD, part(".count"), node.pos, "is required".into());
                None
            }
        };
        let class_type = match class.map(|c| (c, class_type(c))) {
            None => Some(None),
            Some((_, Ok(name))) => Some(Some(name)),
            Some((c, Err(message))) => {
                f.report_in(FIELD, part(".class_type"), c.pos, message);
                None
            }
        };
        if let (Some((value_pos, value)), Some((count_pos, count)), Some(class_type), true) =
            (value, count, class_type, ok)
        {
            positions.push((value_pos, count_pos));
            items.push(ParamFlowItem {
                value,
                count,
                class_type,
            });
        }
    }
    items
}

fn number(node: &Node<'_>) -> Option<f64> {
    let Value::Scalar { text, plain } = &node.value else {
        return None;
    };
    match resolve(text, *plain) {
        Scalar::Int(i) => Some(i as f64),
        Scalar::Float(f) => Some(f),
        _ => None,
    }
}

/// An item's value: a string, a number or a boolean, as written
/// (`7` is a whole number, `7.0` a float, `"7"` a string).
fn item_value(node: &Node<'_>) -> Result<ParamValue, String> {
    let got = || {
        format!(
            "must be a string, a number or a boolean, got {}",
            node.value.describe()
        )
    };
    let Value::Scalar { text, plain } = &node.value else {
        return Err(got());
    };
    match resolve(text, *plain) {
        Scalar::Str(s) => Ok(ParamValue::from(s)),
        Scalar::Bool(b) => Ok(ParamValue::from(b)),
        Scalar::Int(i) => i64::try_from(i)
            .map(ParamValue::from)
            .or_else(|_| u64::try_from(i).map(ParamValue::from))
            .map_err(|_| format!("must fit in 64 bits, got {i}")),
        Scalar::Float(v) => Ok(ParamValue::from(v)),
        Scalar::Null => Err(got()),
    }
}

/// An item's `class_type`: one of the Java type names Sentinel parses.
fn class_type(node: &Node<'_>) -> Result<&'static str, String> {
    let names = || {
        sentinel_flow_core::param_flow::PARAM_CLASS_TYPES
            .iter()
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    match &node.value {
        Value::Scalar { text, .. } => sentinel_flow_core::param_flow::param_class_kind(text)
            .map(|(name, _)| name)
            .ok_or_else(|| format!("must be one of {}, got {text:?}", names())),
        other => Err(format!(
            "must be a Java type name, got {}",
            other.describe()
        )),
    }
}
