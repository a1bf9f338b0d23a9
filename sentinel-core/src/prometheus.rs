//! Prometheus text exposition of an instance's statistics (feature
//! `prometheus`), produced at scrape time from the node statistics:
//! nothing is added to entries, and nothing is kept between scrapes.
//!
//! Per resource (label `resource`):
//!
//! - counters `sentinel_pass_total`, `sentinel_success_total`,
//!   `sentinel_exception_total`: requests since the resource was first
//!   entered, from the node's lifetime [`Totals`]. They are exact at the
//!   instant of the scrape (the second still filling included), never go
//!   down between scrapes, and miss nothing however rarely the endpoint is
//!   scraped.
//! - counter `sentinel_block_total` with a second label, `kind` (`flow`,
//!   `degrade`, `system`, `authority`, `param_flow`, or a user slot's kind):
//!   refusals since the instance was made, from
//!   [`Sentinel::block_counts`]; a series appears with the first block of
//!   its kind.
//! - gauges `sentinel_concurrency` (calls inside now) and
//!   `sentinel_avg_rt_ms` (over the second window).
//! - gauge `sentinel_breaker_state` per degrade rule (label `rule`: its id,
//!   or its position among the resource's degrade rules when it has none):
//!   0 closed, 1 open, 2 half-open.
//! - per adaptive rule (labels `resource`, `limit_app`, `algorithm`, and
//!   `rule`: its id, or its position among the resource's adaptive rules
//!   in the order they are checked when it has none): gauges
//!   `sentinel_adaptive_limit` (the limit in force),
//!   `sentinel_adaptive_in_flight` (calls admitted under the rule and not
//!   exited), `sentinel_adaptive_last_rtt_ms` (the average response time
//!   of the last sample window folded, 0 before any) and, for Gradient2
//!   and Vegas rules, `sentinel_adaptive_reference_rtt_ms` (the RTT windows
//!   are compared against: Gradient2's long-term average, Vegas's no-load
//!   RTT; 0 before the first window). A removed rule's series go with it.
//!   See [`AdaptiveSnapshot`].
//! - for resources whose percentiles are tracked
//!   ([`Sentinel::track_percentiles`]) and only for them: summary
//!   `sentinel_rt_ms`, response-time quantiles 0.5, 0.9 and 0.99 over the
//!   last minute (`NaN` when no call completed in it), with
//!   `sentinel_rt_ms_sum` and `sentinel_rt_ms_count` counting every call
//!   recorded since tracking began (counters, as a summary's are); and
//!   gauge `sentinel_rt_max_ms`, the largest response time over the last
//!   minute. Both are left out when no resource is tracked.
//!
//! - gauge `sentinel_cluster_rules_unattached`, for each resource with flow
//!   rules in cluster mode in force (entered yet or not): how many of them
//!   fall back (their count on this instance alone, or a pass) because the
//!   instance has no cluster service attached
//!   ([`Sentinel::set_cluster_tokens`]), a misconfiguration; 0 while one
//!   is attached. An attached service that cannot answer shows in its own
//!   families instead (`sentinel-flow-cluster`'s
//!   `sentinel_cluster_fallback`).
//! - gauge `sentinel_cluster_param_rules_local`, for each resource with
//!   hot-parameter rules in cluster mode in force: how many of them count
//!   each value on this instance alone, attached service or not (those of
//!   the concurrency grade; the cluster counts the values of QPS rules).
//!
//! Per instance, the caps ([`Sentinel::caps`]), so that an operator sees a
//! cap being hit:
//!
//! - counters `sentinel_refused_resources_total`,
//!   `sentinel_refused_contexts_total`, `sentinel_refused_origins_total`:
//!   entries refused a node since the instance was made, because their name
//!   was new past the cap or over the length limit.
//! - gauge `sentinel_cap` (label `cap`: `resources`, `contexts`, `origins`,
//!   the last per resource) and gauge `sentinel_cap_used` (labels `cap` and
//!   `made_by`: `entries`, which count against the cap, or `rules`, names
//!   reserved by loaded rules outside it).
//!
//! The text is the Prometheus text format, version 0.0.4 (serve it with
//! [`CONTENT_TYPE`]): `# HELP` and `# TYPE` before each family, label values
//! with `\`, `"` and line feeds escaped.
//!
//! ```
//! use sentinel_flow_core::prometheus::render_prometheus;
//! use sentinel_flow_core::{ManualClock, Sentinel};
//!
//! let clock = ManualClock::new(1_700_000_000_000);
//! let sentinel = Sentinel::builder().clock(clock.clone()).build();
//! drop(sentinel.entry("GET:/orders")?);
//!
//! let text = render_prometheus(&sentinel);
//! assert!(text.contains("# TYPE sentinel_pass_total counter\n"));
//! assert!(text.contains("sentinel_pass_total{resource=\"GET:/orders\"} 1\n"));
//! # Ok::<(), sentinel_flow_core::BlockError>(())
//! ```

