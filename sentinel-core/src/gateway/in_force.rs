//! What an adapter reads of the gateway kinds in force: the API
//! definitions compiled, and for each resource the gateway rules name,
//! what each argument of its entries is.

use std::fmt;
use std::sync::Arc;

use crate::sync::atomic::{AtomicU32, Ordering};

use super::compiled::{ApiSet, CompiledApi, GatewaySet};
use super::matcher::ValueMatcher;
use super::model::{ApiDefinition, GatewayParamItem, GatewayRule};
use crate::Sentinel;
use crate::rules::RuleSet;

/// The API definitions and gateway rules in force on an instance, as one
/// load left them: an adapter compiles what it reads per request from
/// them once, and per request asks [`is_current`](Self::is_current)
/// whether they are still in force: one atomic read of the instance's
/// [`rules_version`](Sentinel::rules_version), compared with the version
/// they were last found in force at; after a load of any kind since,
/// [`is_in_force`](Self::is_in_force) (two pointer comparisons) decides.
///
/// ```
/// use sentinel_flow_core::gateway::{GatewayArgument, GatewayParamItem, GatewayRule};
/// use sentinel_flow_core::{ManualClock, Sentinel};
///
/// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
/// let before = sentinel.gateway_in_force();
/// sentinel.gateway_rules().load(vec![
///     GatewayRule::route("/a", 5.0),
///     GatewayRule::route("/a", 1.0).param_item(GatewayParamItem::header("x-api-key")),
/// ])?;
/// assert!(!before.is_in_force(&sentinel));
/// assert_ne!(sentinel.rules_version(), before.version());
/// let now = sentinel.gateway_in_force();
/// let (resource, args) = now.arguments().remove(0);
/// assert_eq!(resource, "/a");
/// assert!(matches!(args[..], [GatewayArgument::Constant, GatewayArgument::Item { .. }]));
/// // Another kind's load leaves them in force.
/// sentinel.flow_rules().load(vec![])?;
/// assert!(now.is_in_force(&sentinel));
/// assert!(now.is_current(&sentinel));
/// # Ok::<(), sentinel_flow_core::RuleErrors>(())
/// ```
pub struct GatewayInForce {
    apis: Arc<ApiSet>,
    rules: Arc<GatewaySet>,
    version: u32,
    /// The instance they were read from (versions are per instance).
    instance: u64,
    /// The version of the instance's rules at which these were last
    /// found in force (see [`current_at`]).
    checked: AtomicU32,
}

impl Clone for GatewayInForce {
    fn clone(&self) -> Self {
        GatewayInForce {
            apis: Arc::clone(&self.apis),
            rules: Arc::clone(&self.rules),
            version: self.version,
            instance: self.instance,
            checked: AtomicU32::new(self.checked.load(Ordering::Relaxed)),
        }
    }
}

/// Whether what `checked` memoizes is current at the rules' version
/// `now`: at once when it was last found in force at `now`; else as
/// `in_force` says, remembering `now` when it is.
///
/// Sound because a load stores its rule set before its version (with
/// `Release`; `now` is read with `Acquire`): `in_force` reads a set at
/// least as new as `now`, so `checked` never holds a version whose set
/// no longer has them. Storing an older version than the newest (a
/// reader that read `now` before a later load) is harmless: the next
/// reader finds it different and asks again. The loom model
/// (`in_force_loom_tests.rs`) checks that no reader that saw a load's
/// version takes what the load replaced as current.
#[inline]
pub(crate) fn current_at(checked: &AtomicU32, now: u32, in_force: impl FnOnce() -> bool) -> bool {
    if checked.load(Ordering::Relaxed) == now {
        return true;
    }
    recheck(checked, now, in_force)
}

#[cold]
fn recheck(checked: &AtomicU32, now: u32, in_force: impl FnOnce() -> bool) -> bool {
    let current = in_force();
    if current {
        checked.store(now, Ordering::Relaxed);
    }
    current
}

