//! `ParamFlowSlot`: hot-parameter rules
//! ([`order::PARAM_FLOW`](super::order::PARAM_FLOW)): a limit per value of
//! one argument of the entry. A concurrency rule's count is held in the
//! entry's [`Holds`](super::Holds) until its exit; the chain gives the
//! holds back when a later slot refuses the entry.

use super::order;
use super::rule_slot::{Checking, Refused, RuleSlot};
use crate::BlockKind;
use crate::param_flow;

/// Checks the entry's arguments against the resource's hot-parameter rules.
pub(crate) struct ParamFlowSlot;

impl RuleSlot for ParamFlowSlot {
    const ORDER: i32 = order::PARAM_FLOW;

    #[inline(always)]
    fn check(c: &mut Checking<'_, '_>) -> Result<(), Refused> {
        if let Some(rules) = c.rules
            && !rules.param_flow.is_empty()
            && let Err(rule) = param_flow::check(
                &rules.param_flow,
                c.ctx,
                &mut c.outcome,
                &mut c.verdict.holds,
            )
        {
            return c.refuse(BlockKind::ParamFlow, rule);
        }
        Ok(())
    }
}
