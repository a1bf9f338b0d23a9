//! The two kinds. API definitions ([`order::API_DEFINITIONS`]) have
//! nothing to check: they mark no resource, so their slot never runs.
//! Gateway rules ([`order::GATEWAY`], after the other kinds' checks, so
//! that an entry of a resource without gateway rules never comes to them)
//! run the hot-parameter check of the rules they become over
//! the entry's arguments: a rate limiter's wait goes into the outcome, a
//! concurrency count into the holds until the entry exits.

use std::sync::Arc;

use super::compiled::{ApiSet, CompiledGatewayRule, GatewaySet};
use super::model::{ApiDefinition, GatewayRule};
use crate::BlockKind;
use crate::engine::parts::Parts;
use crate::entry::spare;
use crate::param_flow::{ParamDecision, ParamHeld};
use crate::rule::RuleError;
use crate::rule::compiled::List;
use crate::rule::footprint::Footprint;
use crate::rule::kind::RuleKind;
use crate::rule::names::Names;
use crate::slot::holds::{Held, Holding, NoHold};
use crate::slot::order;
use crate::slot::rule_slot::{Checking, Refused, RuleSlot};

/// API definitions.
pub(crate) struct ApiDefinitionsKind;

impl RuleKind for ApiDefinitionsKind {
    type Rule = ApiDefinition;
    type Compiled = ApiSet;
    type Slot = Self;
    const BLOCK: BlockKind = BlockKind::ApiDefinitions;

    fn problems(rule: &ApiDefinition, index: usize) -> Vec<RuleError> {
        rule.problems(index)
    }

    fn names(rule: &ApiDefinition) -> Names<'_> {
        rule.names()
    }

    fn footprint(rule: &ApiDefinition) -> Footprint {
        rule.footprint()
    }

    fn across(rules: &[ApiDefinition]) -> Vec<RuleError> {
        ApiDefinition::across(rules)
    }
}

impl Holding for ApiDefinitionsKind {
    type Held = NoHold;
}

impl RuleSlot for ApiDefinitionsKind {
    type Rules = ();
    const ORDER: i32 = order::API_DEFINITIONS;

    #[inline(always)]
    fn check(_: &(), _: &mut Checking<'_, '_>) -> Result<(), Refused> {
        Ok(())
    }
}

/// Gateway rules.
pub(crate) struct GatewayKind;

impl RuleKind for GatewayKind {
    type Rule = GatewayRule;
    type Compiled = GatewaySet;
    type Slot = Self;
    const BLOCK: BlockKind = BlockKind::Gateway;

    fn problems(rule: &GatewayRule, index: usize) -> Vec<RuleError> {
        rule.problems(index)
    }

    fn names(rule: &GatewayRule) -> Names<'_> {
        rule.names()
    }

    fn footprint(rule: &GatewayRule) -> Footprint {
        rule.footprint()
    }

    fn across(rules: &[GatewayRule]) -> Vec<RuleError> {
        GatewayRule::across(rules)
    }
}

impl Holding for GatewayKind {
    type Held = GatewayHold;
}

impl RuleSlot for GatewayKind {
    type Rules = List<CompiledGatewayRule>;
    const ORDER: i32 = order::GATEWAY;

    /// Runs the resource's rules over the entry's arguments; an entry
    /// without arguments passes.
    #[inline(always)]
    fn check(rules: &List<CompiledGatewayRule>, c: &mut Checking<'_, '_>) -> Result<(), Refused> {
        let ctx = c.ctx;
        if ctx.args.is_empty() {
            return Ok(());
        }
        for rule in rules.iter() {
            let now_ns = || ctx.parts.clock.now_nanos();
            match rule.param.check(ctx.args, ctx.batch, ctx.now_ms, now_ns) {
                ParamDecision::Pass => {}
                ParamDecision::Wait(ns) => c.outcome.wait_at_least(ns),
                ParamDecision::Held(held) => c.verdict.holds.hold::<Self>(GatewayHold {
                    rule: Arc::clone(rule),
                    held,
                }),
                ParamDecision::Block => return c.refuse(Self::BLOCK, spare::share(&rule.rule)),
                // A gateway rule is never in cluster mode.
                ParamDecision::Cluster => {}
            }
        }
        Ok(())
    }
}

/// Concurrency counts an entry holds of a gateway rule.
pub(crate) struct GatewayHold {
    rule: Arc<CompiledGatewayRule>,
    held: ParamHeld,
}

impl Held for GatewayHold {
    fn finish(self) {
        self.rule.param.release(self.held);
    }

    fn give_back(self, _: u64, _: &Parts) {
        self.rule.param.release(self.held);
    }
}
