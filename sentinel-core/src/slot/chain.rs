//! The chain, top to bottom: what one entry goes through, in Sentinel's
//! order, and what its exit goes through.
//!
//! ```text
//! enter
//!   switch off, or the resource past its cap      -> passes, uncounted
//!   node selector    the entry's context and node in the invocation tree
//!   cluster builder  the origin's node
//!   statistic        user slots placed before it (a refusal is not counted), then:
//!     RuleChain      authority -> system -> hot params -> flow -> degrade
//!                    -> adaptive, each after the user slots of smaller
//!                    order, each kind looked at only if the resource has
//!                    rules of it (the kinds present, read once);
//!                    the first refusal wins, the slots before it give back
//!   refused: a block counted on every node, held things given back -> Err(BlockError)
//!   passed:  a rate limiter's wait, then a pass counted -> Ok(Entry)
//! exit (the Entry dropped)
//!   statistic        response time, success, error (or the thread unwinding)
//!   RuleChain        each kind whose check asked: flow releases its
//!                    reservations, degrade feeds its breakers (a call of
//!                    its own per kind)
//!   holds            hot-parameter counts and probes ended, adaptive
//!                    places freed with their samples
//!   user slots       in order
//! ```
//!
//! Panics give back what was taken. A user slot that panics in its check
//! unwinds through the statistic slot, whose guard gives back what the
//! checks before it took (concurrency reservations, QPS permits,
//! hot-parameter counts, half-open probes, whose breakers open again);
//! nothing is counted. Guarded code that panics drops its `Entry` as it
//! unwinds: the exit runs in full, counts an error, and a half-open probe
//! it held fails. The exit gives everything back before the user slots'
//! exit hooks run, so a panicking hook leaks nothing either.
//!
//! The chain runs only when something can refuse: a user slot, or a rule
//! on the entry's resource (or a system limit, for an inbound entry).
//! Otherwise an entry pays for the node lookups and the statistics alone.
//! A kind the resource has no rules of costs its entries a bit test at
//! the entry and nothing at the exit.

use super::cluster_builder::ClusterBuilderSlot;
use super::holds::Exited;
use super::node_selector::NodeSelectorSlot;
use super::placement::{Place, Placement};
use super::rule_chain::{RuleChain, RuleChecks};
#[cfg(feature = "tokio")]
use super::rule_slot::Abandoned;
use super::rule_slot::Verdict;
use super::statistic::StatisticSlot;
use super::{EntryContext, ExitContext, Holds, Outcome};
use crate::engine::Engine;
use crate::entry::Request;
use crate::entry::{Active, Entry};
use crate::node::OriginNode;
use crate::rules::RuleSet;
use crate::rules::view::View;
use crate::{BlockError, EntryType};

/// Enters `request`'s resource, waiting out a rate limiter's queue on the
/// instance's clock ([`Clock::sleep`](crate::Clock::sleep): the thread
/// sleeps on the system clock, a `ManualClock` advances).
#[inline(always)]
pub(crate) fn enter<'s>(
    engine: &'s Engine,
    request: Request<'_, 's>,
) -> Result<Entry<'s>, BlockError> {
    let Some(checked) = check(engine, &request)? else {
        return Ok(Entry::pass_through());
    };
    let now = match checked.outcome.wait_ns() {
        0 => checked.pass_ms,
        wait => {
            // A rate limiter's queue: wait with nothing held, then count.
            let clock = &engine.parts.clock;
            clock.sleep(std::time::Duration::from_nanos(wait));
            clock.now_ms().max(checked.pass_ms)
        }
    };
    Ok(admit(engine, &request, checked, now))
}

/// As [`enter`], waiting in a rate limiter's queue with
/// `tokio::time::sleep` instead of sleeping the thread.
#[cfg(feature = "tokio")]
pub(crate) async fn enter_async<'s>(
    engine: &'s Engine,
    request: Request<'_, 's>,
) -> Result<Entry<'s>, BlockError> {
    let Some(checked) = check(engine, &request)? else {
        return Ok(Entry::pass_through());
    };
    if checked.outcome.wait_ns() == 0 {
        let now = checked.pass_ms;
        return Ok(admit(engine, &request, checked, now));
    }
    let wait = std::time::Duration::from_nanos(checked.outcome.wait_ns());
    // Dropped while waiting (a cancelled future), the guard gives back
    // what the checks took (concurrency, probes); nothing is counted.
    let mut guard = Unadmitted {
        engine,
        batch: request.batch,
        checked: Some(checked),
    };
    tokio::time::sleep(wait).await;
    let checked = guard.checked.take().expect("taken once, after the wait");
    let now = engine.parts.clock.now_ms().max(checked.pass_ms);
    Ok(admit(engine, &request, checked, now))
}

