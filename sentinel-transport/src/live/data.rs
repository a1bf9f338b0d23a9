//! The answer of `GET /live/data`: the resources of the last completed
//! second, the selected resource's minute, breakers and rules.
//!
//! Per-second figures come from completed buckets of each node's minute
//! window, never from the sliding second window: a completed second is
//! exact whatever the threads (see the root README, "Which readings are
//! exact"), while the sliding window read mid-bucket is not a per-second
//! rate.

use std::collections::HashMap;

use sentinel_flow_core::Sentinel;
use sentinel_flow_core::adaptive::{AdaptiveRule, AdaptiveSnapshot};
use sentinel_flow_core::degrade::{BreakerSnapshot, BreakerState, DegradeRule};
use sentinel_flow_core::node::{MetricSnapshot, ResourceNode};
use sentinel_flow_rules::source::SourceState;
use serde::Serialize;

use super::query::DataQuery;
use super::rules::{BreakerView, RuleCountsView, RulesView, rule_counts};

/// The page reads whole seconds; the minute window's buckets are one second
/// by default (a minute window of another shape is summed by second start).
pub(crate) const SECOND_MS: u64 = 1_000;
/// Points of the chart: the minute window's seconds.
pub(crate) const HISTORY_SECONDS: usize = 60;
/// Adaptive rules shown per resource (in check order); the rest are
/// counted in its rule counts.
pub(crate) const ADAPTIVE_SHOWN: usize = 8;

/// The whole answer.
#[derive(Debug, Serialize)]
pub(crate) struct LiveData {
    /// The instance clock when the answer was computed.
    now_ms: u64,
    /// The second every per-second figure is about: the last completed one.
    second: SecondSpan,
    /// Sums over every resource (not only those listed).
    totals: Totals,
    /// The listed resources, busiest first.
    resources: Vec<ResourceRow>,
    /// The selected resource's last minute, when one is selected and exists.
    history: Option<History>,
    /// Every circuit breaker.
    breakers: Vec<BreakerView>,
    /// The rules in force, every kind.
    rules: RulesView,
    /// The rule sources the server was given, in that order.
    sources: Vec<SourceView>,
}

/// A rule source's state (a rule file, a configuration store).
#[derive(Debug, Serialize)]
struct SourceView {
    /// The file or the store, as the source names it.
    name: String,
    connected: bool,
    /// The revision of the rules in force from it.
    revision: Option<String>,
    /// When they were put in force (instance clock, Unix ms).
    applied_at_ms: Option<u64>,
    /// The last error, cleared by the next good apply.
    last_error: Option<String>,
    /// The rules in force came from the local last-known-good copy.
    from_last_known_good: bool,
    applies: u64,
    refusals: u64,
    disconnects: u64,
}

impl From<SourceState> for SourceView {
    fn from(state: SourceState) -> Self {
        SourceView {
            name: state.name,
            connected: state.connected,
            revision: state.revision,
            applied_at_ms: state.applied_at_ms,
            last_error: state.last_error,
            from_last_known_good: state.from_last_known_good,
            applies: state.applies,
            refusals: state.refusals,
            disconnects: state.disconnects,
        }
    }
}

#[derive(Debug, Serialize)]
struct SecondSpan {
    start_ms: u64,
    end_ms: u64,
}

#[derive(Debug, Default, Serialize)]
struct Totals {
    /// Resources the instance knows.
    resources: usize,
    /// Those whose name contains the filter `q` (all without one).
    matched: usize,
    /// Those listed (`matched`, capped by `limit`).
    shown: usize,
    /// The cap the list was cut at.
    limit: usize,
    pass: u64,
    block: u64,
    success: u64,
    exception: u64,
    concurrency: u64,
}

/// One resource in its last completed second.
#[derive(Debug, Serialize)]
struct ResourceRow {
    name: String,
    pass: u64,
    block: u64,
    success: u64,
    exception: u64,
    /// Average response time of the second's completions, ms; `null` when
    /// none completed.
    avg_rt: Option<f64>,
    /// Smallest response time of the second, ms.
    min_rt: Option<u64>,
    /// Calls inside the resource now.
    concurrency: u64,
    /// Pass and block over the last minute's completed seconds.
    minute_pass: u64,
    minute_block: u64,
    /// Rules guarding it, by kind.
    rules: RuleCountsView,
    /// The worst state of its breakers (`open` > `half_open` > `closed`),
    /// `null` without one.
    breaker: Option<&'static str>,
    /// Its adaptive rules now, in check order (the first
    /// [`ADAPTIVE_SHOWN`]); empty without one.
    adaptive: Vec<AdaptiveView>,
}

