//! The system kind and its slot ([`order::SYSTEM`](crate::slot::order::SYSTEM)):
//! system adaptive protection. Inbound entries only, against the
//! instance's inbound total and the machine's load and CPU; the strictest
//! limit wins. The kind is over every inbound entry, not per resource.
//! Nothing is taken, so nothing is given back.

use std::sync::Arc;

use super::{SystemLimits, SystemRule};
use crate::rule::RuleError;
use crate::rule::footprint::Footprint;
use crate::rule::kind::{CompiledKind, RuleKind};
use crate::rule::names::Names;
use crate::slot::holds::{Holding, NoHold};
use crate::slot::order;
use crate::slot::rule_slot::{Checking, Refused, RuleSlot};
use crate::{BlockError, BlockKind, Rule};

/// System rules.
pub(crate) struct SystemKind;

impl RuleKind for SystemKind {
    type Rule = SystemRule;
    type Compiled = SystemLimits;
    type Slot = Self;
    const BLOCK: BlockKind = BlockKind::System;

    fn problems(rule: &SystemRule, index: usize) -> Vec<RuleError> {
        rule.problems(index)
    }

    fn names(rule: &SystemRule) -> Names<'_> {
        rule.names()
    }

    fn footprint(rule: &SystemRule) -> Footprint {
        rule.footprint()
    }
}

impl CompiledKind for SystemLimits {
    type Rule = SystemRule;
    type PerResource = ();
    type Checked = SystemLimits;

    const PER_RESOURCE: bool = false;

    fn compile(rules: Vec<SystemRule>, _: &Self) -> Self {
        SystemLimits::compile(rules)
    }

    fn rules(&self) -> &[SystemRule] {
        &self.rules
    }

    fn resources(&self) -> impl Iterator<Item = &Arc<str>> {
        std::iter::empty()
    }

    fn of(&self, _: &str) {}

    fn has_own(_: &()) -> bool {
        false
    }

    fn select_own(_: &()) -> Option<&SystemLimits> {
        None
    }

    #[inline(always)]
    fn select_all(&self) -> Option<&SystemLimits> {
        Some(self)
    }

    fn checks_inbound(&self) -> bool {
        self.is_on()
    }
}

impl Holding for SystemKind {
    type Held = NoHold;
}

impl RuleSlot for SystemKind {
    type Rules = SystemLimits;
    const ORDER: i32 = order::SYSTEM;

    #[inline(always)]
    fn check(limits: &SystemLimits, c: &mut Checking<'_, '_>) -> Result<(), Refused> {
        let ctx = c.ctx;
        let parts = ctx.parts;
        if let Err(rule) = limits.check(&parts.nodes.inbound, &*parts.status, ctx.batch, ctx.now_ms)
        {
            // Named with the resource entered, not the rule's.
            let rule = Arc::clone(rule) as Arc<dyn Rule>;
            let block = BlockError::new(Self::BLOCK, ctx.resource.name_arc().clone(), Some(rule));
            return c.refuse_with(block, true);
        }
        Ok(())
    }
}
