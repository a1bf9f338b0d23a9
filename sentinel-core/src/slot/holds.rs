//! What an entry holds from its checks until it exits, besides the exact
//! concurrency of its nodes: hot-parameter concurrency counts and circuit
//! breakers' half-open probes.

use std::cell::Cell;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use crate::degrade::{CircuitBreaker, Probe, StateChange};
use crate::param_flow::{CompiledParamFlow, ParamHeld};

/// One thing held.
enum Hold {
    ParamFlow(Arc<CompiledParamFlow>, ParamHeld),
    Probe(Arc<CircuitBreaker>, Probe),
}

/// What an entry holds: one word, empty for almost every entry, so that
/// entries move no more than that through the hot path. The list behind it
/// is recycled per thread, so holding allocates nothing once a thread has
/// held something before.
///
/// It has no drop glue (none on the hot path): every holder ends it, with
/// [`finish`](Self::finish) at the exit or [`give_back`](Self::give_back)
/// when the entry will not run, panics included (the statistic slot's
/// guard gives back the holds of checks that unwind). One dropped unended
/// would keep its counts.
#[derive(Default)]
#[allow(clippy::box_collection)] // one word: a `Vec` is three
pub(crate) struct Holds(ManuallyDrop<Option<Box<Vec<Hold>>>>);

thread_local! {
    /// An empty list, kept for this thread's next entry that holds.
    #[allow(clippy::box_collection)]
    static SPARE: Cell<Option<Box<Vec<Hold>>>> = const { Cell::new(None) };
}

impl Holds {
    fn list(&mut self) -> &mut Vec<Hold> {
        self.0.get_or_insert_with(|| {
            SPARE
                .try_with(Cell::take)
                .ok()
                .flatten()
                .unwrap_or_default()
        })
    }

    /// Holds `held` of `rule` until the entry ends.
    pub(crate) fn param_flow(&mut self, rule: &Arc<CompiledParamFlow>, held: ParamHeld) {
        self.list().push(Hold::ParamFlow(Arc::clone(rule), held));
    }

    /// Holds a half-open `probe` of `breaker` until the entry ends.
    pub(crate) fn probe(&mut self, breaker: &Arc<CircuitBreaker>, probe: Probe) {
        self.list().push(Hold::Probe(Arc::clone(breaker), probe));
    }

    /// The probe this entry holds of `breaker`, if any.
    #[inline]
    pub(crate) fn probe_of(&self, breaker: &Arc<CircuitBreaker>) -> Option<Probe> {
        self.0.as_ref()?.iter().find_map(|hold| match hold {
            Hold::Probe(held, probe) if Arc::ptr_eq(held, breaker) => Some(*probe),
            _ => None,
        })
    }

    /// Ends the holds of an entry that exited (its probes were reported to
    /// their breakers with its completion): gives the counts back.
    #[inline]
    pub(crate) fn finish(&mut self) {
        if self.0.is_some() {
            self.end(|_, _| {});
        }
    }

    /// Gives back everything of an entry that will not run (a later check
    /// refused it, or it was dropped before it was admitted): the counts,
    /// and the probes, whose breakers open again.
    pub(crate) fn give_back(&mut self, now: u64, notify: &dyn Fn(&StateChange<'_>)) {
        if self.0.is_some() {
            self.end(|breaker, probe| breaker.on_abandon(now, probe, notify));
        }
    }

    #[cold]
    fn end(&mut self, mut probe: impl FnMut(&CircuitBreaker, Probe)) {
        let Some(mut list) = Option::take(&mut self.0) else {
            return;
        };
        for hold in list.drain(..) {
            match hold {
                Hold::ParamFlow(rule, held) => rule.release(held),
                Hold::Probe(breaker, held) => probe(&breaker, held),
            }
        }
        // Kept for the thread's next holder (one is enough; any other goes).
        let _ = SPARE.try_with(|spare| spare.set(Some(list)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ParamValue;
    use crate::param_flow::{ParamDecision, ParamFlowGrade, ParamFlowRule};

    #[test]
    fn a_thread_reuses_its_list_and_counts_come_back() {
        let rule = Arc::new(CompiledParamFlow::new(ParamFlowRule {
            grade: ParamFlowGrade::Concurrency,
            ..ParamFlowRule::new("r", 0, 1.0)
        }));
        let args = [ParamValue::from("k")];
        let hold = |holds: &mut Holds| match rule.check(&args, 1, 0, || 0) {
            ParamDecision::Held(held) => holds.param_flow(&rule, held),
            other => panic!("not held: {other:?}"),
        };
        let mut first = Holds::default();
        hold(&mut first);
        let list = first.0.as_deref().map(|l| l as *const Vec<Hold>);
        assert!(matches!(
            rule.check(&args, 1, 0, || 0),
            ParamDecision::Block
        ));
        first.finish();
        let mut second = Holds::default();
        hold(&mut second);
        assert_eq!(
            second.0.as_deref().map(|l| l as *const Vec<Hold>),
            list,
            "the list came back to the thread"
        );
        second.finish();
        let mut third = Holds::default();
        hold(&mut third);
        third.finish();
    }
}
