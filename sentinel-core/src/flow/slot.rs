//! The flow kind and its slot ([`order::FLOW`](crate::slot::order::FLOW)):
//! QPS or concurrency limits, with their control behaviours.
//!
//! What it takes from a passing entry, and where it is given back:
//! - a concurrency rule's exact reservation on the entry's nodes: released
//!   at the exit, or at once when a later slot refuses the entry;
//! - a reject QPS rule's permits from its quota lease: spent for good once
//!   the entry is admitted, given back when a later slot refuses it or its
//!   wait in a rate limiter's queue is cancelled;
//! - a rule with a window of its own counts the entry there once admitted;
//! - a cluster concurrency rule's token ([`ClusterTokenHold`]): given back
//!   to the cluster service at the exit, or when a later slot refuses the
//!   entry.

use std::ops::Deref;
use std::sync::Arc;

use super::cluster::HeldToken;
use super::{CompiledFlow, FlowRule};
use crate::engine::parts::Parts;
use crate::node::OriginNode;
use crate::rule::RuleError;
use crate::rule::compiled::List;
use crate::rule::footprint::Footprint;
use crate::rule::kind::RuleKind;
use crate::rule::kind_set::KindSet;
use crate::rule::names::Names;
use crate::slot::Holds;
use crate::slot::holds::{Held, Holding};
use crate::slot::order;
use crate::slot::placement::Placement;
#[cfg(feature = "tokio")]
use crate::slot::rule_slot::Abandoned;
use crate::slot::rule_slot::{Checking, Exiting, InForce, Refused, RuleSlot};
use crate::slot::{EntryContext, Outcome};
use crate::{BlockKind, EntryType};

/// Flow rules.
pub(crate) struct FlowKind;

impl RuleKind for FlowKind {
    type Rule = FlowRule;
    type Compiled = KindSet<CompiledFlow>;
    type Slot = Self;
    const BLOCK: BlockKind = BlockKind::Flow;

    fn problems(rule: &FlowRule, index: usize) -> Vec<RuleError> {
        rule.problems(index)
    }

    fn names(rule: &FlowRule) -> Names<'_> {
        rule.names()
    }

    fn footprint(rule: &FlowRule) -> Footprint {
        rule.footprint()
    }

    fn across(rules: &[FlowRule]) -> Vec<RuleError> {
        super::cluster_problems(rules)
    }
}

/// A resource's flow rules in check order, with what the check reads of
/// them all.
#[derive(Debug)]
pub(crate) struct FlowRules {
    list: List<CompiledFlow>,
    /// Origins that the rules name (for `limit_app: other`).
    named_origins: Box<[Box<str>]>,
    /// A rule keeps a window of its own.
    windows: bool,
}

impl FlowRules {
    pub(super) fn new(list: List<CompiledFlow>) -> Self {
        let mut named: Vec<Box<str>> = list
            .iter()
            .filter(|c| c.rule().names_origin())
            .map(|c| c.rule().limit_app.as_str().into())
            .collect();
        named.sort();
        named.dedup();
        FlowRules {
            windows: list.iter().any(|c| c.has_window()),
            named_origins: named.into_boxed_slice(),
            list,
        }
    }

    /// The list, shared with the kind's set.
    #[cfg(test)]
    pub(crate) fn list(&self) -> &List<CompiledFlow> {
        &self.list
    }

    /// Whether a rule names `origin`.
    fn names_origin(&self, origin: &str) -> bool {
        self.named_origins.iter().any(|name| **name == *origin)
    }
}

impl AsRef<[Arc<CompiledFlow>]> for FlowRules {
    fn as_ref(&self) -> &[Arc<CompiledFlow>] {
        &self.list
    }
}

impl Deref for FlowRules {
    type Target = [Arc<CompiledFlow>];

    fn deref(&self) -> &[Arc<CompiledFlow>] {
        &self.list
    }
}

impl Holding for FlowKind {
    type Held = ClusterTokenHold;
}

/// A cluster concurrency token an entry holds, of one rule.
pub(crate) struct ClusterTokenHold {
    rule: Arc<CompiledFlow>,
    token: HeldToken,
}

impl ClusterTokenHold {
    fn release(self) {
        if let Some(flow) = self.rule.cluster_flow() {
            self.token.release(flow);
        }
    }
}

impl Held for ClusterTokenHold {
    fn finish(self) {
        self.release();
    }

    fn give_back(self, _: u64, _: &Parts) {
        self.release();
    }
}

/// Holds `token` of `rule` until the entry ends.
pub(super) fn hold_token(holds: &mut Holds, rule: &Arc<CompiledFlow>, token: HeldToken) {
    holds.hold::<FlowKind>(ClusterTokenHold {
        rule: Arc::clone(rule),
        token,
    });
}

impl RuleSlot for FlowKind {
    type Rules = FlowRules;
    const ORDER: i32 = order::FLOW;

    #[inline(always)]
    fn check(rules: &FlowRules, c: &mut Checking<'_, '_>) -> Result<(), Refused> {
        let ctx = c.ctx;
        match super::check(&rules.list, |o| rules.names_origin(o), ctx, c.verdict) {
            Ok(passed) => {
                c.outcome = c.outcome.merge(passed);
                if rules.windows {
                    c.outcome = c.outcome.hear_admission();
                }
                Ok(())
            }
            Err(rule) => c.refuse(Self::BLOCK, rule),
        }
    }

    #[inline(always)]
    fn undo(rules: &FlowRules, c: &mut Checking<'_, '_>) {
        super::release(c.ctx, c.outcome.reserved());
        if c.outcome.leased() {
            // Refused after flow: every flow rule let it pass.
            super::give_back(
                &rules.list,
                c.ctx.batch,
                c.ctx.now_ms.max(c.verdict.pass_ms),
            );
        }
    }

    /// Counts an admitted entry in the windows its flow rules keep.
    #[cold]
    fn admitted(ctx: &EntryContext<'_>, in_force: impl InForce<FlowRules>) {
        let inbound = ctx.entry_type == EntryType::Inbound;
        in_force.with(ctx.resource, inbound, |rules| {
            super::count_windows(&rules.list, |o| rules.names_origin(o), ctx);
        });
    }

    /// Gives back the concurrency reserved on the entry's nodes, and the
    /// permits it leased.
    #[cfg(feature = "tokio")]
    fn unadmitted(entry: &Abandoned<'_>, in_force: impl InForce<FlowRules>) {
        super::release_nodes(
            entry.resource,
            entry.origin,
            entry.context,
            entry.outcome.reserved(),
        );
        if entry.outcome.leased() {
            // The entry type is of no matter here: a resource's flow rules
            // are the same either way.
            in_force.with(entry.node, false, |rules| {
                super::give_back(&rules.list, entry.batch, entry.pass_ms);
            });
        }
    }

    /// An entry that reserved concurrency gives it back.
    #[inline(always)]
    fn hears_exit(outcome: Outcome) -> bool {
        outcome.reserved() != 0
    }

    #[inline(always)]
    fn exit(x: &Exiting<'_, '_>, _: impl InForce<FlowRules>) {
        release_reserved(x.placement);
    }
}

/// Gives back the exact concurrency an entry holds.
#[inline(always)]
fn release_reserved(placement: &Placement<'_>) {
    super::release_nodes(
        placement.resource.stats(),
        placement.origin.map(OriginNode::stats),
        placement.context_stats,
        placement.reserved(),
    );
}
