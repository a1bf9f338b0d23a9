//! An instance's rules: the managers users load them through, the set in
//! force (every kind, swapped as one), and the per-thread cache that lets
//! an entry read the set without touching the `ArcSwap`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use arc_swap::Guard;

use super::RuleManager;
use super::Sentinel;
use crate::flow::FlowKind;
use crate::rule::{RuleError, RuleErrors};
use crate::rules::budget::Tally;
use crate::rules::kinds::Described;
use crate::rules::{RuleSet, RuleSetParts};

/// Makes the managers' accessors from the list of kinds.
macro_rules! managers {
    ($($field:ident $variant:ident [$($kind:tt)*] [$($rule:tt)*] $accessor:ident $name:literal $exception:literal
        $doc:literal $book_doc:literal;)*) => {
        impl Sentinel {
            $(
                #[doc = concat!("The ", $name, " rules of this instance (", $book_doc, "): load, read, listen.")]
                pub fn $accessor(&self) -> RuleManager<'_, crate::$($rule)*> {
                    RuleManager::new(self, &<crate::$($kind)* as Described>::KIND)
                }
            )*
        }
    };
}
rule_kinds!(managers);

impl Sentinel {
    /// The rule set in force.
    pub(crate) fn rule_set(&self) -> Guard<Arc<RuleSet>> {
        self.engine.rules.rule_set()
    }

    /// The most memory the rules in force may take, in bytes, as the rule
    /// memory budget counts it (see
    /// [`SentinelBuilder::rule_memory_budget`](crate::SentinelBuilder::rule_memory_budget)).
    pub fn rule_memory(&self) -> u64 {
        self.engine.rules.footprint.load(Ordering::Relaxed)
    }

    /// The instance's rule memory budget, in bytes.
    pub fn rule_memory_budget(&self) -> u64 {
        self.engine.rules.budget
    }

    /// Builds and swaps in a new rule set from the one in force, one load at
    /// a time. `change` is given the set in force and a tally against the
    /// rule memory budget: it adds up the rules the load puts in force and
    /// changes the parts only if [`Tally::finish`] accepts them; its error
    /// leaves the set in force as it is. Refused too, with nothing changed,
    /// when the new set would mention more names than `max_rule_names`.
    pub(crate) fn update_rules(
        &self,
        change: impl FnOnce(&RuleSet, &mut Tally, &mut RuleSetParts) -> Result<u64, RuleError>,
    ) -> Result<Arc<RuleSet>, RuleErrors> {
        let guard = self.engine.rules.lock.lock();
        let current = self.engine.rules.set.load_full();
        let version = current.version.wrapping_add(1).max(1);
        let mut parts = current.parts.clone();
        let mut tally = Tally::new(self.engine.rules.budget);
        let footprint =
            change(&current, &mut tally, &mut parts).map_err(|error| RuleErrors(vec![error]))?;
        // Before the set is visible: entries make its rules' nodes past the
        // caps.
        self.reserve_names(&parts)?;
        self.engine
            .rules
            .footprint
            .store(footprint, Ordering::Relaxed);
        let next = Arc::new(RuleSet::build(version, parts));
        self.engine.rules.set.store(Arc::clone(&next));
        // After the set: whoever reads this version (`Acquire`) reads this
        // set or a newer one, which the per-thread rule cache and the
        // gateway's memo (`gateway::in_force::current_at`, with its loom
        // model) rely on.
        self.engine.rules.version.store(version, Ordering::Release);
        // While `current` keeps the rules it replaces alive: their block
        // log lines show them (the tally holds rules weakly).
        self.engine.parts.ledger.gather(self.uid(), self.now_ms());
        drop(guard);
        // Once per load of flow rules, not per entry.
        if !Arc::ptr_eq(&current.parts.flow, &next.parts.flow) {
            self.warn_unattached_cluster_rules(next.rules_of::<FlowKind>());
        }
        if !Arc::ptr_eq(&current.parts.param_flow, &next.parts.param_flow) {
            crate::param_flow::warn_cluster_rules(
                next.rules_of::<crate::param_flow::ParamFlowKind>(),
            );
        }
        Ok(next)
    }
}
