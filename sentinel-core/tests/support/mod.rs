//! What the integration tests of `sentinel-flow-core` share, so that each test
//! reads as the scenario it checks: an instance of its own on a
//! [`ManualClock`], rules loaded in one line, `n` entries tried at one
//! instant, calls that take a response time or end with an error, the rule
//! behind a block, the errors of a refused load; and in submodules a strict
//! reader of the Prometheus text ([`prometheus`]), a counter of `tracing`
//! warnings ([`warnings`]) and a driver of entries queued by `enter_async`
//! ([`queue`]).
//!
//! Each test binary uses a part of this module; `dead_code` is allowed for
//! the rest.

#![allow(dead_code)]

pub(crate) mod prometheus;
pub(crate) mod queue;
pub(crate) mod warnings;

use sentinel_flow_core::adaptive::AdaptiveRule;
use sentinel_flow_core::authority::AuthorityRule;
use sentinel_flow_core::degrade::DegradeRule;
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::gateway::GatewayRule;
use sentinel_flow_core::node::StatisticNode;
use sentinel_flow_core::param_flow::ParamFlowRule;
use sentinel_flow_core::system::SystemRule;
use sentinel_flow_core::{
    BlockError, Entry, ManualClock, Rule, RuleErrors, RuleManager, Sentinel, SentinelBuilder,
};

/// The instances' start time: 2023-11-14 22:13:20 UTC, on a whole second,
/// so that statistics buckets and seconds line up with it.
pub(crate) const T0: u64 = 1_700_000_000_000;

/// An instance of its own on a [`ManualClock`] at [`T0`], and the clock.
pub(crate) fn instance() -> (ManualClock, Sentinel) {
    instance_with(|builder| builder)
}

/// As [`instance`], with more set on the builder (a slot, caps, ...).
pub(crate) fn instance_with(
    configure: impl FnOnce(SentinelBuilder) -> SentinelBuilder,
) -> (ManualClock, Sentinel) {
    let clock = ManualClock::new(T0);
    let sentinel = configure(Sentinel::builder().clock(clock.clone())).build();
    (clock, sentinel)
}

/// A rule kind, with the instance's manager of its rules.
pub(crate) trait Kind: Rule + Clone {
    /// The manager of this kind's rules on `sentinel`.
    fn manager(sentinel: &Sentinel) -> RuleManager<'_, Self>;
}

/// `Kind` for each built-in rule type, by the name of its manager.
macro_rules! kinds {
    ($($rule:ty => $manager:ident),* $(,)?) => {
        $(impl Kind for $rule {
            fn manager(sentinel: &Sentinel) -> RuleManager<'_, Self> {
                sentinel.$manager()
            }
        })*
    };
}

kinds! {
    FlowRule => flow_rules,
    DegradeRule => degrade_rules,
    ParamFlowRule => param_flow_rules,
    AuthorityRule => authority_rules,
    SystemRule => system_rules,
    AdaptiveRule => adaptive_rules,
    GatewayRule => gateway_rules,
}

/// Loads `rules` as the whole list of their kind (the other kinds keep
/// theirs); panics if the list is refused.
pub(crate) fn load<R: Kind>(sentinel: &Sentinel, rules: impl IntoIterator<Item = R>) {
    let rules: Vec<R> = rules.into_iter().collect();
    if let Err(errors) = R::manager(sentinel).load(rules) {
        panic!("rules refused: {errors}");
    }
}

/// `(kind, index, field)` of each error of a refused load, in order.
pub(crate) fn refusals(errors: &RuleErrors) -> Vec<(&'static str, usize, &'static str)> {
    errors
        .errors()
        .iter()
        .map(|e| (e.kind, e.index, e.field))
        .collect()
}

/// The statistics of resource `name`; panics if it has no node.
pub(crate) fn stats<'s>(sentinel: &'s Sentinel, name: &str) -> &'s StatisticNode {
    sentinel
        .resource_node(name)
        .unwrap_or_else(|| panic!("no resource node for {name}"))
        .stats()
}

/// The rule of kind `R` that refused an entry; panics unless a rule of
/// that kind did (named by the error and of the error's kind).
pub(crate) fn rule_of<R: Rule>(err: &BlockError) -> &R {
    let rule = err.rule_as::<R>().unwrap_or_else(|| {
        panic!(
            "a block names its {}: {err}",
            std::any::type_name::<R>()
                .rsplit("::")
                .next()
                .unwrap_or("rule")
        )
    });
    assert_eq!(err.kind(), rule.block_kind(), "{err}");
    rule
}

/// How many of `n` tries of `enter` (each at the current time, each entry
/// exited at once) were let through.
pub(crate) fn admitted<T, E>(n: usize, mut enter: impl FnMut() -> Result<T, E>) -> usize {
    (0..n).filter(|_| enter().is_ok()).count()
}

/// How many of `n` plain entries of `resource`, now, were let through.
pub(crate) fn admit(sentinel: &Sentinel, resource: &str, n: usize) -> usize {
    admitted(n, || sentinel.entry(resource))
}

/// An entry of `resource`; panics if it is refused.
pub(crate) fn enter<'s>(sentinel: &'s Sentinel, resource: &str) -> Entry<'s> {
    sentinel
        .entry(resource)
        .unwrap_or_else(|err| panic!("entry of {resource} refused: {err}"))
}

/// One call that succeeds at once; panics if it is refused.
pub(crate) fn succeed(sentinel: &Sentinel, resource: &str) {
    drop(enter(sentinel, resource));
}

/// One call that fails at once; panics if it is refused.
pub(crate) fn fail(sentinel: &Sentinel, resource: &str) {
    enter(sentinel, resource).set_error("boom");
}

/// One call that succeeds after `rt_ms` on the clock; panics if it is
/// refused.
pub(crate) fn call_taking(clock: &ManualClock, sentinel: &Sentinel, resource: &str, rt_ms: u64) {
    let entry = enter(sentinel, resource);
    clock.advance_ms(rt_ms);
    drop(entry);
}

/// One call of `rt_ms` on the clock to `resource`, ending with an error if
/// `error`; whether it was let through (a refused call takes no time).
pub(crate) fn call(
    clock: &ManualClock,
    sentinel: &Sentinel,
    resource: &str,
    rt_ms: u64,
    error: bool,
) -> bool {
    match sentinel.entry(resource) {
        Ok(entry) => {
            if error {
                entry.set_error("boom");
            }
            clock.advance_ms(rt_ms);
            drop(entry);
            true
        }
        Err(_) => false,
    }
}
