//! The listeners of an instance's rules, per kind, and of its breakers'
//! states.

use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::Mutex;

use crate::authority::AuthorityRule;
use crate::degrade::{DegradeRule, StateListeners};
use crate::flow::FlowRule;
use crate::param_flow::ParamFlowRule;
use crate::rule::Listener;
use crate::system::SystemRule;

/// An instance's rule listeners, per kind.
#[derive(Default)]
pub(crate) struct AllListeners {
    pub(crate) flow: Listeners<FlowRule>,
    pub(crate) authority: Listeners<AuthorityRule>,
    pub(crate) system: Listeners<SystemRule>,
    pub(crate) degrade: Listeners<DegradeRule>,
    pub(crate) param_flow: Listeners<ParamFlowRule>,
    /// Listeners of breaker states.
    pub(crate) states: StateListeners,
}

/// An instance's listeners of one kind.
pub(crate) struct Listeners<R: 'static> {
    list: Mutex<Vec<Listener<R>>>,
    /// The newest rule-set version announced to them.
    announced: AtomicU32,
}

impl<R> Default for Listeners<R> {
    fn default() -> Self {
        Listeners {
            list: Mutex::new(Vec::new()),
            announced: AtomicU32::new(0),
        }
    }
}

impl<R> Listeners<R> {
    /// Adds `listener`, to hear of the loads announced from now on.
    pub(crate) fn add(&self, listener: Listener<R>) {
        self.list.lock().push(listener);
    }

    /// Calls every listener with `rules`, the rules of set `version`, unless
    /// a newer version was announced already (two loads racing), so that
    /// listeners never end on an older list than the one in force. They run
    /// with no lock held: one may load rules or add listeners itself.
    pub(crate) fn announce(&self, version: u32, rules: &[R]) {
        let listeners = self.list.lock().clone();
        if self.announced.fetch_max(version, Ordering::AcqRel) < version {
            for listener in &listeners {
                listener(rules);
            }
        }
    }
}
