//! The rule set in force (every kind, swapped as one), its version, and
//! the per-thread cache that lets an entry read the set without touching
//! the `ArcSwap`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use arc_swap::{ArcSwap, Guard};
use parking_lot::Mutex;

use crate::rules::RuleSet;
use crate::rules::list::{ResourceRules, RuleSetParts};

thread_local! {
    /// The rule set this thread last used: instance id, version, set.
    static RULES_CACHE: std::cell::RefCell<Option<(u64, u32, Arc<RuleSet>)>> =
        const { std::cell::RefCell::new(None) };
}

/// The rule set in force, its version, and what loads serialise on.
pub(crate) struct InstanceRules {
    /// Every rule kind, swapped as one.
    pub(crate) set: ArcSwap<RuleSet>,
    /// The version of `set`, stored after it (0: no rule loaded yet).
    pub(crate) version: AtomicU32,
    /// This instance among all (for the per-thread rule cache).
    pub(crate) uid: u64,
    /// Serialises rule loads (each builds on the set in force).
    pub(crate) lock: Mutex<()>,
    /// The most memory the rules in force may take, bytes.
    pub(crate) budget: u64,
    /// What the rules in force may take at most, bytes (their footprints
    /// added up when they were loaded).
    pub(crate) footprint: AtomicU64,
    /// The rules of a resource without rules: what the chain reads for its
    /// entries when user slots make it run.
    pub(crate) no_rules: ResourceRules,
}

impl InstanceRules {
    /// No rules yet, with a budget of `budget` bytes for them.
    pub(crate) fn new(uid: u64, budget: u64) -> Self {
        InstanceRules {
            set: ArcSwap::from_pointee(RuleSet::default()),
            version: AtomicU32::new(0),
            uid,
            lock: Mutex::new(()),
            budget,
            footprint: AtomicU64::new(0),
            no_rules: ResourceRules::of(&RuleSetParts::default(), ""),
        }
    }
}

impl InstanceRules {
    /// The rule set in force.
    pub(crate) fn rule_set(&self) -> Guard<Arc<RuleSet>> {
        self.set.load()
    }

    /// The version of the rule set in force (0 before any load).
    #[inline(always)]
    pub(crate) fn rules_version(&self) -> u32 {
        self.version.load(Ordering::Acquire)
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
        let uid = self.uid;
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
                    *cache.try_borrow_mut().ok()? = Some((uid, version, self.set.load_full()));
                }
                let guard = cache.try_borrow().ok()?;
                let (_, _, set) = guard.as_ref()?;
                Some((f.take()?)(set))
            },
        );
        match (cached, f) {
            (Ok(Some(result)), _) => result,
            (_, Some(f)) => f(&self.set.load()),
            (_, None) => unreachable!("the closure ran but gave no result"),
        }
    }
}