use std::collections::HashMap;
use std::fmt::{Display, Write as _};

use crate::adaptive::{AdaptiveAlgorithm, AdaptiveRule, AdaptiveSnapshot};
use crate::degrade::BreakerState;
use crate::node::{ResourceNode, Totals};
use crate::rules::RuleSet;
use crate::stat::RtPercentiles;
use crate::{Caps, Sentinel};

/// The `Content-Type` of the text [`render_prometheus`] produces.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Labels of one sample, in order: `(name, value)`. Names must be valid
/// Prometheus label names; values are escaped.
type Labels<'a, const N: usize> = [(&'a str, &'a str); N];

/// A counter by resource: family name, help, and the total it reads.
type Counter = (&'static str, &'static str, fn(&Totals) -> u64);

const COUNTERS: [Counter; 3] = [
    ("sentinel_pass_total", "Requests let through.", |t| t.pass),
    ("sentinel_success_total", "Requests completed.", |t| {
        t.success
    }),
    (
        "sentinel_exception_total",
        "Completed requests that recorded an error.",
        |t| t.exception,
    ),
];

/// The text exposition of `sentinel` now: every figure read at the call,
/// nothing remembered from an earlier one, so any number of endpoints or
/// scrapers may call it. With a cluster service set
/// ([`Sentinel::set_cluster_tokens`], e.g. `sentinel-flow-cluster`), its own
/// families follow ([`ClusterTokens::render_prometheus`](crate::flow::ClusterTokens::render_prometheus)).
pub fn render_prometheus(sentinel: &Sentinel) -> String {
    let now = sentinel.now_ms();
    // The same resources in every family, whatever is entered meanwhile,
    // and one consistent read of each one's totals for all its counters.
    let nodes: Vec<&ResourceNode> = sentinel.resource_nodes().collect();
    let resources: Vec<(&str, Totals)> = nodes
        .iter()
        .map(|node| (node.name(), node.stats().lifetime()))
        .collect();
    let mut out = String::with_capacity(512 + resources.len() * 400);

    for (name, help, total) in COUNTERS {
        family(
            &mut out,
            name,
            help,
            "counter",
            resources
                .iter()
                .map(|(resource, totals)| ([("resource", *resource)], total(totals))),
        );
    }
    // Blocks by kind, from each thread's tally of its blocks (the nodes
    // count blocks of every kind together).
    let blocks = sentinel.block_counts();
    family(
        &mut out,
        "sentinel_block_total",
        "Requests refused, by the kind of check that refused them.",
        "counter",
        blocks.iter().map(|b| {
            (
                [("resource", b.resource.as_str()), ("kind", b.kind.as_str())],
                b.count,
            )
        }),
    );

    family(
        &mut out,
        "sentinel_concurrency",
        "Calls inside the resource now.",
        "gauge",
        nodes
            .iter()
            .map(|node| ([("resource", node.name())], node.stats().cur_concurrency())),
    );
    family(
        &mut out,
        "sentinel_avg_rt_ms",
        "Average response time over the second window, in milliseconds.",
        "gauge",
        nodes
            .iter()
            .map(|node| ([("resource", node.name())], node.stats().avg_rt(now))),
    );

    let breakers = sentinel.degrade_rules().breakers();
    let mut positions: HashMap<&str, usize> = HashMap::new();
    let breaker_rows: Vec<(&str, String, u8)> = breakers
        .iter()
        .map(|(rule, snapshot)| {
            let position = positions.entry(&rule.resource).or_default();
            let label = rule
                .id
                .map_or_else(|| position.to_string(), |id| id.to_string());
            *position += 1;
            let state = match snapshot.state {
                BreakerState::Closed => 0,
                BreakerState::Open => 1,
                BreakerState::HalfOpen => 2,
            };
            (rule.resource.as_str(), label, state)
        })
        .collect();
    family(
        &mut out,
        "sentinel_breaker_state",
        "Circuit breaker state: 0 closed, 1 open, 2 half-open.",
        "gauge",
        breaker_rows
            .iter()
            .map(|(resource, rule, state)| ([("resource", *resource), ("rule", rule)], state)),
    );

    adaptive(&mut out, sentinel);
    cluster_unattached(
        &mut out,
        &sentinel.rule_set(),
        sentinel.has_cluster_tokens(),
    );
    caps(&mut out, &sentinel.caps());

    let tracked: Vec<(&str, RtPercentiles)> = nodes
        .iter()
        .filter_map(|node| Some((node.name(), node.rt_percentiles(now)?)))
        .collect();
    if !tracked.is_empty() {
        percentiles(&mut out, &tracked);
    }
    // The cluster service's families (`sentinel_cluster_fallback`, ...).
    sentinel.engine.parts.cluster.render_prometheus(&mut out);
    out
}