/// One adaptive rule's state now: what the chart draws as its limit line.
#[derive(Clone, Debug, Serialize)]
struct AdaptiveView {
    /// Whose calls it counts (`default`, `other` or an origin).
    limit_app: String,
    /// `gradient2`, `vegas` or `aimd`.
    algorithm: &'static str,
    /// The limit in force.
    limit: u32,
    /// Calls admitted under it and not exited yet.
    in_flight: u32,
    /// The RTT the algorithm compares windows against, ms (0 for AIMD and
    /// before the first window).
    reference_rtt_ms: f64,
    /// The last window's average RTT, ms (0 before the first).
    last_rtt_ms: f64,
}

impl AdaptiveView {
    fn of(rule: &AdaptiveRule, state: &AdaptiveSnapshot) -> AdaptiveView {
        AdaptiveView {
            limit_app: rule.limit_app.clone(),
            algorithm: rule.algorithm.name(),
            limit: state.limit,
            in_flight: state.in_flight,
            reference_rtt_ms: state.reference_rtt_ms,
            last_rtt_ms: state.last_rtt_ms,
        }
    }
}

/// The last minute of one resource, one point per second, oldest first;
/// a second without traffic is a zero (and a `null` RT).
#[derive(Debug, Serialize)]
struct History {
    resource: String,
    start_ms: u64,
    step_ms: u64,
    pass: Vec<u64>,
    block: Vec<u64>,
    success: Vec<u64>,
    exception: Vec<u64>,
    avg_rt: Vec<Option<f64>>,
    /// Its adaptive rules at `now_ms`, as in its row: the page draws their
    /// limits and calls in flight from one answer to the next.
    adaptive: Vec<AdaptiveView>,
}

/// What one pass over the registry keeps of a resource: enough to sort,
/// nothing allocated.
struct Candidate<'a> {
    node: &'a ResourceNode,
    last: Second,
    concurrency: u64,
}

/// The sums of the minute buckets that start within one second.
#[derive(Clone, Copy, Debug, Default)]
struct Second {
    pass: u64,
    block: u64,
    success: u64,
    exception: u64,
    rt_sum: u64,
    min_rt: Option<u64>,
}

