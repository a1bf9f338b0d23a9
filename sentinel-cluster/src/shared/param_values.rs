//! The cluster service's calls for hot-parameter rules in cluster mode:
//! an entry's values counted by Redis within the budget, or decided by
//! the fallback.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use sentinel_flow_core::flow::TokenAnswer;
use sentinel_flow_core::param_flow::{ClusterParamFlow, ParamToken};

use super::Shared;
use crate::param::{
    Asked, MAX_PENDING_PARAMS, MAX_VALUES_PER_ENTRY, ParamFlow, ParamPending, ParamSettings, State,
    field_of,
};

impl Shared {
    /// An entry's values of a hot-parameter rule in cluster mode: counted
    /// by Redis within the budget, or decided by the fallback.
    pub(crate) fn acquire_param(
        &self,
        rule: &ClusterParamFlow,
        values: &[ParamToken<'_>],
        permits: u32,
    ) -> TokenAnswer {
        let flow = self.param_flow(rule);
        let settings = ParamSettings::of(rule);
        {
            let mut held = flow.settings.lock();
            if *held != settings {
                *held = settings;
            }
        }
        if values.len() > MAX_VALUES_PER_ENTRY {
            // Left to the rule's local check (or a pass), uncounted.
            self.counters.fallbacks.fetch_add(1, Relaxed);
            flow.counters.fallbacks.fetch_add(1, Relaxed);
            return TokenAnswer::Unavailable;
        }
        let asked = asked_of(values, permits);
        if !self.is_up() {
            return self.param_fallback(&flow, &asked);
        }
        let pending = Arc::new(ParamPending::new(asked));
        {
            let mut queue = flow.pending.lock();
            if queue.len() >= MAX_PENDING_PARAMS {
                drop(queue);
                return self.param_fallback(&flow, &pending.asked);
            }
            queue.push_back(pending.clone());
        }
        self.wake.notify_one();
        let deadline = Instant::now() + self.config.get_budget();
        let waited = pending.wait(deadline, || {
            self.counters.over_budget.fetch_add(1, Relaxed);
            self.param_fallback(&flow, &pending.asked)
        });
        match waited {
            Err(answer) => answer,
            Ok(State::Granted) => TokenAnswer::Granted,
            Ok(State::Refused) => TokenAnswer::Refused,
            Ok(State::Overflow) => {
                flow.counters.overflows.fetch_add(1, Relaxed);
                self.param_fallback(&flow, &pending.asked)
            }
            Ok(_) => self.param_fallback(&flow, &pending.asked),
        }
    }

    /// No answer (or a value past the cap): with the rule's
    /// `fallback_to_local_when_fail`, each value within this instance's
    /// share, then the rule's local check (`Unavailable`); past the share,
    /// refused; with no room in the fallback's bounded count, the local
    /// check alone. Without it, the entry passes (`Unavailable`).
    fn param_fallback(&self, flow: &ParamFlow, asked: &[Asked]) -> TokenAnswer {
        self.counters.fallbacks.fetch_add(1, Relaxed);
        flow.counters.fallbacks.fetch_add(1, Relaxed);
        let settings = *flow.settings.lock();
        if !settings.fallback_to_local {
            return TokenAnswer::Unavailable;
        }
        let now_ms = self.config.now_ms();
        let share = |threshold| flow.share(threshold, settings.avg_local);
        let admitted = flow
            .fallback
            .lock()
            .admit(asked, settings.window_ms, now_ms, share);
        match admitted {
            Some(false) => TokenAnswer::Refused,
            // Within the share, or no room to count it: the local check.
            Some(true) | None => TokenAnswer::Unavailable,
        }
    }
}

/// The values of an entry, each once (a value twice in a collection asks
/// twice the permits), with their encodings.
fn asked_of(values: &[ParamToken<'_>], permits: u32) -> Vec<Asked> {
    let mut asked: Vec<Asked> = Vec::with_capacity(values.len());
    for token in values {
        let field = field_of(token.value());
        match asked.iter_mut().find(|a| a.field == field) {
            Some(same) => same.permits += u64::from(permits),
            None => asked.push(Asked {
                field,
                threshold: token.threshold(),
                permits: u64::from(permits),
            }),
        }
    }
    asked
}
