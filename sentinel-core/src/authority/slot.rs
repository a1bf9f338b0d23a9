//! The authority kind and its slot ([`order::AUTHORITY`](crate::slot::order::AUTHORITY)):
//! the origin white and black lists of the entry's resource. An entry
//! without an origin passes; nothing is taken, so nothing is given back.

use super::{AuthorityRule, CompiledAuthority};
use crate::BlockKind;
use crate::entry::spare;
use crate::rule::RuleError;
use crate::rule::compiled::List;
use crate::rule::footprint::Footprint;
use crate::rule::kind::RuleKind;
use crate::rule::kind_set::KindSet;
use crate::rule::names::Names;
use crate::slot::holds::{Holding, NoHold};
use crate::slot::order;
use crate::slot::rule_slot::{Checking, Refused, RuleSlot};

/// Origin white and black lists.
pub(crate) struct AuthorityKind;

impl RuleKind for AuthorityKind {
    type Rule = AuthorityRule;
    type Compiled = KindSet<CompiledAuthority>;
    type Slot = Self;
    const BLOCK: BlockKind = BlockKind::Authority;

    fn problems(rule: &AuthorityRule, index: usize) -> Vec<RuleError> {
        rule.problems(index)
    }

    fn names(rule: &AuthorityRule) -> Names<'_> {
        rule.names()
    }

    fn footprint(rule: &AuthorityRule) -> Footprint {
        rule.footprint()
    }
}

impl Holding for AuthorityKind {
    type Held = NoHold;
}

impl RuleSlot for AuthorityKind {
    type Rules = List<CompiledAuthority>;
    const ORDER: i32 = order::AUTHORITY;

    #[inline(always)]
    fn check(rules: &List<CompiledAuthority>, c: &mut Checking<'_, '_>) -> Result<(), Refused> {
        let origin = c.ctx.origin_name;
        if origin.is_empty() {
            return Ok(());
        }
        match rules.iter().find(|rule| !rule.admits(origin)) {
            Some(refusing) => c.refuse(Self::BLOCK, spare::share(&refusing.rule)),
            None => Ok(()),
        }
    }
}