/// What one argument of a resource's entries is, for the gateway rule
/// that reads it.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum GatewayArgument<'a> {
    /// The rule has no parameter item: [`constant`](super::constant).
    Constant,
    /// The value of the rule's parameter item, when `matcher` matches it;
    /// else [`not_matched`](super::not_matched) (or, missing,
    /// [`missing`](super::missing) when the item counts missing values as
    /// one).
    Item {
        /// The item as loaded.
        item: &'a GatewayParamItem,
        /// Its pattern, compiled.
        matcher: &'a ValueMatcher,
    },
}

impl GatewayInForce {
    /// The gateway kinds of `set`, a rule set of the instance `instance`.
    fn of(set: &RuleSet, instance: u64) -> Self {
        GatewayInForce {
            apis: Arc::clone(&set.parts.api_definitions),
            rules: Arc::clone(&set.parts.gateway),
            version: set.version,
            instance,
            checked: AtomicU32::new(set.version),
        }
    }

    /// The version of the instance's rules they were read from (see
    /// [`Sentinel::rules_version`]).
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The API definitions, compiled, in load order.
    pub fn apis(&self) -> &[Arc<CompiledApi>] {
        &self.apis.apis
    }

    /// The API definitions as loaded.
    pub fn api_definitions(&self) -> &[ApiDefinition] {
        crate::rule::kind::CompiledKind::rules(&*self.apis)
    }

    /// The gateway rules as loaded.
    pub fn rules(&self) -> &[GatewayRule] {
        crate::rule::kind::CompiledKind::rules(&*self.rules)
    }

    /// Each resource the gateway rules name (a route or an API), with
    /// the arguments its entries pass, in order (see
    /// [`argument_indices`](super::argument_indices)).
    pub fn arguments(&self) -> Vec<(&str, Vec<GatewayArgument<'_>>)> {
        self.rules
            .set
            .by_resource
            .iter()
            .map(|(resource, list)| {
                let mut args = vec![GatewayArgument::Constant; list.len()];
                for rule in list.iter() {
                    if let (Some(slot), Some((item, matcher))) =
                        (args.get_mut(rule.placed.index), &rule.item)
                    {
                        *slot = GatewayArgument::Item { item, matcher };
                    }
                }
                (&**resource, args)
            })
            .collect()
    }

    /// Whether `other` holds the same definitions and rules (read from
    /// the same loads of the two kinds; loads of other kinds between them
    /// leave them the same).
    pub fn same_rules(&self, other: &GatewayInForce) -> bool {
        Arc::ptr_eq(&self.rules, &other.rules) && Arc::ptr_eq(&self.apis, &other.apis)
    }

    /// Whether these are still the definitions and rules in force on
    /// `sentinel` (no load of either kind since).
    pub fn is_in_force(&self, sentinel: &Sentinel) -> bool {
        let set = sentinel.rule_set();
        Arc::ptr_eq(&set.parts.gateway, &self.rules)
            && Arc::ptr_eq(&set.parts.api_definitions, &self.apis)
    }

    /// [`is_in_force`](Self::is_in_force) in one atomic read while no rule
    /// of any kind was loaded since it last answered `true`: what an
    /// adapter asks per request. A request that reads the version after a
    /// load of either kind never gets `true` from the definitions and
    /// rules that load replaced. Another instance than the one they were
    /// read from always gets `false`.
    #[inline]
    pub fn is_current(&self, sentinel: &Sentinel) -> bool {
        self.instance == sentinel.uid()
            && current_at(&self.checked, sentinel.rules_version(), || {
                self.is_in_force(sentinel)
            })
    }
}

/// The first plan of a set, made out of line (once per load) and kept in
/// the set (a request racing this one to it uses its own plan once).
#[cold]
fn first_plan<P: std::any::Any + Send + Sync>(
    set: &RuleSet,
    instance: u64,
    make: impl FnOnce(GatewayInForce) -> Arc<P>,
) -> Arc<P> {
    let plan = make(GatewayInForce::of(set, instance));
    let _ = set
        .gateway_plan
        .set(Arc::clone(&plan) as Arc<dyn std::any::Any + Send + Sync>);
    plan
}

