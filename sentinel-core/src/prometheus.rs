//! Prometheus text exposition of an instance's statistics (feature
//! `prometheus`), produced at scrape time from the node statistics:
//! nothing is added to entries.
//!
//! Per resource (label `resource`):
//!
//! - counters `sentinel_pass_total`, `sentinel_block_total`,
//!   `sentinel_success_total`, `sentinel_exception_total`: requests since
//!   the [`Exporter`] was made (back to a minute before), summed from the
//!   completed seconds of the minute window, so they lag by up to a second.
//!   Nodes keep no per-kind block counts, so `sentinel_block_total` has no
//!   `kind` label.
//! - gauges `sentinel_concurrency` (calls inside now) and
//!   `sentinel_avg_rt_ms` (over the second window).
//! - gauge `sentinel_breaker_state` per degrade rule (label `rule`: its id,
//!   or its position among the resource's degrade rules when it has none):
//!   0 closed, 1 open, 2 half-open.
//! - for resources whose percentiles are tracked
//!   ([`Sentinel::track_percentiles`]) and only for them: summary
//!   `sentinel_rt_ms`, response-time quantiles 0.5, 0.9 and 0.99 over the
//!   last minute (`NaN` when no call completed in it), with
//!   `sentinel_rt_ms_sum` and `sentinel_rt_ms_count` counting every call
//!   recorded since tracking began (counters, as a summary's are); and
//!   gauge `sentinel_rt_max_ms`, the largest response time over the last
//!   minute. The block is left out when no resource is tracked.
//!
//! Counters need memory between scrapes (the minute window alone goes down
//! as seconds leave it), which the [`Exporter`] keeps; scrape it at least
//! once a minute or seconds are missed (counters stay monotonic).
//!
//! ```
//! use sentinel_core::prometheus::Exporter;
//! use sentinel_core::{ManualClock, Sentinel};
//!
//! let clock = ManualClock::new(1_700_000_000_000);
//! let sentinel = Sentinel::builder().clock(clock.clone()).build();
//! let exporter = Exporter::new();
//! drop(sentinel.entry("GET:/orders")?);
//! clock.advance_ms(1_000);
//!
//! let text = exporter.render(&sentinel);
//! assert!(text.contains("sentinel_pass_total{resource=\"GET:/orders\"} 1\n"));
//! # Ok::<(), sentinel_core::BlockError>(())
//! ```

use std::collections::HashMap;
use std::fmt::Write as _;

use parking_lot::Mutex;

use crate::Sentinel;
use crate::degrade::BreakerState;
use crate::snapshot::ResourceSnapshot;
use crate::stat::RtPercentiles;

/// Renders an instance's statistics for Prometheus, keeping the running
/// totals behind the counters. Keep one per instance and scrape endpoint.
#[derive(Debug, Default)]
pub struct Exporter {
    state: Mutex<Totals>,
}

#[derive(Debug, Default)]
struct Totals {
    /// Every second starting before this is counted.
    next_ms: u64,
    /// pass, block, success, exception, by resource id.
    by_resource: Vec<[u64; 4]>,
}

const COUNTERS: [(&str, &str); 4] = [
    ("sentinel_pass_total", "Requests let through."),
    ("sentinel_block_total", "Requests refused, by any rule."),
    ("sentinel_success_total", "Requests completed."),
    (
        "sentinel_exception_total",
        "Completed requests that recorded an error.",
    ),
];

impl Exporter {
    /// An exporter whose counters start from what the minute window holds at
    /// the first scrape.
    pub fn new() -> Self {
        Exporter::default()
    }

