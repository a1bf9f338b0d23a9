//! `AuthoritySlot`: the origin white and black lists of the entry's
//! resource ([`order::AUTHORITY`](super::order::AUTHORITY)). An entry
//! without an origin passes; nothing is taken, so nothing is given back.

use super::order;
use super::rule_slot::{Checking, Refused, RuleSlot};
use crate::BlockKind;
use crate::authority;

/// Checks the caller's origin against the resource's authority rules.
pub(crate) struct AuthoritySlot;

impl RuleSlot for AuthoritySlot {
    const ORDER: i32 = order::AUTHORITY;

    #[inline(always)]
    fn check(c: &mut Checking<'_, '_>) -> Result<(), Refused> {
        if let Some(rules) = c.rules
            && !rules.authority.is_empty()
            && let Err(rule) = authority::check(&rules.authority, c.ctx.origin_name)
        {
            return c.refuse(BlockKind::Authority, rule);
        }
        Ok(())
    }
}
