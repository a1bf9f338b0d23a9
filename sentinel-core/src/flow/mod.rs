//! Flow control: limit a resource's QPS or concurrency ([`FlowRule`]).
//!
//! Rules are loaded as a list ([`load_rules`], or
//! [`Sentinel::flow_rules`](crate::Sentinel::flow_rules) for an instance of
//! one's own), validated as a whole (one bad rule refuses the list and the
//! rules in force stay), compiled off the hot path and swapped in at once.
//! A rule reloaded unchanged keeps its state: warm-up tokens, pacing, its
//! own window.
//!
//! On each entry the flow check walks the resource's rules, rules naming one
//! origin first and `"default"` rules last, as Sentinel orders them. Each
//! rule selects the node whose figures it limits (by `limit_app` and
//! `strategy`); a rule that selects none does not apply. The first rule that
//! refuses blocks the entry with [`BlockKind::Flow`](crate::BlockKind::Flow).
//!
//! ```
//! use sentinel_flow_core::flow::FlowRule;
//! use sentinel_flow_core::{BlockKind, ManualClock, Sentinel};
//!
//! let clock = ManualClock::new(1_700_000_000_000);
//! let sentinel = Sentinel::builder().clock(clock.clone()).build();
//! sentinel.flow_rules().load(vec![FlowRule::new("GET:/orders", 2.0)])?;
//!
//! let first = sentinel.entry("GET:/orders");
//! let second = sentinel.entry("GET:/orders");
//! let third = sentinel.entry("GET:/orders");
//! assert!(first.is_ok() && second.is_ok());
//! assert_eq!(third.unwrap_err().kind(), BlockKind::Flow);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The module is the kind alone, as every rule kind is: `rule.rs` the
//! rule as loaded (its fields, its problems, the names it mentions);
//! `controller.rs`, `quota.rs`, `cluster.rs` and `remaining.rs` what a
//! compiled rule keeps; here its compiled form and the check. It knows
//! nothing of the rule set, which composes every kind and loads, reads and
//! listens to their rules ([`RuleManager`](crate::RuleManager)).

mod cluster;
mod cluster_config;
mod controller;
mod quota;
mod remaining;
mod unattached;

use quota::Acquired;
mod fields;
mod rule;
mod slot;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

pub(crate) use cluster::ClusterHook;
pub use cluster::{
    ClusterEndpoint, ClusterFlow, ClusterStatus, ClusterTokens, ConcurrencyAnswer, TokenAnswer,
};
pub use cluster_config::{ClusterFlowConfig, ClusterThresholdType};
pub use remaining::FlowQuota;
pub use rule::cluster_problems;
pub use rule::{
    ControlBehavior, FlowGrade, FlowRule, FlowStrategy, LIMIT_APP_DEFAULT, LIMIT_APP_OTHER,
    MAX_QUEUEING_TIME_MS, MAX_STAT_INTERVAL_MS, MAX_STAT_SAMPLE_COUNT, MAX_WARM_UP_COLD_FACTOR,
    MAX_WARM_UP_PERIOD_SEC,
};
pub(crate) use slot::{FlowKind, FlowRules};
#[cfg(feature = "prometheus")]
pub(crate) use unattached::by_resource as cluster_rules_by_resource;
pub(crate) use unattached::warn as warn_unattached_cluster_rules;

use crate::Rule;
use crate::entry::spare;
use crate::node::StatisticNode;
use crate::node::nodes::Nodes;
use crate::rule::compiled::{CompiledRule, List};
use crate::rule::{Listener, RuleErrors};
use crate::slot::EntryContext;
use crate::slot::Holds;
use crate::slot::Outcome;
use crate::slot::rule_slot::Verdict;
use crate::stat::{LeapArray, MetricBucket, MetricEvent, WindowShape};
use cluster::Concurrency;
use controller::{Controller, Decision, Usage};

