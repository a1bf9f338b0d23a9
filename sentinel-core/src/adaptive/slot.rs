//! The adaptive kind and its slot ([`order::ADAPTIVE`](crate::slot::order::ADAPTIVE)):
//! adaptive concurrency limits. A passing entry takes a place in flight
//! under each of its resource's adaptive rules that counts its caller,
//! held in the entry's holds: given back by the chain if a later slot
//! refuses, and ended at the exit by one atomic addition that gives the
//! rule the call's response time and frees the place. The hold is all the
//! kind hears of the exit: it has no exit hook.
//!
//! A hold keeps its limiter alive by a shared reference (an `Arc`), so
//! that a call admitted under a rule replaced since still frees its place
//! there. Counting that reference up and down is two locked instructions,
//! as many as the admission and the exit of their own; so the hold's end
//! parks the reference for its thread instead of dropping it, and the
//! thread's next admission under the same rule takes it back: no atomic
//! operation either way while a thread's calls enter and exit on it. A
//! thread parks one limiter at most; a parked limiter no longer loaded
//! stays allocated until the thread's next hold ends (or it exits).

use std::cell::Cell;
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
use crate::slot::holds::{Exited, Held, Holding};
use crate::slot::order;
use crate::slot::rule_slot::{Checking, Refused, RuleSlot};

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
        for limiter in rules.iter() {
            if !limiter.counts(origin, |o| rules.names_origin(o)) {
                continue;
            }
            if !limiter.try_acquire() {
                return c.refuse(Self::BLOCK, spare::share(limiter.rule()));
            }
            c.verdict.holds.hold::<Self>(InFlight {
                limiter: reference(limiter),
            });
        }
        Ok(())
    }
}

/// A place in flight under an adaptive rule, held by an entry. The rule
/// it holds is the one that admitted the call, not looked up again in the
/// set in force: a rule reloaded unchanged is the same limiter, and a
/// changed or removed rule's old limiter, which nothing reads any more,
/// hears the sample harmlessly.
pub(crate) struct InFlight {
    limiter: Arc<AdaptiveLimiter>,
}

impl Held for InFlight {
    /// The call ended with no time told: its place is freed without a
    /// sample.
    fn finish(self) {
        self.limiter.give_back();
        park(self.limiter);
    }

    /// The call exited: its sample is given and its place freed, in one
    /// atomic addition.
    #[inline(always)]
    fn finish_exited(self, exit: Exited) {
        self.limiter.complete(exit.now, exit.rt, exit.error);
        park(self.limiter);
    }

    /// The call will not run: its place is free, and it gives no sample.
    fn give_back(self, _: u64, _: &Parts) {
        self.limiter.give_back();
        park(self.limiter);
    }
}

crate::sync::thread_local! {
    /// The limiter of this thread's last hold that ended, kept for its next
    /// admission under the same rule.
    static PARKED: Cell<Option<Arc<AdaptiveLimiter>>> = const { Cell::new(None) };
}

/// A reference to `limiter` for a hold: the one this thread parked, if it
/// is that limiter's, else a new one.
#[inline]
fn reference(limiter: &Arc<AdaptiveLimiter>) -> Arc<AdaptiveLimiter> {
    let parked = PARKED.try_with(|parked| {
        let held = parked.take()?;
        if Arc::ptr_eq(&held, limiter) {
            return Some(held);
        }
        // Another rule's: stays parked.
        parked.set(Some(held));
        None
    });
    match parked {
        Ok(Some(held)) => held,
        _ => Arc::clone(limiter),
    }
}

