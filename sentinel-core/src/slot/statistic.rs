//! `StatisticSlot` ([`order::STATISTIC`](super::order::STATISTIC)): counts
//! what the checks after it decide, on every node of the entry.
//!
//! An entry counts on its resource node, its named context's node (the
//! default context's figures are derived), its origin's node and, when
//! inbound, the instance's inbound total. A refused entry counts a block on
//! each, and on this thread's block tally (by resource, kind, rule and
//! origin, for the block log). An admitted one counts a pass at admission;
//! its exit counts the response time, a success, and an error if recorded.

use std::marker::PhantomData;
use std::sync::Arc;

use super::placement::{Place, Placement};
use super::rule_chain::RuleChecks;
use super::rule_slot::{Checking, Verdict};
use super::user::UserSlots;
use super::{EntryContext, Outcome};
use crate::node::StatisticNode;
use crate::rules::view::View;
use crate::stat::tally::{self, BlockKey, BlockRule, BlockSource};
use crate::{BlockError, BlockKind, Rule};

/// Counts passes, blocks and completions around the rule checks.
pub(crate) struct StatisticSlot;

impl StatisticSlot {
    /// The user slots placed before this one, then the `Checks`: `None`
    /// (and the reason in `verdict`) if refused, counted as blocked on
    /// every node of the entry and by rule, with what the entry held given
    /// back. `USER`: the instance has user slots (`slots` is not empty);
    /// an instance without pays nothing for looking for them.
    #[inline(never)]
    pub(crate) fn check<Checks: RuleChecks, const USER: bool>(
        ctx: &EntryContext<'_>,
        slots: &UserSlots,
        view: &View<'_>,
        verdict: &mut Verdict,
    ) -> Option<Outcome> {
        // User slots before the statistic slot refuse without a block count.
        if USER
            && let Err(block) = slots
                .before_statistic
                .iter()
                .try_for_each(|slot| slot.entry(ctx))
        {
            verdict.block = Some(block);
            return None;
        }
        let mut checking = Checking {
            ctx,
            slots,
            outcome: Outcome::default(),
            verdict,
        };
        // A user slot among the checks may panic; the guard gives back what
        // the checks before it took. Forgotten on both ways out, it costs
        // nothing but a landing pad.
        let unwinding = GiveBackOnUnwind::<Checks> {
            view,
            checking: &mut checking,
            chain: PhantomData,
        };
        let passed = Checks::check::<USER>(view, &mut *unwinding.checking, 0).is_ok();
        std::mem::forget(unwinding);
        if passed {
            return Some(checking.outcome);
        }
        Self::count_refusal(ctx, checking.verdict);
        checking.verdict.holds.give_back(ctx.now_ms, ctx.parts);
        let batch = u64::from(ctx.batch);
        ctx.each_node(|node| node.add_block(ctx.now_ms, batch));
        None
    }

    /// Counts the pass of an admitted entry at `now`.
    #[inline(always)]
    pub(crate) fn count_pass(inbound: &StatisticNode, place: &Place<'_>, now: u64) {
        let batch = u64::from(place.batch);
        place.each_node(
            inbound,
            #[inline(always)]
            |node| node.add_pass(now, batch),
        );
    }

    /// Counts the completion of an entry: response time, success, and the
    /// error if one was recorded; and its response time in the resource's
    /// percentiles while they are tracked.
    #[inline(always)]
    pub(crate) fn exit(
        inbound: &StatisticNode,
        placement: &Placement<'_>,
        now: u64,
        rt: u64,
        error: bool,
    ) {
        let batch = u64::from(placement.batch);
        placement.each_node(
            inbound,
            #[inline(always)]
            |node| {
                if error {
                    node.add_exception(now, batch);
                }
                node.add_rt_and_success(now, rt, batch);
            },
        );
        if let Some(percentiles) = placement.resource.percentiles() {
            percentiles.record(now, rt);
        }
    }

    /// Counts a refusal by its resource, kind, rule and origin, for the
    /// block log and the per-kind counts.
    #[inline(always)]
    fn count_refusal(ctx: &EntryContext<'_>, verdict: &Verdict) {
        // Read where the rule was stored (copying its reference out first
        // and back would stall on its halves).
        match (&verdict.rule, &verdict.block) {
            (Some((kind, rule)), _) => Self::count_block(ctx, *kind, Some(rule), true),
            (None, Some(block)) => Self::count_block_error(ctx, block, verdict.block_by_rule),
            (None, None) => {}
        }
    }

    /// Counts a block on this thread's tally (no atomic
    /// read-modify-write); `by_rule`: see [`Verdict::block_by_rule`].
    #[inline(always)]
    fn count_block(
        ctx: &EntryContext<'_>,
        kind: BlockKind,
        rule: Option<&Arc<dyn Rule>>,
        by_rule: bool,
    ) {
        let origin = ctx.origin.map_or(0, |o| std::ptr::from_ref(o) as usize);
        let keyed = if by_rule { rule } else { None };
        let key = BlockKey::new(ctx.parts.uid, ctx.resource.id(), kind, keyed, origin);
        tally::count(
            &key,
            ctx.now_ms,
            u64::from(ctx.batch),
            #[inline(never)]
            || BlockSource {
                key,
                resource: Arc::clone(ctx.resource.name_arc()),
                kind,
                rule: rule.map(|rule| BlockRule::new(rule, by_rule)),
                origin: ctx.origin.map(|o| Arc::clone(o.name_arc())),
            },
        );
    }

    /// Counts a block made whole by a slot or a check (a `BlockError`).
    #[cold]
    fn count_block_error(ctx: &EntryContext<'_>, block: &BlockError, by_rule: bool) {
        Self::count_block(ctx, block.kind(), block.rule_arc(), by_rule);
    }
}

/// Gives back, when dropped, what the checks took from an entry: dropped
/// only while they unwind from a panic (a user slot's), as the checks'
/// two ways out forget it. Every slot's undo runs (each reads from the
/// outcome what its check took, nothing if it did not run), then the holds
/// (hot-parameter counts, half-open probes: their breakers open again).
/// Nothing is counted: the entry neither passed nor was refused.
struct GiveBackOnUnwind<'g, 'c, 'a, Checks: RuleChecks> {
    view: &'g View<'g>,
    checking: &'g mut Checking<'c, 'a>,
    chain: PhantomData<Checks>,
}

impl<Checks: RuleChecks> Drop for GiveBackOnUnwind<'_, '_, '_, Checks> {
    #[cold]
    fn drop(&mut self) {
        let c = &mut *self.checking;
        Checks::undo_all(self.view, c);
        c.verdict.holds.give_back(c.ctx.now_ms, c.ctx.parts);
    }
}
