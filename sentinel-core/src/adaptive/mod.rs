//! Adaptive concurrency: a concurrency limit per resource that finds
//! itself from the calls' response times ([`AdaptiveRule`]), by Netflix
//! concurrency-limits' Gradient2, Vegas or AIMD.
//!
//! A call is admitted while fewer calls than the rule's current limit are
//! in flight under it, and refused with [`BlockKind::Adaptive`] otherwise.
//! Every admitted call's response time (and whether it recorded an error)
//! is gathered into a sample window; once a window is over (`window_ms`
//! and `min_samples`), the algorithm folds it and moves the limit, between
//! `min_limit` and `max_limit`. The limit and the calls admitted are one
//! atomic word: never more calls are let in under a rule's state than the
//! limit in force. A rule whose fields changed on a reload gets a new
//! state, counting only the calls admitted under it: the calls still in
//! flight under the old one are not counted against the new limit.
//!
//! ```
//! use sentinel_flow_core::adaptive::{AdaptiveAlgorithm, AdaptiveRule};
//! use sentinel_flow_core::{BlockKind, ManualClock, Sentinel};
//!
//! let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
//! sentinel.adaptive_rules().load(vec![AdaptiveRule {
//!     initial_limit: 2,
//!     min_limit: 1,
//!     ..AdaptiveRule::new("GET:/orders", AdaptiveAlgorithm::gradient2())
//! }])?;
//!
//! let first = sentinel.entry("GET:/orders").unwrap();
//! let second = sentinel.entry("GET:/orders").unwrap();
//! let refused = sentinel.entry("GET:/orders").unwrap_err();
//! assert_eq!(refused.kind(), BlockKind::Adaptive);
//! drop((first, second));
//! assert!(sentinel.entry("GET:/orders").is_ok());
//! # Ok::<(), sentinel_flow_core::RuleErrors>(())
//! ```
//!
//! A rule loaded again unchanged keeps its learned limit and its calls in
//! flight; a changed or removed rule's state goes.
//!
//! The module is the kind alone: `rule.rs` the rule as loaded,
//! `algorithm.rs` the three algorithms, `gate.rs` the admission protocol
//! (with its loom model), `limiter.rs` one rule compiled (gate, window,
//! algorithm; the window's claim and fold model-checked in
//! `limiter_loom.rs`), `slot.rs` the check and the exit.

mod algorithm;
mod fields;
mod gate;
mod limiter;
mod rule;
mod slot;

use std::sync::Arc;

pub(crate) use limiter::AdaptiveLimiter;
pub use limiter::AdaptiveSnapshot;
pub use rule::{
    ADAPTIVE_APP_DEFAULT, ADAPTIVE_APP_OTHER, AdaptiveAlgorithm, AdaptiveRule, MAX_ADAPTIVE_LIMIT,
    MAX_LONG_WINDOW, MAX_MIN_SAMPLES, MAX_PROBE_MULTIPLIER, MAX_RTT_TOLERANCE, MAX_TIMEOUT_MS,
    MAX_WINDOW_MS, MIN_WINDOW_MS,
};
pub(crate) use slot::{AdaptiveKind, AdaptiveRules};

use crate::rule::compiled::{CompiledRule, List};
use crate::rule::footprint::Footprint;

#[cfg(doc)]
use crate::BlockKind;

impl CompiledRule for AdaptiveLimiter {
    type Rule = AdaptiveRule;
    type PerResource = AdaptiveRules;

    fn compile(rule: &AdaptiveRule) -> Self {
        AdaptiveLimiter::new(Arc::new(rule.clone()))
    }

    fn source(&self) -> &AdaptiveRule {
        self.rule()
    }

    fn resource(rule: &AdaptiveRule) -> &str {
        &rule.resource
    }

    /// Rules naming one origin first, "default" last, as flow rules.
    fn rank(&self) -> u8 {
        match self.callers {
            limiter::Callers::Origin(_) => 0,
            limiter::Callers::Other => 1,
            limiter::Callers::Every => 2,
        }
    }

    fn per_resource(list: List<Self>) -> AdaptiveRules {
        AdaptiveRules::new(list)
    }
}

impl AdaptiveRule {
    /// The most memory the rule may take once loaded: the rule, its
    /// limiter and its names.
    pub(crate) fn footprint(&self) -> Footprint {
        self.footprint_compiled_as::<AdaptiveLimiter>()
    }
}
