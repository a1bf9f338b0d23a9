//! The degrade kind and its slot ([`order::DEGRADE`](crate::slot::order::DEGRADE)):
//! circuit breakers. An open breaker refuses; a half-open one lets its
//! probes through, held in the entry's holds (given back by the chain if a
//! later slot refuses: the breaker opens again). At the exit, every
//! breaker of the resource hears the entry's response time and error.

use std::sync::Arc;

use super::{Admission, CircuitBreaker, DegradeRule, Probe, StateChange};
use crate::engine::parts::Parts;
use crate::entry::spare;
use crate::rule::RuleError;
use crate::rule::compiled::List;
use crate::rule::footprint::Footprint;
use crate::rule::kind::RuleKind;
use crate::rule::kind_set::KindSet;
use crate::rule::names::Names;
use crate::rule::present::KindBit;
use crate::slot::Outcome;
use crate::slot::holds::{Held, Holding};
use crate::slot::order;
use crate::slot::rule_slot::{Checking, Exiting, InForce, Refused, RuleSlot};
use crate::{BlockKind, EntryType};

/// Circuit-breaking rules.
pub(crate) struct DegradeKind;

impl RuleKind for DegradeKind {
    type Rule = DegradeRule;
    type Compiled = KindSet<CircuitBreaker>;
    type Slot = Self;
    const BLOCK: BlockKind = BlockKind::Degrade;

    fn problems(rule: &DegradeRule, index: usize) -> Vec<RuleError> {
        rule.problems(index)
    }

    fn names(rule: &DegradeRule) -> Names<'_> {
        rule.names()
    }

    fn footprint(rule: &DegradeRule) -> Footprint {
        rule.footprint()
    }
}

impl Holding for DegradeKind {
    type Held = ProbeHold;
}

impl RuleSlot for DegradeKind {
    type Rules = List<CircuitBreaker>;
    const ORDER: i32 = order::DEGRADE;

    /// Runs the resource's breakers: probes taken are held (the chain
    /// gives them back on a later refusal).
    #[inline(always)]
    fn check(breakers: &List<CircuitBreaker>, c: &mut Checking<'_, '_>) -> Result<(), Refused> {
        let states = &c.ctx.parts.states;
        let notify = |change: &StateChange<'_>| states.notify(change);
        for breaker in breakers.iter() {
            match breaker.try_pass(c.ctx.now_ms, &notify) {
                Admission::Pass => {}
                Admission::Probe(probe) => c.verdict.holds.hold::<Self>(ProbeHold {
                    breaker: Arc::clone(breaker),
                    probe,
                }),
                Admission::Block => return c.refuse(Self::BLOCK, spare::share(breaker.rule())),
            }
        }
        c.hear_exit(Self::KIND);
        Ok(())
    }

    #[inline(always)]
    fn hears_exit(outcome: Outcome) -> bool {
        outcome.hears_exit(Self::KIND)
    }

    #[inline(always)]
    fn exit(x: &Exiting<'_, '_>, in_force: impl InForce<List<CircuitBreaker>>) {
        complete(x, in_force);
    }
}

/// Reports an admitted entry's completion to the breakers of its resource;
/// a breaker whose probe this entry holds hears it as the probe's outcome.
/// A probe of an entry that panicked (its thread unwinding) failed,
/// whatever its response time.
#[inline(always)]
fn complete(x: &Exiting<'_, '_>, in_force: impl InForce<List<CircuitBreaker>>) {
    let states = &x.parts.states;
    let notify = |change: &StateChange<'_>| states.notify(change);
    let inbound = x.placement.entry_type == EntryType::Inbound;
    in_force.with(x.placement.resource, inbound, |breakers| {
        for breaker in breakers.iter() {
            let held = x.placement.holds.find::<DegradeKind, _>(|hold| {
                Arc::ptr_eq(&hold.breaker, breaker).then_some(hold.probe)
            });
            match held {
                Some(probe) if x.panicked => {
                    breaker.on_complete(x.now, x.rt, x.error, None, &notify);
                    breaker.on_probe_panicked(x.now, probe, &notify);
                }
                probe => breaker.on_complete(x.now, x.rt, x.error, probe, &notify),
            }
        }
    });
}

/// A half-open breaker's probe an entry holds.
pub(crate) struct ProbeHold {
    breaker: Arc<CircuitBreaker>,
    probe: Probe,
}

impl Held for ProbeHold {
    /// Nothing to end: the probe was reported with the entry's completion.
    fn finish(self) {}

    /// The probe is abandoned: the breaker opens again.
    fn give_back(self, now: u64, parts: &Parts) {
        let notify = |change: &StateChange<'_>| parts.states.notify(change);
        self.breaker.on_abandon(now, self.probe, &notify);
    }
}