/// Loads `rules` into the [`global`](crate::global) instance's flow rules,
/// replacing them all. See [`RuleManager::load`](crate::RuleManager::load).
pub fn load_rules(rules: Vec<FlowRule>) -> Result<(), RuleErrors> {
    crate::global().flow_rules().load(rules)
}

/// The flow rules in force on the [`global`](crate::global) instance.
pub fn rules() -> Vec<FlowRule> {
    crate::global().flow_rules().rules()
}

/// A listener of flow-rule changes: called with the rules now in force.
pub type FlowListener = Listener<FlowRule>;

/// Whose calls a compiled rule counts.
#[derive(Debug)]
enum Limit {
    Default,
    Other,
    Origin(Box<str>),
}

/// Whose statistics a compiled rule reads.
#[derive(Debug)]
enum Strategy {
    Direct,
    /// The related resource, and its node id + 1 once found (0 before).
    Relate(Box<str>, AtomicU32),
    Chain(Box<str>),
}

/// A rule ready for the hot path, with its state.
#[derive(Debug)]
pub(crate) struct CompiledFlow {
    rule: Arc<FlowRule>,
    limit: Limit,
    strategy: Strategy,
    concurrency: bool,
    controller: Controller,
    /// The rule's own window, when its interval is not the node's second.
    window: Option<LeapArray<MetricBucket>>,
    /// Permits leased to threads, for a reject QPS rule on the resource's
    /// own node (see `quota`).
    quota: Option<quota::Quota>,
    /// The rule's cluster flow, when in cluster mode.
    cluster: Option<cluster::ClusterFlow>,
}

impl CompiledFlow {
    /// The rule as loaded.
    pub(crate) fn rule(&self) -> &FlowRule {
        &self.rule
    }

    /// Whether the rule keeps a window of its own.
    pub(crate) fn has_window(&self) -> bool {
        self.window.is_some()
    }

    /// Whether the rule asks a cluster service for its permits.
    pub(crate) fn in_cluster_mode(&self) -> bool {
        self.cluster.is_some()
    }

    /// The rule's cluster flow, when in cluster mode.
    pub(crate) fn cluster_flow(&self) -> Option<&cluster::ClusterFlow> {
        self.cluster.as_ref()
    }
}

impl CompiledRule for CompiledFlow {
    type Rule = FlowRule;
    type PerResource = FlowRules;

    fn compile(rule: &FlowRule) -> Self {
        let limit = match rule.limit_app.as_str() {
            LIMIT_APP_DEFAULT => Limit::Default,
            LIMIT_APP_OTHER => Limit::Other,
            origin => Limit::Origin(origin.into()),
        };
        let reference = rule.ref_resource.as_deref().unwrap_or("").trim();
        let strategy = match rule.strategy {
            FlowStrategy::Direct => Strategy::Direct,
            FlowStrategy::Relate => Strategy::Relate(reference.into(), AtomicU32::new(0)),
            FlowStrategy::Chain => Strategy::Chain(reference.into()),
        };
        let window = own_window(rule).map(LeapArray::with_shape);
        let cluster = cluster::ClusterFlow::of_rule(rule);
        let quota = (cluster.is_none()
            && rule.grade == FlowGrade::Qps
            && rule.control_behavior == ControlBehavior::Reject
            && matches!((&limit, &strategy), (Limit::Default, Strategy::Direct))
            && window.is_none()
            && rule.count <= quota::MAX_COUNT)
            .then(|| quota::Quota::new(rule.count));
        CompiledFlow {
            quota,
            cluster,
            controller: Controller::new(rule),
            concurrency: rule.grade == FlowGrade::Concurrency,
            limit,
            strategy,
            window,
            rule: Arc::new(rule.clone()),
        }
    }

    fn source(&self) -> &FlowRule {
        &self.rule
    }

    fn resource(rule: &FlowRule) -> &str {
        &rule.resource
    }