/// Everything up to counting the pass: the resource's node, the node
/// selector, the cluster builder, the statistic slot around the checks.
/// `Ok(None)`: the entry passes uncounted.
#[inline(always)]
pub(crate) fn check<'a, 's>(
    engine: &'s Engine,
    request: &Request<'a, 's>,
) -> Result<Option<Checked<'a, 's>>, BlockError> {
    if !engine.is_enabled() {
        return Ok(None);
    }
    let Some(resource) = engine.resource_of(request.name, request.resource) else {
        return Ok(None);
    };
    let parts = &engine.parts;
    let now = parts.clock.now_ms();
    let selected = NodeSelectorSlot::select(&parts.nodes, resource, request);
    let (origin_name, origin) =
        ClusterBuilderSlot::origin(resource, request.origin, request.parent);

    // A refusal is left in `verdict` (with what a passing entry holds), so
    // that the outcome of a pass travels in a register, and becomes a
    // `BlockError` only here, in the caller's result.
    let mut verdict = Verdict::default();
    let version = engine.rules.rules_version();
    let verdict = &mut verdict;
    // Inlined at each call (a closure called out of line reads its
    // captures back wider than they were stored, and stalls).
    let outcome = engine.rules.with_rules_if_any(
        version,
        #[inline(always)]
        |rules: Option<&RuleSet>| {
            let resource_rules = rules.and_then(|set| set.for_resource(resource));
            let inbound = request.entry_type == EntryType::Inbound;
            if engine.slots.is_empty()
                && resource_rules.is_none()
                && !(inbound && rules.is_some_and(RuleSet::checks_inbound))
            {
                return Some(Default::default());
            }
            let view = View::new(rules, resource_rules, &engine.rules.no_rules, inbound);
            let ctx = EntryContext {
                resource,
                entry_type: request.entry_type,
                batch: request.batch,
                origin,
                origin_name,
                context: selected.context,
                parts: &engine.parts,
                context_stats: selected.context_stats,
                args: request.args,
                now_ms: now,
            };
            if engine.slots.is_empty() {
                StatisticSlot::check::<RuleChain, false>(&ctx, &engine.slots, &view, verdict)
            } else {
                StatisticSlot::check::<RuleChain, true>(&ctx, &engine.slots, &view, verdict)
            }
        },
    );
    let Some(outcome) = outcome else {
        return Err(verdict.take_error());
    };
    Ok(Some(Checked {
        resource,
        node: selected.node,
        context: selected.context,
        context_stats: selected.context_stats,
        origin,
        start_ms: now,
        origin_name,
        pass_ms: now.max(verdict.pass_ms),
        outcome,
        holds: std::mem::take(&mut verdict.holds),
    }))
}

/// Counts the pass of a checked entry at `now` and hands out its guard.
#[inline(always)]
pub(crate) fn admit<'s>(
    engine: &'s Engine,
    request: &Request<'_, 's>,
    checked: Checked<'_, 's>,
    now: u64,
) -> Entry<'s> {
    let place = &Place {
        resource: checked.resource,
        node: checked.node,
        context: checked.context,
        context_stats: checked.context_stats,
        origin: checked.origin,
        entry_type: request.entry_type,
        batch: request.batch,
        start_ms: checked.start_ms,
    };
    StatisticSlot::count_pass(&engine.parts.nodes.inbound, place, now);
    if checked.outcome.hears_admission() {
        admitted(engine, request.args, place, checked.origin_name, now);
    }
    Entry::active(
        engine,
        Placement::new(*place, checked.origin_name, checked.outcome, checked.holds),
    )
}

/// Tells the slots that asked of an admission.
#[inline(always)]
fn admitted(
    engine: &Engine,
    args: &[crate::ParamValue],
    place: &Place<'_>,
    origin_name: &str,
    now: u64,
) {
    RuleChain::admitted(
        &EntryContext {
            resource: place.resource,
            entry_type: place.entry_type,
            batch: place.batch,
            origin: place.origin,
            origin_name,
            context: place.context,
            parts: &engine.parts,
            context_stats: place.context_stats,
            args,
            now_ms: now,
        },
        &engine.rules,
    );
}

