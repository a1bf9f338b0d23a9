//! The hot-parameter kind and its slot ([`order::PARAM_FLOW`](crate::slot::order::PARAM_FLOW)):
//! a limit per value of one argument of the entry (a QPS rule in cluster
//! mode asks the cluster service instead: `cluster.rs`). A concurrency rule's
//! count is held in the entry's holds until its exit; the chain gives the
//! holds back when a later slot refuses the entry.

use std::sync::Arc;

use super::{CompiledParamFlow, ParamDecision, ParamFlowRule, ParamHeld};
use crate::BlockKind;
use crate::engine::parts::Parts;
use crate::entry::spare;
use crate::rule::RuleError;
use crate::rule::compiled::List;
use crate::rule::footprint::Footprint;
use crate::rule::kind::RuleKind;
use crate::rule::kind_set::KindSet;
use crate::rule::names::Names;
use crate::slot::holds::{Held, Holding};
use crate::slot::order;
use crate::slot::rule_slot::{Checking, Refused, RuleSlot};

/// Hot-parameter rules.
pub(crate) struct ParamFlowKind;

impl RuleKind for ParamFlowKind {
    type Rule = ParamFlowRule;
    type Compiled = KindSet<CompiledParamFlow>;
    type Slot = Self;
    const BLOCK: BlockKind = BlockKind::ParamFlow;

    fn problems(rule: &ParamFlowRule, index: usize) -> Vec<RuleError> {
        rule.problems(index)
    }

    fn names(rule: &ParamFlowRule) -> Names<'_> {
        rule.names()
    }

    fn footprint(rule: &ParamFlowRule) -> Footprint {
        rule.footprint()
    }

    fn across(rules: &[ParamFlowRule]) -> Vec<RuleError> {
        super::cluster::cluster_problems(rules)
    }
}

impl Holding for ParamFlowKind {
    type Held = ParamFlowHold;
}

impl RuleSlot for ParamFlowKind {
    type Rules = List<CompiledParamFlow>;
    const ORDER: i32 = order::PARAM_FLOW;

    /// Runs the resource's rules over the entry's arguments: a rate
    /// limiter's wait goes into the outcome, a concurrency count into the
    /// holds.
    #[inline(always)]
    fn check(rules: &List<CompiledParamFlow>, c: &mut Checking<'_, '_>) -> Result<(), Refused> {
        let ctx = c.ctx;
        if ctx.args.is_empty() {
            return Ok(());
        }
        for rule in rules.iter() {
            let now_ns = || ctx.parts.clock.now_nanos();
            let mut decision = rule.check(ctx.args, ctx.batch, ctx.now_ms, now_ns);
            if matches!(decision, ParamDecision::Cluster) {
                decision =
                    rule.check_cluster(&ctx.parts.cluster, ctx.args, ctx.batch, ctx.now_ms, now_ns);
            }
            match decision {
                ParamDecision::Pass => {}
                ParamDecision::Wait(ns) => c.outcome.wait_at_least(ns),
                ParamDecision::Held(held) => c.verdict.holds.hold::<Self>(ParamFlowHold {
                    rule: Arc::clone(rule),
                    held,
                }),
                ParamDecision::Block => return c.refuse(Self::BLOCK, spare::share(rule.rule())),
                // Never from the cluster check, which decides.
                ParamDecision::Cluster => {}
            }
        }
        Ok(())
    }
}

/// Concurrency counts an entry holds of a rule.
pub(crate) struct ParamFlowHold {
    rule: Arc<CompiledParamFlow>,
    held: ParamHeld,
}

impl Held for ParamFlowHold {
    fn finish(self) {
        self.rule.release(self.held);
    }

    fn give_back(self, _: u64, _: &Parts) {
        self.rule.release(self.held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ParamValue;
    use crate::param_flow::ParamFlowGrade;
    use crate::slot::Holds;

    #[test]
    fn a_thread_reuses_its_list_of_holds_and_counts_come_back() {
        let rule = Arc::new(CompiledParamFlow::new(ParamFlowRule {
            grade: ParamFlowGrade::Concurrency,
            ..ParamFlowRule::new("r", 0, 1.0)
        }));
        let args = [ParamValue::from("k")];
        let hold = |holds: &mut Holds| match rule.check(&args, 1, 0, || 0) {
            ParamDecision::Held(held) => holds.hold::<ParamFlowKind>(ParamFlowHold {
                rule: Arc::clone(&rule),
                held,
            }),
            other => panic!("not held: {other:?}"),
        };
        let mut first = Holds::default();
        hold(&mut first);
        let list = first.list_address();
        assert!(matches!(
            rule.check(&args, 1, 0, || 0),
            ParamDecision::Block
        ));
        first.finish();
        let mut second = Holds::default();
        hold(&mut second);
        assert_eq!(
            second.list_address(),
            list,
            "the list came back to the thread"
        );
        second.finish();
        let mut third = Holds::default();
        hold(&mut third);
        third.finish();
    }
}
