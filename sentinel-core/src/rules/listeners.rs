//! The listeners of an instance's rules, per kind, and of its breakers'
//! states.

use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::Mutex;

use crate::rule::Listener;
use crate::rule::kind::RuleKind;

/// Makes [`AllListeners`] from the list of kinds.
macro_rules! all_listeners {
    ($($field:ident $variant:ident [$($kind:tt)*] [$($rule:tt)*] $accessor:ident $name:literal $exception:literal
        $doc:literal $book_doc:literal;)*) => {
        /// An instance's rule listeners, per kind.
        #[derive(Default)]
        pub(crate) struct AllListeners {
            $(
                #[doc = $book_doc]
                pub(crate) $field: Listeners<<crate::$($kind)* as RuleKind>::Rule>,
            )*
        }
    };
}
rule_kinds!(all_listeners);

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
