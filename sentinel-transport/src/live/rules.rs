//! The rules in force and the breakers, in the words an operator reads: a
//! headline (the limit) and a few details, rather than every field.

use std::collections::HashMap;

use sentinel_flow_core::RuleBook;
use sentinel_flow_core::adaptive::AdaptiveRule;
use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::degrade::{BreakerSnapshot, DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::{ControlBehavior, FlowGrade, FlowRule, FlowStrategy};
use sentinel_flow_core::param_flow::{ParamControlBehavior, ParamFlowGrade, ParamFlowRule};
use sentinel_flow_core::system::SystemRule;
use serde::Serialize;

/// Hot-parameter exceptions listed per rule; the rest are counted.
const ITEMS_SHOWN: usize = 5;

/// One rule, readable.
#[derive(Debug, Serialize)]
pub(crate) struct RuleView {
    /// The resource it guards (`*` for system rules: every inbound entry).
    resource: String,
    /// The limit, e.g. `≤ 100 QPS`.
    headline: String,
    /// How it acts, from whom, for how long.
    details: Vec<String>,
}

/// The rules of one kind: the first `limit` and how many there are.
#[derive(Debug, Serialize)]
pub(crate) struct KindView {
    total: usize,
    items: Vec<RuleView>,
}

/// The rules of every kind.
#[derive(Debug, Serialize)]
pub(crate) struct RulesView {
    flow: KindView,
    degrade: KindView,
    system: KindView,
    authority: KindView,
    param_flow: KindView,
    adaptive: KindView,
}

/// One circuit breaker and where it stands.
#[derive(Debug, Serialize)]
pub(crate) struct BreakerView {
    resource: String,
    /// What trips it, e.g. `error ratio > 0.5`.
    trips_on: String,
    /// `closed`, `open` or `half_open`.
    state: &'static str,
    /// Calls completed in the current statistics window, and the bad ones.
    window_total: u64,
    window_bad: u64,
    /// When open: milliseconds until a call may probe.
    retry_in_ms: Option<u64>,
    probes_admitted: u32,
    probes_passed: u32,
}

impl BreakerView {
    pub(crate) fn of(rule: &DegradeRule, snapshot: &BreakerSnapshot, now: u64) -> BreakerView {
        BreakerView {
            resource: rule.resource.clone(),
            trips_on: degrade_headline(rule),
            state: snapshot.state.as_str(),
            window_total: snapshot.total,
            window_bad: snapshot.bad,
            retry_in_ms: snapshot.next_retry_ms.map(|at| at.saturating_sub(now)),
            probes_admitted: snapshot.probes_admitted,
            probes_passed: snapshot.probes_passed,
        }
    }
}

impl RulesView {
    pub(crate) fn of(book: &RuleBook, limit: usize) -> RulesView {
        fn kind<R>(rules: &[R], limit: usize, view: impl Fn(&R) -> RuleView) -> KindView {
            KindView {
                total: rules.len(),
                items: rules.iter().take(limit).map(view).collect(),
            }
        }
        RulesView {
            flow: kind(&book.flow, limit, flow),
            degrade: kind(&book.degrade, limit, degrade),
            system: kind(&book.system, limit, system),
            authority: kind(&book.authority, limit, authority),
            param_flow: kind(&book.param_flow, limit, param_flow),
            adaptive: kind(&book.adaptive, limit, adaptive),
        }
    }
}

/// Rules guarding one resource, by kind.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub(crate) struct RuleCountsView {
    pub(crate) flow: usize,
    pub(crate) degrade: usize,
    pub(crate) param_flow: usize,
    pub(crate) authority: usize,
    pub(crate) adaptive: usize,
}

/// How many rules of each kind guard each resource.
pub(crate) fn rule_counts(book: &RuleBook) -> HashMap<&str, RuleCountsView> {
    let mut counts: HashMap<&str, RuleCountsView> = HashMap::new();
    for rule in &book.flow {
        counts.entry(&rule.resource).or_default().flow += 1;
    }
    for rule in &book.degrade {
        counts.entry(&rule.resource).or_default().degrade += 1;
    }
    for rule in &book.param_flow {
        counts.entry(&rule.resource).or_default().param_flow += 1;
    }
    for rule in &book.authority {
        counts.entry(&rule.resource).or_default().authority += 1;
    }
    for rule in &book.adaptive {
        counts.entry(&rule.resource).or_default().adaptive += 1;
    }
    counts
}

/// A number without a useless `.0`.
fn num(value: f64) -> String {
    format!("{value}")
}

fn with_id(mut details: Vec<String>, id: Option<u64>) -> Vec<String> {
    if let Some(id) = id {
        details.push(format!("id {id}"));
    }
    details
}

