//! `FlowSlot`: flow rules ([`order::FLOW`](super::order::FLOW)), QPS or
//! concurrency, with their control behaviours.
//!
//! What it takes from a passing entry, and where it is given back:
//! - a concurrency rule's exact reservation on the entry's nodes: released
//!   at the exit, or at once when a later slot refuses the entry;
//! - a reject QPS rule's permits from its quota lease: spent for good once
//!   the entry is admitted, given back when a later slot refuses it or its
//!   wait in a rate limiter's queue is cancelled;
//! - a rule with a window of its own counts the entry there once admitted.

use super::EntryContext;
use super::order;
use super::rule_slot::{Checking, Exiting, Refused, RuleSlot};
#[cfg(feature = "tokio")]
use super::statistic::Counted;
use crate::BlockKind;
#[cfg(feature = "tokio")]
use crate::Sentinel;
use crate::entry::Active;
use crate::flow;
use crate::node::OriginNode;

/// Checks the resource's flow rules.
pub(crate) struct FlowSlot;

impl RuleSlot for FlowSlot {
    const ORDER: i32 = order::FLOW;

    #[inline(always)]
    fn check(c: &mut Checking<'_, '_>) -> Result<(), Refused> {
        if let Some(rules) = c.rules
            && !rules.flow.is_empty()
        {
            let ctx = c.ctx;
            match flow::check(
                ctx.sentinel,
                &rules.flow,
                |o| rules.names_origin(o),
                ctx,
                &mut c.verdict.pass_ms,
            ) {
                Ok(passed) => {
                    c.outcome = c.outcome.merge(passed);
                    if rules.flow_windows {
                        c.outcome = c.outcome.with_windows();
                    }
                }
                Err(rule) => return c.refuse(BlockKind::Flow, rule),
            }
        }
        Ok(())
    }

    #[inline(always)]
    fn undo(c: &mut Checking<'_, '_>) {
        flow::release(c.ctx, c.outcome.reserved());
        if c.outcome.leased()
            && let Some(rules) = c.rules
        {
            // Refused after flow: every flow rule let it pass.
            flow::give_back(
                &rules.flow,
                c.ctx.batch,
                c.ctx.now_ms.max(c.verdict.pass_ms),
            );
        }
    }

    #[inline(always)]
    fn exit(x: &Exiting<'_, '_>) {
        if x.active.reserved != 0 {
            release_reserved(x.active);
        }
    }
}

impl FlowSlot {
    /// Counts an admitted entry in the windows its flow rules keep (the
    /// outcome said some do): at admission, after every check passed and
    /// any queue was waited.
    #[cold]
    pub(crate) fn admitted(ctx: &EntryContext<'_>) {
        let sentinel = ctx.sentinel;
        let version = sentinel.rules_version();
        sentinel.with_rules(version, |set| {
            if let Some(rules) = set.for_resource(ctx.resource) {
                flow::count_windows(sentinel, &rules.flow, |o| rules.names_origin(o), ctx);
            }
        });
    }

    /// Gives back what the slot took from an entry that passed every check
    /// but will never be admitted (its wait in a queue was cancelled): the
    /// `reserved` concurrency on its nodes, and the permits it `leased`.
    #[cfg(feature = "tokio")]
    pub(crate) fn unadmitted(
        sentinel: &Sentinel,
        nodes: &Counted<'_>,
        reserved: u8,
        leased: bool,
        batch: u32,
        pass_ms: u64,
    ) {
        flow::release_nodes(
            nodes.resource.stats(),
            nodes.origin.map(OriginNode::stats),
            nodes.context,
            reserved,
        );
        if leased {
            let version = sentinel.rules_version();
            sentinel.with_rules(version, |set| {
                if let Some(rules) = set.for_resource(nodes.resource) {
                    flow::give_back(&rules.flow, batch, pass_ms);
                }
            });
        }
    }
}

/// Gives back the exact concurrency an entry holds.
#[cold]
pub(crate) fn release_reserved(active: &Active<'_>) {
    flow::release_nodes(
        active.resource.stats(),
        active.origin.map(OriginNode::stats),
        active.context_stats,
        active.reserved,
    );
}
