//! What a degrade [`RuleManager`] adds: the breakers' states, and
//! listeners of their changes.

use std::sync::Arc;

use super::RuleManager;
use crate::degrade::{BreakerSnapshot, DegradeRule, StateChange};

impl RuleManager<'_, DegradeRule> {
    /// Calls `listener` on every change of state of a breaker of this
    /// instance (Sentinel's `onTransformState`), on the thread whose entry
    /// or exit made the change: keep it short.
    pub fn on_state_change(&self, listener: impl Fn(&StateChange<'_>) + Send + Sync + 'static) {
        self.sentinel.engine.parts.states.add(Arc::new(listener));
    }

    /// Every rule in force with its breaker's state and window now.
    pub fn breakers(&self) -> Vec<(DegradeRule, BreakerSnapshot)> {
        let now = self.sentinel.now_ms();
        let set = self.sentinel.rule_set();
        set.parts
            .degrade
            .by_resource
            .values()
            .flat_map(|list| list.iter())
            .map(|breaker| ((**breaker.rule()).clone(), breaker.snapshot(now)))
            .collect()
    }
}