    /// Rules naming one origin first, "default" last, as Sentinel orders them.
    fn rank(&self) -> u8 {
        match self.limit {
            Limit::Origin(_) => 0,
            Limit::Other => 1,
            Limit::Default => 2,
        }
    }

    fn per_resource(list: List<Self>) -> FlowRules {
        FlowRules::new(list)
    }
}

/// The shape of `rule`'s own window, when its interval is not the node's
/// second (read by its check and by the quota its headers state).
fn own_window(rule: &FlowRule) -> Option<WindowShape> {
    (rule.stat_interval_ms != 1_000)
        .then(|| WindowShape::new(rule.stat_interval_ms, rule.stat_sample_count).ok())
        .flatten()
}

/// Bits of [`Outcome::reserved`](crate::slot::Outcome::reserved).
pub(crate) struct Reserved;

impl Reserved {
    pub(crate) const RESOURCE: u8 = 1;
    pub(crate) const ORIGIN: u8 = 2;
    pub(crate) const CONTEXT: u8 = 4;
}

/// The figures a QPS rule reads: the node's second window, or the rule's own.
struct Qps<'a> {
    node: &'a StatisticNode,
    window: Option<&'a LeapArray<MetricBucket>>,
    now: u64,
}

impl Usage for Qps<'_> {
    #[inline]
    fn current(&self) -> f64 {
        match self.window {
            None => self.node.pass_qps(self.now),
            Some(window) => {
                window.sum(self.now, MetricEvent::Pass) as f64 * 1_000.0
                    / window.interval_ms() as f64
            }
        }
    }

    fn previous_pass_qps(&self) -> f64 {
        self.node.previous_pass_qps(self.now)
    }
}

/// Runs the flow rules of one resource for `ctx`.
///
/// The verdict's `pass_ms` is raised to the start of a reject rule's bucket
/// when the rule began it after the entry read the clock: the entry is
/// counted there. A cluster concurrency rule's token goes into its
/// `holds`, given back at the exit (or by the chain when the entry is
/// refused).
pub(crate) fn check(
    rules: &[Arc<CompiledFlow>],
    named_origin: impl Fn(&str) -> bool,
    ctx: &EntryContext<'_>,
    verdict: &mut Verdict,
) -> Result<Outcome, Arc<dyn Rule>> {
    let mut outcome = Outcome::default();
    for (i, compiled) in rules.iter().enumerate() {
        let Some((node, bit)) = select(compiled, &named_origin, ctx) else {
            continue;
        };
        let refused = match compiled
            .quota
            .as_ref()
            .map(|quota| quota.acquire(node, u64::from(ctx.batch), ctx.now_ms))
        {
            Some(Acquired::Passed) => {
                outcome.lease();
                false
            }
            Some(Acquired::PassedAt(start)) => {
                outcome.lease();
                verdict.pass_ms = verdict.pass_ms.max(start);
                false
            }
            Some(Acquired::Refused) => true,
            // Out of line: what these read and compute is not hoisted into
            // the loop of rules that leases serve.
            Some(Acquired::Unserved) | None => {
                match unleased(compiled, node, bit, ctx, &mut outcome, &mut verdict.holds) {
                    Some(refused) => refused,
                    None => continue,
                }
            }
        };
        if refused {
            release(ctx, outcome.reserved());
            if outcome.leased() {
                give_back(&rules[..i], ctx.batch, ctx.now_ms.max(verdict.pass_ms));
            }
            return Err(spare::share(&compiled.rule));
        }
    }
    Ok(outcome)
}