/// Completes an entry that passed. An entry exiting as its thread unwinds
/// (the guarded code panicked) completed with an error, and a half-open
/// probe it holds failed.
#[inline]
pub(crate) fn exit(engine: &Engine, placement: &mut Placement<'_>, error: bool) {
    let parts = &engine.parts;
    let now = parts.clock.now_ms();
    let rt = now.saturating_sub(placement.start_ms);
    // One relaxed load of the process's panic count while no thread panics.
    let panicked = std::thread::panicking();
    let error = error || panicked;
    StatisticSlot::exit(&parts.nodes.inbound, placement, now, rt, error);
    // The rule slots hear the exit of an entry whose checks asked, or
    // that holds concurrency they reserved, each kind's hook in a call of
    // its own; no other entry pays for it.
    if placement.outcome.exit_has_work() {
        RuleChain::exit(engine, placement, now, rt, error, panicked);
    }
    placement.holds.finish_exited(|| Exited { now, rt, error });
    if !engine.slots.is_empty() {
        let ctx = ExitContext {
            placement,
            rt_ms: rt,
            error,
            now_ms: now,
        };
        if panicked {
            exit_user_slots_unwinding(engine, &ctx);
        } else {
            for slot in engine.slots.all.iter() {
                slot.exit(&ctx);
            }
        }
    }
}

/// The user slots' exit hooks of an entry dropped while its thread unwinds.
/// A panic escaping a destructor during unwinding aborts the process, so
/// each hook's panic is caught here (and reported by the panic hook, as
/// any panic), and the unwinding goes on.
#[cold]
fn exit_user_slots_unwinding(engine: &Engine, ctx: &ExitContext<'_>) {
    for slot in engine.slots.all.iter() {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| slot.exit(ctx)));
    }
}

impl Drop for Entry<'_> {
    /// The exit: completes the entry through its engine's chain.
    #[inline]
    fn drop(&mut self) {
        if let Some(Active { engine, placement }) = self.active_mut() {
            let error = placement.error.load(std::sync::atomic::Ordering::Relaxed);
            exit(engine, placement, error);
        }
    }
}

/// An entry that passed its checks, not counted yet.
pub(crate) struct Checked<'a, 's> {
    pub(crate) resource: &'s crate::node::ResourceNode,
    node: u32,
    context: u32,
    context_stats: Option<&'s crate::node::StatisticNode>,
    origin: Option<&'s OriginNode>,
    start_ms: u64,
    /// The caller's origin, given or inherited from the parent.
    pub(crate) origin_name: &'a str,
    /// When the pass is counted, unless it waits: the entry's start, or
    /// later (see `Verdict::pass_ms`).
    pub(crate) pass_ms: u64,
    /// What the checks decided: the wait, what the entry took, which
    /// slots hear of its admission and exit.
    pub(crate) outcome: Outcome,
    /// Hot-parameter counts and half-open probes the entry holds.
    holds: Holds,
}

#[cfg(feature = "tokio")]
impl<'s> Checked<'_, 's> {
    /// The same entry without its borrowed origin name (`""`), for a
    /// queued entry that keeps its own copy of the name.
    pub(crate) fn detached(self) -> Checked<'static, 's> {
        Checked {
            resource: self.resource,
            node: self.node,
            context: self.context,
            context_stats: self.context_stats,
            origin: self.origin,
            start_ms: self.start_ms,
            origin_name: "",
            pass_ms: self.pass_ms,
            outcome: self.outcome,
            holds: self.holds,
        }
    }
}

/// Gives back what a checked entry holds if it is never admitted.
#[cfg(feature = "tokio")]
pub(crate) struct Unadmitted<'a, 's> {
    pub(crate) engine: &'s Engine,
    pub(crate) batch: u32,
    pub(crate) checked: Option<Checked<'a, 's>>,
}

#[cfg(feature = "tokio")]
impl Drop for Unadmitted<'_, '_> {
    fn drop(&mut self) {
        let Some(mut checked) = self.checked.take() else {
            return;
        };
        let engine = self.engine;
        // The entry type is of no matter here: nothing is counted.
        RuleChain::unadmitted(
            &Abandoned {
                node: checked.resource,
                resource: checked.resource.stats(),
                origin: checked.origin.map(OriginNode::stats),
                context: checked.context_stats,
                outcome: checked.outcome,
                batch: self.batch,
                pass_ms: checked.pass_ms,
            },
            &engine.rules,
        );
        checked
            .holds
            .give_back(engine.parts.clock.now_ms(), &engine.parts);
    }
}
