//! `DegradeSlot`: circuit breakers ([`order::DEGRADE`](super::order::DEGRADE)).
//! An open breaker refuses; a half-open one lets its probes through, held
//! in the entry's [`Holds`](super::Holds) (given back by the chain if a
//! later slot refuses: the breaker opens again). At the exit, every breaker
//! of the resource hears the entry's response time and error.

use super::order;
use super::rule_slot::{Checking, Exiting, Refused, RuleSlot};
use crate::BlockKind;
use crate::degrade::{self, StateChange};

/// Checks and feeds the resource's circuit breakers.
pub(crate) struct DegradeSlot;

impl RuleSlot for DegradeSlot {
    const ORDER: i32 = order::DEGRADE;

    #[inline(always)]
    fn check(c: &mut Checking<'_, '_>) -> Result<(), Refused> {
        if let Some(rules) = c.rules
            && !rules.degrade.is_empty()
        {
            let sentinel = c.ctx.sentinel;
            let notify = |change: &StateChange<'_>| sentinel.listeners.states.notify(change);
            match degrade::check(&rules.degrade, c.ctx.now_ms, &notify, &mut c.verdict.holds) {
                Ok(()) => c.outcome = c.outcome.with_breakers(),
                Err(rule) => return c.refuse(BlockKind::Degrade, rule),
            }
        }
        Ok(())
    }

    #[inline(always)]
    fn exit(x: &Exiting<'_, '_>) {
        if x.active.breakers {
            complete(x);
        }
    }
}

/// Tells the circuit breakers of an entry's resource that it completed.
#[inline(never)]
fn complete(x: &Exiting<'_, '_>) {
    let sentinel = x.sentinel;
    let notify = |change: &StateChange<'_>| sentinel.listeners.states.notify(change);
    let version = sentinel.rules_version();
    sentinel.with_rules(version, |set| {
        if let Some(rules) = set.for_resource(x.active.resource) {
            degrade::complete(
                &rules.degrade,
                &x.active.holds,
                x.now,
                x.rt,
                x.error,
                x.panicked,
                &notify,
            );
        }
    });
}
