//! What an entry holds from its checks until it exits, besides the exact
//! concurrency of its nodes: hot-parameter concurrency counts and circuit
//! breakers' half-open probes.

use std::sync::Arc;

use crate::degrade::{CircuitBreaker, Probe, StateChange};
use crate::hotspot::{CompiledParam, ParamHeld};

/// One thing held.
enum Hold {
    Param(Arc<CompiledParam>, ParamHeld),
    Probe(Arc<CircuitBreaker>, Probe),
}

/// What an entry holds. The first hot-parameter count is kept inline, so a
/// resource with one concurrency hot-parameter rule allocates nothing per
/// entry; more counts and probes (once per half-open period) go in a list.
#[derive(Default)]
pub(crate) struct Holds {
    param: Option<(Arc<CompiledParam>, ParamHeld)>,
    more: Vec<Hold>,
}

impl Holds {
    /// Holds `held` of `rule` until the entry ends.
    pub(crate) fn param(&mut self, rule: &Arc<CompiledParam>, held: ParamHeld) {
        match self.param {
            None => self.param = Some((Arc::clone(rule), held)),
            Some(_) => self.more.push(Hold::Param(Arc::clone(rule), held)),
        }
    }

    /// Holds a half-open `probe` of `breaker` until the entry ends.
    pub(crate) fn probe(&mut self, breaker: &Arc<CircuitBreaker>, probe: Probe) {
        self.more.push(Hold::Probe(Arc::clone(breaker), probe));
    }

    /// The probe this entry holds of `breaker`, if any.
    pub(crate) fn probe_of(&self, breaker: &Arc<CircuitBreaker>) -> Option<Probe> {
        self.more.iter().find_map(|hold| match hold {
            Hold::Probe(held, probe) if Arc::ptr_eq(held, breaker) => Some(*probe),
            _ => None,
        })
    }

    /// Ends the holds of an entry that exited (its probes were reported to
    /// their breakers with its completion): gives the counts back.
    #[inline]
    pub(crate) fn finish(&mut self) {
        if self.param.is_some() || !self.more.is_empty() {
            self.end(|_, _| {});
        }
    }

    /// Gives back everything of an entry that will not run (a later check
    /// refused it, or it was dropped before it was admitted): the counts,
    /// and the probes, whose breakers open again.
    pub(crate) fn give_back(&mut self, now: u64, notify: &dyn Fn(&StateChange<'_>)) {
        self.end(|breaker, probe| breaker.on_abandon(now, probe, notify));
    }

    fn end(&mut self, mut probe: impl FnMut(&CircuitBreaker, Probe)) {
        if let Some((rule, held)) = self.param.take() {
            rule.release(held);
        }
        for hold in self.more.drain(..) {
            match hold {
                Hold::Param(rule, held) => rule.release(held),
                Hold::Probe(breaker, held) => probe(&breaker, held),
            }
        }
    }
}