    /// The text exposition of `sentinel` now.
    pub fn render(&self, sentinel: &Sentinel) -> String {
        let now = sentinel.now_ms();
        let resources = sentinel.resources();
        let totals = {
            let mut state = self.state.lock();
            let from = state.next_ms;
            let mut latest = None;
            for node in sentinel.resource_nodes() {
                let id = node.id() as usize;
                if state.by_resource.len() <= id {
                    state.by_resource.resize(id + 1, [0; 4]);
                }
                let total = &mut state.by_resource[id];
                node.stats().for_each_metric_since(from, now, |m| {
                    for (t, n) in total
                        .iter_mut()
                        .zip([m.pass, m.block, m.success, m.exception])
                    {
                        *t += n;
                    }
                    latest = latest.max(Some(m.timestamp_ms));
                });
            }
            if let Some(latest) = latest {
                state.next_ms = latest + 1;
            }
            state.by_resource.clone()
        };

        let mut out = String::with_capacity(256 + resources.len() * 400);
        for (i, (name, help)) in COUNTERS.iter().enumerate() {
            header(&mut out, name, help, "counter");
            for (node, total) in sentinel.resource_nodes().zip(&totals) {
                sample(&mut out, name, node.name(), None, total[i]);
            }
        }
        header(
            &mut out,
            "sentinel_concurrency",
            "Calls inside the resource now.",
            "gauge",
        );
        for r in &resources {
            sample(
                &mut out,
                "sentinel_concurrency",
                &r.name,
                None,
                r.stats.concurrency,
            );
        }
        header(
            &mut out,
            "sentinel_avg_rt_ms",
            "Average response time over the second window, in milliseconds.",
            "gauge",
        );
        for r in &resources {
            sample(
                &mut out,
                "sentinel_avg_rt_ms",
                &r.name,
                None,
                r.stats.avg_rt,
            );
        }
        header(
            &mut out,
            "sentinel_breaker_state",
            "Circuit breaker state: 0 closed, 1 open, 2 half-open.",
            "gauge",
        );
        let mut positions: HashMap<String, usize> = HashMap::new();
        for (rule, snapshot) in sentinel.degrade_rules().breakers() {
            let position = positions.entry(rule.resource.clone()).or_default();
            let label = rule
                .id
                .map_or_else(|| position.to_string(), |id| id.to_string());
            *position += 1;
            let state = match snapshot.state {
                BreakerState::Closed => 0,
                BreakerState::Open => 1,
                BreakerState::HalfOpen => 2,
            };
            sample(
                &mut out,
                "sentinel_breaker_state",
                &rule.resource,
                Some(("rule", &label)),
                state,
            );
        }
        percentiles(&mut out, &resources);
        out
    }
}

/// The summary and the maximum of the resources whose percentiles are
/// tracked; nothing when none is.
fn percentiles(out: &mut String, resources: &[ResourceSnapshot]) {
    let tracked: Vec<(&str, RtPercentiles)> = resources
        .iter()
        .filter_map(|r| Some((&*r.name, r.percentiles?)))
        .collect();
    if tracked.is_empty() {
        return;
    }
    header(
        out,
        "sentinel_rt_ms",
        "Response time quantiles over the last minute, in milliseconds; \
         sum and count since tracking began.",
        "summary",
    );
    for (name, rt) in &tracked {
        for (quantile, value) in [("0.5", rt.p50), ("0.9", rt.p90), ("0.99", rt.p99)] {
            // No call in the minute: no quantile, as Prometheus clients say.
            let value = match rt.count {
                0 => f64::NAN,
                _ => value as f64,
            };
            sample(
                out,
                "sentinel_rt_ms",
                name,
                Some(("quantile", quantile)),
                value,
            );
        }
        sample(out, "sentinel_rt_ms_sum", name, None, rt.total_sum_ms);
        sample(out, "sentinel_rt_ms_count", name, None, rt.total_count);
    }
    header(
        out,
        "sentinel_rt_max_ms",
        "Largest response time over the last minute, in milliseconds.",
        "gauge",
    );
    for (name, rt) in &tracked {
        sample(out, "sentinel_rt_max_ms", name, None, rt.max);
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// One sample of `name` for `resource`, with one more label if `label`.
fn sample(
    out: &mut String,
    name: &str,
    resource: &str,
    label: Option<(&str, &str)>,
    value: impl std::fmt::Display,
) {
    let _ = write!(out, "{name}{{resource=\"");
    escape(out, resource);
    if let Some((label, value)) = label {
        let _ = write!(out, "\",{label}=\"");
        escape(out, value);
    }
    let _ = writeln!(out, "\"}} {value}");
}

/// A label value: backslash, double quote and line feed escaped.
fn escape(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
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
        escape(&mut out, "a\\b\"c\nd");
        assert_eq!(out, "a\\\\b\\\"c\\nd");
    }
}
