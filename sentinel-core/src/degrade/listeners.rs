//! An instance's listeners of breaker states, told on the entry path when
//! a breaker changes state.

use std::sync::Arc;

use arc_swap::ArcSwap;

use super::breaker::StateChange;

/// A listener of circuit breakers' changes of state. One that panics is
/// reported in an error log and skipped; the change goes on.
pub type StateListener = Arc<dyn Fn(&StateChange<'_>) + Send + Sync>;

/// An instance's listeners of breaker states, read without a lock when a
/// breaker changes state.
#[derive(Default)]
pub(crate) struct StateListeners(ArcSwap<Vec<StateListener>>);

impl StateListeners {
    /// Tells every listener of `change`. A listener that panics is
    /// reported and skipped: its panic must not stop half-way the
    /// transition it hears of (a probe let through but not yet held would
    /// keep its breaker half-open), nor abort a thread that is unwinding
    /// (a probe given back as a panic unwinds through the chain).
    pub(crate) fn notify(&self, change: &StateChange<'_>) {
        for listener in self.0.load().iter() {
            let heard = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| listener(change)));
            if heard.is_err() {
                tracing::error!(
                    resource = %change.rule.resource,
                    rule = %change.rule,
                    prev = %change.prev,
                    next = %change.next,
                    "sentinel: a circuit breaker state listener panicked"
                );
            }
        }
    }

    pub(crate) fn add(&self, listener: StateListener) {
        self.0.rcu(|list| {
            let mut list = Vec::clone(list);
            list.push(Arc::clone(&listener));
            list
        });
    }
}