/// Per adaptive rule, its limit, its calls in flight and its RTT
/// estimates.
fn adaptive(out: &mut String, sentinel: &Sentinel) {
    let limits = sentinel.adaptive_rules().limits();
    let mut positions: HashMap<&str, usize> = HashMap::new();
    let ids: Vec<String> = limits
        .iter()
        .map(|(rule, _)| {
            let position = positions.entry(&rule.resource).or_default();
            let label = rule
                .id
                .map_or_else(|| position.to_string(), |id| id.to_string());
            *position += 1;
            label
        })
        .collect();
    let rows: Vec<(Labels<'_, 4>, &AdaptiveRule, &AdaptiveSnapshot)> = limits
        .iter()
        .zip(&ids)
        .map(|((rule, snapshot), id)| {
            let labels = [
                ("resource", rule.resource.as_str()),
                ("limit_app", rule.limit_app.as_str()),
                ("algorithm", rule.algorithm.name()),
                ("rule", id.as_str()),
            ];
            (labels, rule, snapshot)
        })
        .collect();
    family(
        out,
        "sentinel_adaptive_limit",
        "The concurrency limit in force of an adaptive rule.",
        "gauge",
        rows.iter().map(|(labels, _, s)| (*labels, s.limit)),
    );
    family(
        out,
        "sentinel_adaptive_in_flight",
        "Calls admitted under an adaptive rule and not exited yet.",
        "gauge",
        rows.iter().map(|(labels, _, s)| (*labels, s.in_flight)),
    );
    family(
        out,
        "sentinel_adaptive_last_rtt_ms",
        "Average response time of an adaptive rule's last sample window folded, in milliseconds.",
        "gauge",
        rows.iter().map(|(labels, _, s)| (*labels, s.last_rtt_ms)),
    );
    family(
        out,
        "sentinel_adaptive_reference_rtt_ms",
        "The response time an adaptive rule compares windows against (Gradient2: long-term average, Vegas: no-load), in milliseconds.",
        "gauge",
        rows.iter()
            .filter(|(_, rule, _)| !matches!(rule.algorithm, AdaptiveAlgorithm::Aimd { .. }))
            .map(|(labels, _, s)| (*labels, s.reference_rtt_ms)),
    );
}

/// Per resource, the rules in cluster mode that fall back for want of a
/// cluster service.
fn cluster_unattached(out: &mut String, set: &RuleSet, attached: bool) {
    family(
        out,
        "sentinel_cluster_rules_unattached",
        "Flow rules in cluster mode falling back because no cluster service is attached.",
        "gauge",
        crate::flow::cluster_rules_by_resource(set.rules_of::<crate::flow::FlowKind>())
            .into_iter()
            .map(|(resource, count)| ([("resource", resource)], if attached { 0 } else { count })),
    );
    family(
        out,
        "sentinel_cluster_param_rules_local",
        "Hot-parameter rules in cluster mode counting each value on this instance alone (concurrency grade).",
        "gauge",
        crate::param_flow::cluster_rules_by_resource(
            set.rules_of::<crate::param_flow::ParamFlowKind>(),
        )
        .into_iter()
        .map(|(resource, count)| ([("resource", resource)], count)),
    );
}

/// The refusals and fill of the instance's caps.
fn caps(out: &mut String, caps: &Caps) {
    let all = [
        ("resources", caps.resources),
        ("contexts", caps.contexts),
        ("origins", caps.origins),
    ];
    for (cap, usage) in all {
        family(
            out,
            &format!("sentinel_refused_{cap}_total"),
            &format!(
                "Entries refused a node: new {cap} past the cap, or names over the length limit."
            ),
            "counter",
            [([], usage.refused)],
        );
    }
    family(
        out,
        "sentinel_cap",
        "The caps on names made by entries (origins: per resource).",
        "gauge",
        all.map(|(cap, usage)| ([("cap", cap)], usage.max)),
    );
    family(
        out,
        "sentinel_cap_used",
        "Names made by entries (against the cap) and reserved by rules (outside it).",
        "gauge",
        all.iter().flat_map(|(cap, usage)| {
            [
                ([("cap", *cap), ("made_by", "entries")], usage.used),
                ([("cap", *cap), ("made_by", "rules")], usage.reserved),
            ]
        }),
    );
}

/// The summary and the maximum of the resources whose percentiles are
/// tracked.
fn percentiles(out: &mut String, tracked: &[(&str, RtPercentiles)]) {
    header(
        out,
        "sentinel_rt_ms",
        "Response time quantiles over the last minute, in milliseconds; \
         sum and count since tracking began.",
        "summary",
    );
    for (resource, rt) in tracked {
        for (quantile, value) in [("0.5", rt.p50), ("0.9", rt.p90), ("0.99", rt.p99)] {
            // No call in the minute: no quantile, as Prometheus clients say.
            let value = match rt.count {
                0 => f64::NAN,
                _ => value as f64,
            };
            sample(
                out,
                "sentinel_rt_ms",
                [("resource", *resource), ("quantile", quantile)],
                value,
            );
        }
        sample(
            out,
            "sentinel_rt_ms_sum",
            [("resource", *resource)],
            rt.total_sum_ms,
        );
        sample(
            out,
            "sentinel_rt_ms_count",
            [("resource", *resource)],
            rt.total_count,
        );
    }
    family(
        out,
        "sentinel_rt_max_ms",
        "Largest response time over the last minute, in milliseconds.",
        "gauge",
        tracked
            .iter()
            .map(|(resource, rt)| ([("resource", *resource)], rt.max)),
    );
}

/// Writes one metric family: its `# HELP` and `# TYPE` lines, then one
/// `name{labels} value` line per sample.
fn family<'a, const N: usize, V: Display>(
    out: &mut String,
    name: &str,
    help: &str,
    kind: &str,
    samples: impl IntoIterator<Item = (Labels<'a, N>, V)>,
) {
    header(out, name, help, kind);
    for (labels, value) in samples {
        sample(out, name, labels, value);
    }
}

/// The `# HELP` and `# TYPE` lines of a family.
fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = write!(out, "# HELP {name} ");
    escape(out, help, false);
    let _ = writeln!(out, "\n# TYPE {name} {kind}");
}

