//! `RuleManager`: load, read and listen to one kind of an instance's rules,
//! through the kind's [`Kind`] descriptor. What a manager adds for one kind
//! alone is in a child module named after the kind.

mod adaptive;
mod degrade;
mod gateway;
mod param_flow;

use std::fmt;
use std::sync::Arc;

use super::Sentinel;
use crate::rule::names::too_long;
use crate::rule::{RuleError, RuleErrors};
use crate::rules::kinds::Kind;

/// One kind of an instance's rules: load, read, listen.
///
/// ```
/// use sentinel_flow_core::flow::FlowRule;
/// use sentinel_flow_core::{ManualClock, Sentinel};
///
/// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
/// let rules = sentinel.flow_rules();
/// rules.on_change(|now| println!("{} flow rules", now.len()));
/// rules.load(vec![FlowRule::new("GET:/orders", 100.0)])?;
/// assert_eq!(rules.rules().len(), 1);
/// // One bad rule refuses the whole list; the rules in force stay.
/// assert!(rules.load(vec![FlowRule::new("GET:/orders", -1.0)]).is_err());
/// assert_eq!(rules.rules()[0].count, 100.0);
/// # Ok::<(), sentinel_flow_core::RuleErrors>(())
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
    /// [`max_name_len`](crate::SentinelBuilder::max_name_len) is one), and
    /// so when the rules would take the instance's rules (this kind's new
    /// ones, the other kinds' in force) past its
    /// [`rule_memory_budget`](crate::SentinelBuilder::rule_memory_budget).
    /// Unchanged rules keep their state; statistics are never reset. Every
    /// resource, context and origin the rules name gets its node when an
    /// entry first uses it, outside the caps, so that the rules apply
    /// whatever names traffic made before; past
    /// [`max_rule_names`](crate::SentinelBuilder::max_rule_names) distinct
    /// names the load is refused.
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
        errors.extend((self.kind.across)(&rules));
        if !errors.is_empty() {
            let errors = RuleErrors(errors);
            tracing::warn!(kind = self.kind.name, %errors, "sentinel: rules refused");
            return Err(errors);
        }
        let count = rules.len();
        let kind = self.kind;
        let set = self
            .sentinel
            .update_rules(|current, tally, parts| {
                tally.in_force_except(current, &[kind.name]);
                tally.loaded_of(kind, &rules);
                let footprint = tally.finish()?;
                (kind.replace)(parts, rules);
                Ok(footprint)
            })
            .inspect_err(|errors| {
                tracing::warn!(kind = self.kind.name, %errors, "sentinel: rules refused");
            })?;
        tracing::info!(
            kind = self.kind.name,
            rules = count,
            "sentinel: rules loaded"
        );
        (self.kind.listeners)(&self.sentinel.listeners)
            .announce(set.version, (self.kind.rules)(&set));
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
        (self.kind.listeners)(&self.sentinel.listeners).add(Arc::new(listener));
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