#[cfg(all(test, loom))]
#[path = "in_force_loom_tests.rs"]
mod loom_tests;

#[cfg(all(test, not(loom)))]
mod tests {
    use crate::Sentinel;
    use crate::gateway::GatewayRule;

    #[test]
    fn rules_read_from_one_instance_are_never_current_on_another() {
        let (a, b) = (Sentinel::builder().build(), Sentinel::builder().build());
        a.load_gateway(vec![], vec![GatewayRule::route("/a", 1.0)])
            .unwrap();
        b.load_gateway(vec![], vec![GatewayRule::route("/b", 1.0)])
            .unwrap();
        // The same version on both: only the instance tells them apart.
        assert_eq!(a.rules_version(), b.rules_version());
        let of_a = a.gateway_in_force();
        assert!(of_a.is_current(&a));
        assert!(!of_a.is_in_force(&b));
        assert!(!of_a.is_current(&b));
    }
}

impl Sentinel {
    /// The API definitions and gateway rules in force (see
    /// [`gateway`](crate::gateway)).
    pub fn gateway_in_force(&self) -> GatewayInForce {
        GatewayInForce::of(&self.rule_set(), self.uid())
    }

    /// Calls `f` with what an adapter compiles from the API definitions
    /// and gateway rules in force (its plan), made by `make` from them at
    /// most once per set of rules in force: a load of any kind makes a new
    /// set, and `make` may hand back the plan it made before when its
    /// rules are the same ([`GatewayInForce::is_in_force`]).
    ///
    /// Per call this reads the rules' version and the thread's cache of
    /// the set in force, as an entry does, with no locked instruction; an
    /// entry made inside `f` finds the set in the same cache. Each set
    /// keeps one plan: a second adapter type on the same instance gets a
    /// plan made by `make` on every call.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use sentinel_flow_core::gateway::{GatewayInForce, GatewayRule};
    /// use sentinel_flow_core::{ManualClock, Sentinel};
    ///
    /// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
    /// sentinel.gateway_rules().load(vec![GatewayRule::route("/a", 5.0)])?;
    /// let plan = |rules: GatewayInForce| Arc::new(rules.rules().len());
    /// assert_eq!(sentinel.with_gateway_plan(plan, |rules: &usize| *rules), 1);
    /// sentinel.gateway_rules().load(vec![])?;
    /// assert_eq!(sentinel.with_gateway_plan(plan, |rules: &usize| *rules), 0);
    /// # Ok::<(), sentinel_flow_core::RuleErrors>(())
    /// ```
    #[inline]
    pub fn with_gateway_plan<P, R>(
        &self,
        make: impl FnOnce(GatewayInForce) -> Arc<P>,
        f: impl FnOnce(&P) -> R,
    ) -> R
    where
        P: std::any::Any + Send + Sync,
    {
        let rules = &self.engine.rules;
        rules.with_rules(rules.rules_version(), |set| {
            match set.gateway_plan.get() {
                Some(plan) => match (**plan).downcast_ref::<P>() {
                    Some(plan) => f(plan),
                    // Another adapter's type holds the set's place.
                    None => f(&make(GatewayInForce::of(set, self.uid()))),
                },
                None => f(&first_plan(set, self.uid(), make)),
            }
        })
    }

    /// The version of the rules in force: it changes with every load of
    /// any kind (0 before the first), and reading it is one atomic load.
    /// What is compiled from the rules in force (an adapter's plan, see
    /// [`GatewayInForce`]) is known current while the version is the one
    /// it was last found current at.
    pub fn rules_version(&self) -> u32 {
        self.engine.rules.rules_version()
    }
}

impl fmt::Debug for GatewayInForce {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GatewayInForce")
            .field("api_definitions", &self.apis.apis.len())
            .field("rules", &self.rules().len())
            .finish()
    }
}