fn flow(rule: &FlowRule) -> RuleView {
    let headline = match rule.grade {
        FlowGrade::Qps if rule.stat_interval_ms == 1_000 => format!("≤ {} QPS", num(rule.count)),
        FlowGrade::Qps => format!("≤ {} per {} ms", num(rule.count), rule.stat_interval_ms),
        FlowGrade::Concurrency => format!("≤ {} concurrent", num(rule.count)),
    };
    let mut details = vec![match rule.control_behavior {
        _ if rule.grade == FlowGrade::Concurrency => "reject past the limit".to_owned(),
        ControlBehavior::Reject => "reject past the limit".to_owned(),
        ControlBehavior::WarmUp => format!(
            "warm up over {} s (cold factor {})",
            rule.warm_up_period_sec, rule.warm_up_cold_factor
        ),
        ControlBehavior::RateLimiter => {
            format!("pace evenly, queue ≤ {} ms", rule.max_queueing_time_ms)
        }
        ControlBehavior::WarmUpRateLimiter => format!(
            "warm up over {} s, then pace, queue ≤ {} ms",
            rule.warm_up_period_sec, rule.max_queueing_time_ms
        ),
    }];
    if rule.grade == FlowGrade::Concurrency && rule.control_behavior != ControlBehavior::Reject {
        details.push(format!(
            "{} ignored: the concurrency grade only rejects",
            behavior_name(rule.control_behavior)
        ));
    }
    if rule.cluster_mode && rule.grade == FlowGrade::Concurrency {
        details.push("cluster mode: concurrency limited on this instance".to_owned());
    }
    details.push(match rule.limit_app.as_str() {
        "default" => "callers: all".to_owned(),
        "other" => "callers: others".to_owned(),
        app => format!("caller: {app}"),
    });
    let reference = rule.ref_resource.as_deref().unwrap_or("");
    match rule.strategy {
        FlowStrategy::Direct => {}
        FlowStrategy::Relate => details.push(format!("counts {reference} (relate)")),
        FlowStrategy::Chain => details.push(format!("entered via {reference} (chain)")),
    }
    RuleView {
        resource: rule.resource.clone(),
        headline,
        details: with_id(details, rule.id),
    }
}

/// The rule as loaded; its limit now is in the resource's row.
fn adaptive(rule: &AdaptiveRule) -> RuleView {
    let details = vec![
        format!("starts at {}", rule.initial_limit),
        format!("window {} ms, ≥ {} calls", rule.window_ms, rule.min_samples),
        match rule.limit_app.as_str() {
            "default" => "callers: all".to_owned(),
            "other" => "callers: others".to_owned(),
            app => format!("caller: {app}"),
        },
    ];
    RuleView {
        resource: rule.resource.clone(),
        headline: format!(
            "{} limit in {}..={}",
            rule.algorithm.name(),
            rule.min_limit,
            rule.max_limit
        ),
        details: with_id(details, rule.id),
    }
}

fn behavior_name(behavior: ControlBehavior) -> &'static str {
    match behavior {
        ControlBehavior::WarmUp => "warm up",
        ControlBehavior::RateLimiter => "queueing",
        ControlBehavior::WarmUpRateLimiter => "warm up and queueing",
        _ => "behaviour",
    }
}

fn degrade_headline(rule: &DegradeRule) -> String {
    match rule.grade {
        DegradeGrade::SlowRequestRatio => format!(
            "slow (> {} ms) ratio > {}",
            num(rule.count),
            num(rule.slow_ratio_threshold)
        ),
        DegradeGrade::ErrorRatio => format!("error ratio > {}", num(rule.count)),
        DegradeGrade::ErrorCount => format!("errors > {}", num(rule.count)),
    }
}

fn degrade(rule: &DegradeRule) -> RuleView {
    let details = vec![
        format!("open {} s", rule.time_window_sec),
        format!(
            "min {} calls per {} ms",
            rule.min_request_amount, rule.stat_interval_ms
        ),
        format!(
            "{} probe{}",
            rule.probe_num,
            if rule.probe_num == 1 { "" } else { "s" }
        ),
    ];
    RuleView {
        resource: rule.resource.clone(),
        headline: degrade_headline(rule),
        details: with_id(details, rule.id),
    }
}

fn system(rule: &SystemRule) -> RuleView {
    let limits: Vec<String> = [
        rule.highest_system_load
            .map(|v| format!("load ≤ {}", num(v))),
        rule.highest_cpu_usage
            .map(|v| format!("CPU ≤ {}%", num((v * 1000.0).round() / 10.0))),
        rule.qps.map(|v| format!("≤ {} QPS", num(v))),
        rule.avg_rt.map(|v| format!("RT ≤ {v} ms")),
        rule.max_thread.map(|v| format!("≤ {v} concurrent")),
    ]
    .into_iter()
    .flatten()
    .collect();
    RuleView {
        resource: "*".to_owned(),
        headline: if limits.is_empty() {
            "no limit".to_owned()
        } else {
            limits.join(", ")
        },
        details: with_id(vec!["every inbound entry".to_owned()], rule.id),
    }
}

