//! An instance's rules: the managers users load them through, the set in
//! force (every kind, swapped as one), and the per-thread cache that lets
//! an entry read the set without touching the `ArcSwap`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use arc_swap::{ArcSwap, Guard};
use parking_lot::Mutex;

use super::Sentinel;
use crate::flow::FlowKind;
use crate::rule::{RuleError, RuleErrors};
use crate::rules::budget::Tally;
use crate::rules::kinds::Described;
use crate::rules::{RuleManager, RuleSet, RuleSetParts};

/// Instance ids, for the per-thread rule cache.
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The rule set this thread last used: instance id, version, set.
    static RULES_CACHE: std::cell::RefCell<Option<(u64, u32, Arc<RuleSet>)>> =
        const { std::cell::RefCell::new(None) };
}

/// The rule set in force, its version, and what loads serialise on.
pub(crate) struct InstanceRules {
    /// Every rule kind, swapped as one.
    set: ArcSwap<RuleSet>,
    /// The version of `set`, stored after it (0: no rule loaded yet).
    version: AtomicU32,
    /// This instance among all (for the per-thread rule cache).
    uid: u64,
    /// Serialises rule loads (each builds on the set in force).
    pub(crate) lock: Mutex<()>,
    /// The most memory the rules in force may take, bytes.
    budget: u64,
    /// What the rules in force may take at most, bytes (their footprints
    /// added up when they were loaded).
    footprint: AtomicU64,
}

impl InstanceRules {
    /// No rules yet, with a budget of `budget` bytes for them.
    pub(crate) fn new(budget: u64) -> Self {
        InstanceRules {
            set: ArcSwap::from_pointee(RuleSet::default()),
            version: AtomicU32::new(0),
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
            lock: Mutex::new(()),
            budget,
            footprint: AtomicU64::new(0),
        }
    }
}

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
    /// This instance among all.
    pub(crate) fn uid(&self) -> u64 {
        self.rules.uid
    }

    /// The rule set in force.
    pub(crate) fn rule_set(&self) -> Guard<Arc<RuleSet>> {
        self.rules.set.load()
    }

    /// The version of the rule set in force (0 before any load).
    #[inline(always)]
    pub(crate) fn rules_version(&self) -> u32 {
        self.rules.version.load(Ordering::Acquire)
    }

    /// As [`with_rules`](Self::with_rules), with `None` while no rule was
    /// ever loaded (version 0), without touching the thread's cache.
    #[inline(always)]
    pub(crate) fn with_rules_if_any<T>(
        &self,
        version: u32,
        f: impl FnOnce(Option<&RuleSet>) -> T,
    ) -> T {
        let mut f = Some(f);
        if version != 0 {
            return self.with_rules(
                version,
                #[inline(always)]
                |rules| (f.take().expect("called once"))(Some(rules)),
            );
        }
        (f.take().expect("called once"))(None)
    }

    /// Calls `f` with the rule set of `version` (the one in force). Each
    /// thread caches the set it last used, so while rules stay unchanged
    /// this costs a thread-local read and a compare, where
    /// `ArcSwap::load` costs two locked instructions.
    #[inline(always)]
    pub(crate) fn with_rules<T>(&self, version: u32, f: impl FnOnce(&RuleSet) -> T) -> T {
        let mut f = Some(f);
        let uid = self.rules.uid;
        let cached = RULES_CACHE.try_with(
            #[inline(always)]
            |cache| {
                let fresh = matches!(
                    cache.try_borrow().as_deref(),
                    Ok(Some((id, v, _))) if *id == uid && *v == version
                );
                if !fresh {
                    // Refill, unless a caller up the stack is reading the cache
                    // (a user slot entering a resource from inside a check).
                    *cache.try_borrow_mut().ok()? =
                        Some((uid, version, self.rules.set.load_full()));
                }
                let guard = cache.try_borrow().ok()?;
                let (_, _, set) = guard.as_ref()?;
                Some((f.take()?)(set))
            },
        );
        match (cached, f) {
            (Ok(Some(result)), _) => result,
            (_, Some(f)) => f(&self.rules.set.load()),
            (_, None) => unreachable!("the closure ran but gave no result"),
        }
    }

    /// The most memory the rules in force may take, in bytes, as the rule
    /// memory budget counts it (see
    /// [`SentinelBuilder::rule_memory_budget`](crate::SentinelBuilder::rule_memory_budget)).
    pub fn rule_memory(&self) -> u64 {
        self.rules.footprint.load(Ordering::Relaxed)
    }

    /// The instance's rule memory budget, in bytes.
    pub fn rule_memory_budget(&self) -> u64 {
        self.rules.budget
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
        let guard = self.rules.lock.lock();
        let current = self.rules.set.load_full();
        let version = current.version.wrapping_add(1).max(1);
        let mut parts = current.parts.clone();
        let mut tally = Tally::new(self.rules.budget);
        let footprint =
            change(&current, &mut tally, &mut parts).map_err(|error| RuleErrors(vec![error]))?;
        // Before the set is visible: entries make its rules' nodes past the
        // caps.
        self.reserve_names(&parts)?;
        self.rules.footprint.store(footprint, Ordering::Relaxed);
        let next = Arc::new(RuleSet::build(version, parts));
        self.rules.set.store(Arc::clone(&next));
        self.rules.version.store(version, Ordering::Release);
        // While `current` keeps the rules it replaces alive: their block
        // log lines show them (the tally holds rules weakly).
        self.blocks.gather(self.uid(), self.now_ms());
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
