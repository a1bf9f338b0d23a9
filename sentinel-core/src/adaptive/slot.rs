//! The adaptive kind and its slot ([`order::ADAPTIVE`](crate::slot::order::ADAPTIVE)):
//! adaptive concurrency limits. A passing entry takes a place in flight
//! under each of its resource's adaptive rules that counts its caller,
//! held in the entry's holds: given back by the chain if a later slot
//! refuses, released at the exit after the rule hears the call's response
//! time and error.

use std::ops::Deref;
use std::sync::Arc;

use super::{AdaptiveLimiter, AdaptiveRule};
use crate::BlockKind;
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

/// Adaptive concurrency rules.
pub(crate) struct AdaptiveKind;

impl RuleKind for AdaptiveKind {
    type Rule = AdaptiveRule;
    type Compiled = KindSet<AdaptiveLimiter>;
    type Slot = Self;
    const BLOCK: BlockKind = BlockKind::Adaptive;

    fn problems(rule: &AdaptiveRule, index: usize) -> Vec<RuleError> {
        rule.problems(index)
    }

    fn names(rule: &AdaptiveRule) -> Names<'_> {
        rule.names()
    }

    fn footprint(rule: &AdaptiveRule) -> Footprint {
        rule.footprint()
    }
}

/// A resource's adaptive rules, with the origins they name (for
/// `limit_app: other`).
#[derive(Debug)]
pub(crate) struct AdaptiveRules {
    list: List<AdaptiveLimiter>,
    named_origins: Box<[Box<str>]>,
}

impl AdaptiveRules {
    pub(super) fn new(list: List<AdaptiveLimiter>) -> Self {
        let mut named: Vec<Box<str>> = list
            .iter()
            .filter(|l| l.rule().names_origin())
            .map(|l| l.rule().limit_app.as_str().into())
            .collect();
        named.sort();
        named.dedup();
        AdaptiveRules {
            list,
            named_origins: named.into_boxed_slice(),
        }
    }

    fn names_origin(&self, origin: &str) -> bool {
        self.named_origins.iter().any(|name| **name == *origin)
    }
}

impl AsRef<[Arc<AdaptiveLimiter>]> for AdaptiveRules {
    fn as_ref(&self) -> &[Arc<AdaptiveLimiter>] {
        &self.list
    }
}

impl Deref for AdaptiveRules {
    type Target = [Arc<AdaptiveLimiter>];

    fn deref(&self) -> &[Arc<AdaptiveLimiter>] {
        &self.list
    }
}

impl Holding for AdaptiveKind {
    type Held = InFlight;
}

impl RuleSlot for AdaptiveKind {
    type Rules = AdaptiveRules;
    const ORDER: i32 = order::ADAPTIVE;

    /// Takes a place under every rule that counts the caller; the first
    /// rule at its limit refuses (the places taken are held, and given
    /// back by the chain).
    #[inline(always)]
    fn check(rules: &AdaptiveRules, c: &mut Checking<'_, '_>) -> Result<(), Refused> {
        let origin = c.ctx.origin_name;
        let mut took = false;
        for limiter in rules.iter() {
            if !limiter.counts(origin, |o| rules.names_origin(o)) {
                continue;
            }
            if !limiter.try_acquire() {
                return c.refuse(Self::BLOCK, spare::share(limiter.rule()));
            }
            c.verdict.holds.hold::<Self>(InFlight {
                limiter: Arc::clone(limiter),
            });
            took = true;
        }
        if took {
            c.hear_exit(Self::KIND);
        }
        Ok(())
    }

    #[inline(always)]
    fn hears_exit(outcome: Outcome) -> bool {
        outcome.hears_exit(Self::KIND)
    }

    /// Gives each rule the entry holds a place under its sample (its holds
    /// release the places after). The rules are the held ones, not looked
    /// up again in the set in force: a rule reloaded unchanged is the same
    /// limiter, and a changed or removed rule's old limiter, which nothing
    /// reads any more, hears the sample harmlessly.
    #[inline(always)]
    fn exit(x: &Exiting<'_, '_>, _: impl InForce<AdaptiveRules>) {
        // `find` visits every hold while the pick answers `None`.
        x.placement.holds.find::<AdaptiveKind, ()>(|hold| {
            hold.limiter.complete(x.now, x.rt, x.error);
            None
        });
    }
}

/// A place in flight under an adaptive rule, held by an entry.
pub(crate) struct InFlight {
    limiter: Arc<AdaptiveLimiter>,
}

impl Held for InFlight {
    /// The call exited (its sample was given): its place is free.
    fn finish(self) {
        self.limiter.release();
    }

    /// The call will not run: its place is free, and it gives no sample.
    fn give_back(self, _: u64, _: &Parts) {
        self.limiter.release();
    }
}