fn authority(rule: &AuthorityRule) -> RuleView {
    let apps = rule.limit_app.join(", ");
    let headline = match rule.strategy {
        AuthorityStrategy::White => format!("only {apps}"),
        AuthorityStrategy::Black => format!("not {apps}"),
    };
    let details = vec![
        match rule.strategy {
            AuthorityStrategy::White => "white list of origins",
            AuthorityStrategy::Black => "black list of origins",
        }
        .to_owned(),
    ];
    RuleView {
        resource: rule.resource.clone(),
        headline,
        details: with_id(details, rule.id),
    }
}

fn param_flow(rule: &ParamFlowRule) -> RuleView {
    let per = if rule.duration_in_sec == 1 {
        "s".to_owned()
    } else {
        format!("{} s", rule.duration_in_sec)
    };
    let headline = match rule.grade {
        ParamFlowGrade::Concurrency => {
            format!(
                "arg {}: ≤ {} concurrent per value",
                rule.param_idx,
                num(rule.count)
            )
        }
        _ => format!(
            "arg {}: ≤ {} per {per} per value",
            rule.param_idx,
            num(rule.count)
        ),
    };
    let mut details = vec![match rule.control_behavior {
        ParamControlBehavior::RateLimiter => {
            format!("pace evenly, queue ≤ {} ms", rule.max_queueing_time_ms)
        }
        _ => "reject past the limit".to_owned(),
    }];
    if rule.burst_count > 0 {
        details.push(format!("burst {}", rule.burst_count));
    }
    if rule.cluster_mode {
        details.push("cluster mode: values counted on this instance".to_owned());
    }
    for item in rule.param_flow_item_list.iter().take(ITEMS_SHOWN) {
        details.push(format!("{} → {}", item.value, num(item.count)));
    }
    if rule.param_flow_item_list.len() > ITEMS_SHOWN {
        details.push(format!(
            "{} more values",
            rule.param_flow_item_list.len() - ITEMS_SHOWN
        ));
    }
    RuleView {
        resource: rule.resource.clone(),
        headline,
        details: with_id(details, rule.id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow_with(f: impl FnOnce(&mut FlowRule)) -> RuleView {
        let mut rule = FlowRule::new("r", 10.0);
        f(&mut rule);
        flow(&rule)
    }

    #[test]
    fn flow_rules_say_how_they_act() {
        let view = flow_with(|r| {
            r.control_behavior = ControlBehavior::WarmUp;
            r.limit_app = "app-a".into();
            r.id = Some(7);
        });
        assert_eq!(view.headline, "≤ 10 QPS");
        assert_eq!(
            view.details,
            ["warm up over 10 s (cold factor 3)", "caller: app-a", "id 7"]
        );
        let view = flow_with(|r| {
            r.grade = FlowGrade::Concurrency;
            r.control_behavior = ControlBehavior::RateLimiter;
            r.strategy = FlowStrategy::Relate;
            r.ref_resource = Some("db".into());
            r.limit_app = "other".into();
        });
        assert_eq!(view.headline, "≤ 10 concurrent");
        assert_eq!(
            view.details,
            [
                "reject past the limit",
                "queueing ignored: the concurrency grade only rejects",
                "callers: others",
                "counts db (relate)"
            ]
        );
        let view = flow_with(|r| {
            r.grade = FlowGrade::Concurrency;
            r.cluster_mode = true;
        });
        assert_eq!(
            view.details,
            [
                "reject past the limit",
                "cluster mode: concurrency limited on this instance",
                "callers: all"
            ]
        );
        let view = flow_with(|r| r.stat_interval_ms = 5_000);
        assert_eq!(view.headline, "≤ 10 per 5000 ms");
    }

    #[test]
    fn slow_call_breakers_and_paced_hot_parameters() {
        let mut rule = DegradeRule::new("r", DegradeGrade::SlowRequestRatio, 200.0);
        rule.slow_ratio_threshold = 0.25;
        rule.probe_num = 3;
        let view = degrade(&rule);
        assert_eq!(view.headline, "slow (> 200 ms) ratio > 0.25");
        assert_eq!(view.details[2], "3 probes");

        let mut rule = ParamFlowRule::new("r", 1, 5.0);
        rule.duration_in_sec = 10;
        rule.control_behavior = ParamControlBehavior::RateLimiter;
        rule.burst_count = 2;
        for i in 0..7 {
            rule.param_flow_item_list
                .push(sentinel_flow_core::param_flow::ParamFlowItem::new(
                    i64::from(i),
                    1.0,
                ));
        }
        let view = param_flow(&rule);
        assert_eq!(view.headline, "arg 1: ≤ 5 per 10 s per value");
        assert_eq!(view.details[0], "pace evenly, queue ≤ 0 ms");
        assert_eq!(view.details[1], "burst 2");
        assert_eq!(view.details.last().unwrap(), "2 more values");
        assert_eq!(view.details.len(), 2 + ITEMS_SHOWN + 1);
    }
}