/// The check of a rule that no quota lease served: a cluster rule's
/// token, a concurrency reservation, or the controller on the node's (or
/// the rule's own) window. `Some(refused)`, or `None` when a cluster token
/// (or no answer, for a rule that does not fall back) lets the entry pass
/// without a local check.
#[inline(never)]
fn unleased(
    compiled: &Arc<CompiledFlow>,
    node: &StatisticNode,
    bit: u8,
    ctx: &EntryContext<'_>,
    outcome: &mut Outcome,
    holds: &mut Holds,
) -> Option<bool> {
    if compiled.quota.is_none()
        && let Some(flow) = &compiled.cluster
    {
        if compiled.concurrency {
            return cluster_concurrency(compiled, flow, node, bit, ctx, outcome, holds);
        }
        match ctx.parts.cluster.acquire(flow, ctx.batch, ctx.now_ms) {
            TokenAnswer::Granted => return None,
            TokenAnswer::Refused => return Some(true),
            // No answer: the rule's count locally, or a pass.
            _ if flow.falls_back_to_local() => {}
            _ => return None,
        }
    }
    if compiled.concurrency {
        return Some(!reserve(compiled, node, bit, ctx.batch, outcome));
    }
    let usage = Qps {
        node,
        window: compiled.window.as_ref(),
        now: ctx.now_ms,
    };
    Some(
        match compiled
            .controller
            .decide(compiled.rule.count, &usage, ctx.batch, ctx.now_ms, || {
                ctx.parts.clock.now_nanos()
            }) {
            Decision::Pass => false,
            Decision::Wait(ns) => {
                outcome.wait_at_least(ns);
                false
            }
            Decision::Block => true,
        },
    )
}

/// The check of a cluster concurrency rule: a token from the cluster,
/// held until the exit; with no answer, the rule's fallback (its count on
/// this instance's nodes, or a pass). `Some(refused)`, or `None` when the
/// entry passes without a local check.
#[cold]
fn cluster_concurrency(
    compiled: &Arc<CompiledFlow>,
    flow: &cluster::ClusterFlow,
    node: &StatisticNode,
    bit: u8,
    ctx: &EntryContext<'_>,
    outcome: &mut Outcome,
    holds: &mut Holds,
) -> Option<bool> {
    let fallback_token = match ctx
        .parts
        .cluster
        .acquire_concurrent(flow, ctx.batch, ctx.now_ms)
    {
        Concurrency::Granted(token) => {
            slot::hold_token(holds, compiled, token);
            return None;
        }
        Concurrency::Refused => return Some(true),
        Concurrency::Unavailable(token) => token,
    };
    if let Some(token) = fallback_token {
        slot::hold_token(holds, compiled, token);
    }
    if !flow.falls_back_to_local() {
        return None;
    }
    Some(!reserve(compiled, node, bit, ctx.batch, outcome))
}

/// Gives back the permits an entry (of `batch`, to be counted at
/// `pass_ms`) spent from the quotas of `rules`, every one of which let it
/// pass, when a later check refuses it or its wait in a queue is cancelled.
#[cold]
pub(crate) fn give_back(rules: &[Arc<CompiledFlow>], batch: u32, pass_ms: u64) {
    for quota in rules.iter().filter_map(|c| c.quota.as_ref()) {
        quota.give_back(u64::from(batch), pass_ms);
    }
}

/// Counts an admitted entry in the windows of the rules (of its resource)
/// that keep their own and apply to it.
pub(crate) fn count_windows(
    rules: &[Arc<CompiledFlow>],
    named_origin: impl Fn(&str) -> bool,
    ctx: &EntryContext<'_>,
) {
    for compiled in rules {
        if let Some(window) = &compiled.window
            && select(compiled, &named_origin, ctx).is_some()
        {
            window.add(ctx.now_ms, MetricEvent::Pass, u64::from(ctx.batch));
        }
    }
}