impl Second {
    fn add(&mut self, m: &MetricSnapshot) {
        self.pass += m.pass;
        self.block += m.block;
        self.success += m.success;
        self.exception += m.exception;
        self.rt_sum += m.rt_sum;
        self.min_rt = match (self.min_rt, m.min_rt) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    fn avg_rt(&self) -> Option<f64> {
        (self.success > 0).then(|| self.rt_sum as f64 / self.success as f64)
    }
}

impl LiveData {
    /// Computes the answer at the instance's now. Reads every resource's
    /// last completed second and concurrency (no allocation per resource),
    /// then the minute and a row for the listed ones only.
    pub(crate) fn compute(
        sentinel: &Sentinel,
        query: &DataQuery,
        sources: Vec<SourceState>,
    ) -> LiveData {
        let now = sentinel.now_ms();
        let second_end = now - now % SECOND_MS;
        let second_start = second_end.saturating_sub(SECOND_MS);
        let minute_start = second_end.saturating_sub(SECOND_MS * HISTORY_SECONDS as u64);

        let mut totals = Totals {
            limit: query.limit,
            ..Totals::default()
        };
        let mut candidates = Vec::new();
        for node in sentinel.resource_nodes() {
            totals.resources += 1;
            let mut candidate = Candidate {
                node,
                last: Second::default(),
                concurrency: node.stats().cur_concurrency(),
            };
            // Only the last second's bucket(s): the minute is read for the
            // listed resources only.
            node.stats()
                .for_each_metric_since(second_start, second_end, |m| candidate.last.add(&m));
            totals.pass += candidate.last.pass;
            totals.block += candidate.last.block;
            totals.success += candidate.last.success;
            totals.exception += candidate.last.exception;
            totals.concurrency += candidate.concurrency;
            if query.matches(node.name()) {
                candidates.push(candidate);
            }
        }
        totals.matched = candidates.len();
        // Busiest first: the last second, then calls in flight; the name
        // breaks ties so the order does not flicker.
        let activity = |c: &Candidate<'_>| (c.last.pass + c.last.block, c.concurrency);
        let by_activity = |a: &Candidate<'_>, b: &Candidate<'_>| {
            activity(b)
                .cmp(&activity(a))
                .then_with(|| a.node.name().cmp(b.node.name()))
        };
        if candidates.len() > query.limit {
            candidates.select_nth_unstable_by(query.limit, by_activity);
            candidates.truncate(query.limit);
        }
        candidates.sort_unstable_by(by_activity);
        totals.shown = candidates.len();

        let book = sentinel.rule_book();
        let breakers = sentinel.degrade_rules().breakers();
        let counts = rule_counts(&book);
        let worst = worst_breaker_states(&breakers);
        let adaptive_states = sentinel.adaptive_rules().limits();
        let adaptive = adaptive_by_resource(&adaptive_states);
        let adaptive_of = |name: &str| adaptive.get(name).cloned().unwrap_or_default();
        let resources = candidates
            .iter()
            .map(|c| {
                let name = c.node.name();
                let (mut minute_pass, mut minute_block) = (0, 0);
                c.node
                    .stats()
                    .for_each_metric_since(minute_start, second_end, |m| {
                        minute_pass += m.pass;
                        minute_block += m.block;
                    });
                ResourceRow {
                    name: name.to_owned(),
                    pass: c.last.pass,
                    block: c.last.block,
                    success: c.last.success,
                    exception: c.last.exception,
                    avg_rt: c.last.avg_rt(),
                    min_rt: c.last.min_rt,
                    concurrency: c.concurrency,
                    minute_pass,
                    minute_block,
                    rules: counts.get(name).copied().unwrap_or_default(),
                    breaker: worst.get(name).copied(),
                    adaptive: adaptive_of(name),
                }
            })
            .collect();

        let history = query
            .resource
            .as_deref()
            .and_then(|name| sentinel.resource_node(name))
            .map(|node| History::of(node, minute_start, second_end, adaptive_of(node.name())));

        LiveData {
            now_ms: now,
            second: SecondSpan {
                start_ms: second_start,
                end_ms: second_end,
            },
            totals,
            resources,
            history,
            breakers: breakers
                .iter()
                .map(|(rule, s)| BreakerView::of(rule, s, now))
                .collect(),
            rules: RulesView::of(&book, query.rules_limit),
            sources: sources.into_iter().map(SourceView::from).collect(),
        }
    }
}

impl History {
    fn of(node: &ResourceNode, start_ms: u64, end_ms: u64, adaptive: Vec<AdaptiveView>) -> History {
        let mut seconds = [Second::default(); HISTORY_SECONDS];
        node.stats().for_each_metric_since(start_ms, end_ms, |m| {
            let index = (m.timestamp_ms.saturating_sub(start_ms) / SECOND_MS) as usize;
            if let Some(second) = seconds.get_mut(index) {
                second.add(&m);
            }
        });
        History {
            resource: node.name().to_owned(),
            start_ms,
            step_ms: SECOND_MS,
            pass: seconds.iter().map(|s| s.pass).collect(),
            block: seconds.iter().map(|s| s.block).collect(),
            success: seconds.iter().map(|s| s.success).collect(),
            exception: seconds.iter().map(|s| s.exception).collect(),
            avg_rt: seconds.iter().map(Second::avg_rt).collect(),
            adaptive,
        }
    }
}

/// Each resource's adaptive rules, the first [`ADAPTIVE_SHOWN`] in check
/// order.
fn adaptive_by_resource(
    states: &[(AdaptiveRule, AdaptiveSnapshot)],
) -> HashMap<&str, Vec<AdaptiveView>> {
    let mut by_resource: HashMap<&str, Vec<AdaptiveView>> = HashMap::new();
    for (rule, state) in states {
        let views = by_resource.entry(rule.resource.as_str()).or_default();
        if views.len() < ADAPTIVE_SHOWN {
            views.push(AdaptiveView::of(rule, state));
        }
    }
    by_resource
}

/// Each resource's worst breaker state: what its row shows.
fn worst_breaker_states(
    breakers: &[(DegradeRule, BreakerSnapshot)],
) -> HashMap<&str, &'static str> {
    let rank = |state: BreakerState| match state {
        BreakerState::Open => 2,
        BreakerState::HalfOpen => 1,
        _ => 0,
    };
    let mut worst: HashMap<&str, BreakerState> = HashMap::new();
    for (rule, snapshot) in breakers {
        let slot = worst
            .entry(rule.resource.as_str())
            .or_insert(snapshot.state);
        if rank(snapshot.state) > rank(*slot) {
            *slot = snapshot.state;
        }
    }
    worst
        .into_iter()
        .map(|(name, state)| (name, state.as_str()))
        .collect()
}
