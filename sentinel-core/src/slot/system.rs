//! `SystemSlot`: system adaptive protection
//! ([`order::SYSTEM`](super::order::SYSTEM)). Inbound entries only, against
//! the instance's inbound total and the machine's load and CPU; the
//! strictest limit wins. Nothing is taken, so nothing is given back.

use std::sync::Arc;

use super::order;
use super::rule_slot::{Checking, Refused, RuleSlot};
use crate::{BlockError, BlockKind, Rule};

/// Checks an inbound entry against the system limits.
pub(crate) struct SystemSlot;

impl RuleSlot for SystemSlot {
    const ORDER: i32 = order::SYSTEM;

    #[inline(always)]
    fn check(c: &mut Checking<'_, '_>) -> Result<(), Refused> {
        let ctx = c.ctx;
        let sentinel = ctx.sentinel;
        if let Some(limits) = c.system
            && let Err(rule) =
                limits.check(&sentinel.inbound, &*sentinel.status, ctx.batch, ctx.now_ms)
        {
            // Named with the resource entered, not the rule's.
            let rule = Arc::clone(rule) as Arc<dyn Rule>;
            let block = BlockError::new(
                BlockKind::System,
                ctx.resource.name_arc().clone(),
                Some(rule),
            );
            return c.refuse_with(block, true);
        }
        Ok(())
    }
}