/// The node `compiled` limits for this entry, with its reservation bit (0:
/// none, for a related resource), or `None` if the rule does not apply.
#[inline]
fn select<'a>(
    compiled: &CompiledFlow,
    named_origin: &impl Fn(&str) -> bool,
    ctx: &EntryContext<'a>,
) -> Option<(&'a StatisticNode, u8)> {
    let origin = ctx.origin_name;
    let own = match &compiled.limit {
        Limit::Default => (ctx.resource.stats(), Reserved::RESOURCE),
        Limit::Origin(name) if **name == *origin => (ctx.origin?.stats(), Reserved::ORIGIN),
        Limit::Other if !origin.is_empty() && !named_origin(origin) => {
            (ctx.origin?.stats(), Reserved::ORIGIN)
        }
        _ => return None,
    };
    match &compiled.strategy {
        Strategy::Direct => Some(own),
        Strategy::Relate(name, id) => related(&ctx.parts.nodes, name, id),
        Strategy::Chain(context) => chained(context, ctx),
    }
}

/// The node of a related resource (found by name once, then by id), with
/// no reservation bit. Out of line, as the other strategies: nothing of
/// theirs is computed ahead in the loop of a resource's rules.
#[inline(never)]
fn related<'a>(nodes: &'a Nodes, name: &str, id: &AtomicU32) -> Option<(&'a StatisticNode, u8)> {
    let node = match id.load(Ordering::Relaxed) {
        0 => {
            let found = nodes.resource_id(name)?;
            id.store(found + 1, Ordering::Relaxed);
            nodes.resource_by_id(found)?
        }
        n => nodes.resource_by_id(n - 1)?,
    };
    Some((node.stats(), 0))
}

/// The context's node, if the entry is in the rule's context.
#[inline(never)]
fn chained<'a>(context: &str, ctx: &EntryContext<'a>) -> Option<(&'a StatisticNode, u8)> {
    if *context == *ctx.context_name() {
        Some((ctx.context_stats?, Reserved::CONTEXT))
    } else {
        None
    }
}

/// Takes one call of the node's exact concurrency for this entry (once per
/// node), and checks the rule against it: `false` if over the count.
fn reserve(
    compiled: &CompiledFlow,
    node: &StatisticNode,
    bit: u8,
    batch: u32,
    outcome: &mut Outcome,
) -> bool {
    let count = compiled.rule.count;
    let acquire = f64::from(batch);
    if bit == 0 {
        // A related resource: read, not held.
        return node.cur_concurrency() as f64 + acquire <= count;
    }
    if outcome.reserved() & bit != 0 {
        // Already held by an earlier rule of this entry: the others inside.
        let others = node.exact_concurrency().saturating_sub(1);
        return others as f64 + acquire <= count;
    }
    let others = node.reserve_concurrency();
    if others as f64 + acquire <= count {
        outcome.reserve(bit);
        true
    } else {
        node.release_concurrency();
        false
    }
}

/// Gives back the exact concurrency an entry holds.
pub(crate) fn release(ctx: &EntryContext<'_>, reserved: u8) {
    release_nodes(
        ctx.resource.stats(),
        ctx.origin.map(|o| o.stats()),
        ctx.context_stats,
        reserved,
    );
}

/// As [`release`], from the nodes themselves.
#[inline]
pub(crate) fn release_nodes(
    resource: &StatisticNode,
    origin: Option<&StatisticNode>,
    context: Option<&StatisticNode>,
    reserved: u8,
) {
    if reserved == 0 {
        return;
    }
    if reserved & Reserved::RESOURCE != 0 {
        resource.release_concurrency();
    }
    if reserved & Reserved::ORIGIN != 0
        && let Some(node) = origin
    {
        node.release_concurrency();
    }
    if reserved & Reserved::CONTEXT != 0
        && let Some(node) = context
    {
        node.release_concurrency();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A load allocates a compiled rule per flow rule: one that asks for
    /// more than the allocator's usual alignment goes through
    /// `posix_memalign`, several times a plain allocation, and leaves
    /// fragments for the next load to sweep up.
    #[test]
    fn compiled_flow_rules_need_no_over_aligned_allocation() {
        assert!(std::mem::align_of::<CompiledFlow>() <= 16);
        let quota = std::mem::align_of::<quota::Quota>();
        assert!(quota <= 16, "{quota}");
    }
}
