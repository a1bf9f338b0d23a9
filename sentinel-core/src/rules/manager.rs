//! `RuleManager`: load, read and listen to one kind of an instance's rules.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::Mutex;

use super::names::{NamesOf, too_long};
use super::{RuleSet, RuleSetParts};
use crate::Sentinel;
use crate::rule::{RuleError, RuleErrors};

/// A listener of one kind's rules: called with the rules now in force.
pub type Listener<R> = Arc<dyn Fn(&[R]) + Send + Sync>;

/// The problems between the rules of one list.
pub(crate) type Across<R> = fn(&[R]) -> Vec<RuleError>;

/// What a manager needs to know of its kind.
pub(crate) struct Kind<R: 'static> {
    /// The kind's name in logs and errors: `flow`, `degrade`, ...
    pub(crate) name: &'static str,
    /// Every problem of a rule at a position in the list being loaded.
    pub(crate) problems: fn(&R, usize) -> Vec<RuleError>,
    /// The names a rule mentions, its resource first.
    pub(crate) names: NamesOf<R>,
    /// Problems between the rules of one list (flow ids shared by cluster
    /// rules with different thresholds), after each rule's own.
    pub(crate) across: Option<Across<R>>,
    /// The kind's rules in a set, as loaded.
    pub(crate) rules: fn(&RuleSet) -> &[R],
    /// Puts `rules`, compiled, into the parts of the next set (which hold
    /// the current set's; unchanged rules keep their state).
    pub(crate) replace: fn(&mut RuleSetParts, Vec<R>),
    pub(crate) listeners: fn(&Sentinel) -> &Listeners<R>,
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

/// One kind of an instance's rules: load, read, listen.
///
/// ```
/// use sentinel_core::flow::FlowRule;
/// use sentinel_core::{ManualClock, Sentinel};
///
/// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
/// let rules = sentinel.flow_rules();
/// rules.on_change(|now| println!("{} flow rules", now.len()));
/// rules.load(vec![FlowRule::new("GET:/orders", 100.0)])?;
/// assert_eq!(rules.rules().len(), 1);
/// // One bad rule refuses the whole list; the rules in force stay.
/// assert!(rules.load(vec![FlowRule::new("GET:/orders", -1.0)]).is_err());
/// assert_eq!(rules.rules()[0].count, 100.0);
/// # Ok::<(), sentinel_core::RuleErrors>(())
/// ```
pub struct RuleManager<'s, R: 'static> {
    pub(crate) sentinel: &'s Sentinel,
    kind: &'static Kind<R>,
}

impl<'s, R: Clone + Send + Sync + 'static> RuleManager<'s, R> {
    pub(crate) fn new(sentinel: &'s Sentinel, kind: &'static Kind<R>) -> Self {
        RuleManager { sentinel, kind }
    }

    /// Replaces every rule of this kind with `rules`, after checking all of
    /// them: when any is invalid nothing changes and every problem of every
    /// rule is returned (a name longer than the instance's
    /// [`max_name_len`](crate::SentinelBuilder::max_name_len) is one).
    /// Unchanged rules keep their state; statistics are never reset. The
    /// nodes of every resource, context and origin the rules name are made
    /// now, outside the caps, so that the rules apply whatever names
    /// traffic made before.
    pub fn load(&self, rules: Vec<R>) -> Result<(), RuleErrors> {
        let max_name_len = self.sentinel.max_name_len();
        let mut errors: Vec<RuleError> = rules
            .iter()
            .enumerate()
            .flat_map(|(i, rule)| {
                let mut found = (self.kind.problems)(rule, i);
                found.extend(too_long(
                    self.kind.name,
                    i,
                    &(self.kind.names)(rule),
                    max_name_len,
                ));
                found
            })
            .collect();
        if let Some(across) = self.kind.across {
            errors.extend(across(&rules));
        }
        if !errors.is_empty() {
            let errors = RuleErrors(errors);
            tracing::warn!(kind = self.kind.name, %errors, "sentinel: rules refused");
            return Err(errors);
        }
        let count = rules.len();
        let set = self
            .sentinel
            .update_rules(|parts| (self.kind.replace)(parts, rules));
        tracing::info!(
            kind = self.kind.name,
            rules = count,
            "sentinel: rules loaded"
        );
        (self.kind.listeners)(self.sentinel).announce(set.version, (self.kind.rules)(&set));
        Ok(())
    }

    /// The rules in force, as loaded.
    pub fn rules(&self) -> Vec<R> {
        (self.kind.rules)(&self.sentinel.rule_set()).to_vec()
    }

    /// Calls `listener` with the rules in force after each successful load
    /// of this kind (not for a load that a newer one overtook). It runs with
    /// no lock held: it may load rules or add listeners itself.
    pub fn on_change(&self, listener: impl Fn(&[R]) + Send + Sync + 'static) {
        (self.kind.listeners)(self.sentinel)
            .list
            .lock()
            .push(Arc::new(listener));
    }
}

impl<R: Clone + Send + Sync + 'static> fmt::Debug for RuleManager<'_, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleManager")
            .field("kind", &self.kind.name)
            .field("rules", &self.rules().len())
            .finish()
    }
}