/// Parks the reference of a hold that ended, for this thread's next
/// admission under its rule; the one parked before (or this one, on an
/// exiting thread) is released.
#[inline]
fn park(limiter: Arc<AdaptiveLimiter>) {
    // On an exiting thread the closure is dropped uncalled, and with it
    // the reference.
    let _ = PARKED.try_with(move |parked| drop(parked.replace(Some(limiter))));
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use crate::adaptive::{AdaptiveAlgorithm, AdaptiveRule, AdaptiveSnapshot};
    use crate::slot::{EntryContext, Slot, order};
    use crate::{BlockError, BlockKind, ManualClock, Sentinel};

    /// An AIMD rule on "r" of `limit` calls that never folds a window.
    fn rule(limit: u32) -> AdaptiveRule {
        AdaptiveRule {
            initial_limit: limit,
            min_limit: 1,
            min_samples: 1_000_000,
            ..AdaptiveRule::new("r", AdaptiveAlgorithm::aimd())
        }
    }

    fn state(sentinel: &Sentinel) -> AdaptiveSnapshot {
        sentinel.adaptive_rules().limits()[0].1
    }

    /// A user slot after the adaptive one, refusing while `shut`.
    #[derive(Debug)]
    struct Shut(&'static AtomicBool);

    impl Slot for Shut {
        fn order(&self) -> i32 {
            order::ADAPTIVE + 1
        }
        fn entry(&self, _: &EntryContext<'_>) -> Result<(), BlockError> {
            if self.0.load(Ordering::Relaxed) {
                Err(BlockError::new(BlockKind::Custom("shut"), "r".into(), None))
            } else {
                Ok(())
            }
        }
    }

    #[test]
    fn a_call_that_panics_frees_its_place_once() {
        let sentinel = Sentinel::builder().clock(ManualClock::new(1_000)).build();
        sentinel.adaptive_rules().load(vec![rule(1)]).unwrap();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _entry = sentinel.entry("r").unwrap();
            panic!("the guarded call fails");
        }));
        assert!(unwound.is_err());
        assert_eq!(state(&sentinel).in_flight, 0);
        let again = sentinel.entry("r").unwrap();
        assert_eq!(state(&sentinel).in_flight, 1);
        assert_eq!(sentinel.entry("r").unwrap_err().kind(), BlockKind::Adaptive);
        drop(again);
        assert_eq!(state(&sentinel).in_flight, 0);
    }

    /// A thread's hold parks its limiter's reference when it ends and takes
    /// it back at the next admission: the limiter's count stays at the rule
    /// set's and the parked one; a replaced limiter is released at the
    /// thread's next hold's end.
    #[test]
    fn a_holds_reference_is_parked_and_taken_back_without_a_new_count() {
        let sentinel = Sentinel::builder().clock(ManualClock::new(1_000)).build();
        sentinel.adaptive_rules().load(vec![rule(2)]).unwrap();
        let limiter = || {
            let set = sentinel.rule_set();
            Arc::clone(&set.parts.adaptive.by_resource["r"][0])
        };
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let first = limiter();
                    drop(sentinel.entry("r").unwrap());
                    // The set's, this one, and the parked.
                    assert_eq!(Arc::strong_count(&first), 3);
                    let inside = sentinel.entry("r").unwrap();
                    assert_eq!(Arc::strong_count(&first), 3, "taken back");
                    let second = sentinel.entry("r").unwrap();
                    assert_eq!(Arc::strong_count(&first), 4, "none parked: a new count");
                    drop((inside, second));
                    assert_eq!(Arc::strong_count(&first), 3, "one parked");
                    sentinel.adaptive_rules().load(vec![rule(3)]).unwrap();
                    // The next entry loads the new set, whose limiter's
                    // reference its hold's end parks in place of the old.
                    drop(sentinel.entry("r").unwrap());
                    assert_eq!(Arc::strong_count(&first), 1, "replaced by the new one");
                    assert_eq!(Arc::strong_count(&limiter()), 3);
                })
                .join()
                .unwrap();
        });
    }

    #[test]
    fn a_place_taken_by_a_call_a_later_slot_refuses_is_given_back() {
        static SHUT: AtomicBool = AtomicBool::new(false);
        let sentinel = Sentinel::builder()
            .clock(ManualClock::new(1_000))
            .slot(Shut(&SHUT))
            .build();
        sentinel.adaptive_rules().load(vec![rule(1)]).unwrap();
        SHUT.store(true, Ordering::Relaxed);
        for _ in 0..3 {
            assert!(sentinel.entry("r").is_err());
            assert_eq!(state(&sentinel).in_flight, 0);
        }
        SHUT.store(false, Ordering::Relaxed);
        let inside = sentinel.entry("r").unwrap();
        assert_eq!(state(&sentinel).in_flight, 1);
        drop(inside);
        assert_eq!(state(&sentinel).in_flight, 0);
    }

    /// Entries admitted on one thread and exited on another, many at once,
    /// leave no place taken.
    #[test]
    fn entries_exited_on_other_threads_free_every_place() {
        let sentinel = Sentinel::builder().clock(ManualClock::new(1_000)).build();
        sentinel.adaptive_rules().load(vec![rule(64)]).unwrap();
        let entries: Vec<_> = (0..64).map(|_| sentinel.entry("r").unwrap()).collect();
        assert!(sentinel.entry("r").is_err());
        assert_eq!(state(&sentinel).in_flight, 64);
        std::thread::scope(|scope| {
            let mut entries = entries;
            while !entries.is_empty() {
                let part: Vec<_> = entries.drain(..16.min(entries.len())).collect();
                scope.spawn(move || drop(part));
            }
        });
        assert_eq!(state(&sentinel).in_flight, 0);
    }
}