/// One `name{labels} value` line.
fn sample<const N: usize>(
    out: &mut String,
    name: &str,
    labels: Labels<'_, N>,
    value: impl Display,
) {
    out.push_str(name);
    for (i, (label, label_value)) in labels.iter().enumerate() {
        out.push(if i == 0 { '{' } else { ',' });
        let _ = write!(out, "{label}=\"");
        escape(out, label_value, true);
        out.push('"');
    }
    if N > 0 {
        out.push('}');
    }
    let _ = writeln!(out, " {value}");
}

/// Escapes backslash and line feed, and double quote in a label value (a
/// help text keeps its quotes).
fn escape(out: &mut String, value: &str, label: bool) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' if label => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        let mut out = String::new();
        escape(&mut out, "a\\b\"c\nd", true);
        assert_eq!(out, "a\\\\b\\\"c\\nd");
    }

    #[test]
    fn help_text_keeps_quotes() {
        let mut out = String::new();
        escape(&mut out, "a \"b\"\\\n", false);
        assert_eq!(out, "a \"b\"\\\\\\n");
    }

    #[test]
    fn a_family_is_help_type_then_samples() {
        let mut out = String::new();
        family(
            &mut out,
            "x_total",
            "Some x.",
            "counter",
            [
                ([("a", "1"), ("b", "q\"")], 3),
                ([("a", "2"), ("b", "")], 0),
            ],
        );
        family(&mut out, "y", "No labels.", "gauge", [([], 1.5)]);
        assert_eq!(
            out,
            "# HELP x_total Some x.\n# TYPE x_total counter\n\
             x_total{a=\"1\",b=\"q\\\"\"} 3\nx_total{a=\"2\",b=\"\"} 0\n\
             # HELP y No labels.\n# TYPE y gauge\ny 1.5\n"
        );
    }
}
