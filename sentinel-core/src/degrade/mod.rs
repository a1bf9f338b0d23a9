//! Circuit breaking: stop calling a resource that is too slow or fails too
//! often ([`DegradeRule`]).
//!
//! Each rule has a circuit breaker, which keeps a window of its own over
//! `stat_interval_ms` (calls completed, and of those the slow or failed ones)
//! and a state:
//!
//! - **closed**: calls pass. Each completion is counted; once the window holds
//!   `min_request_amount` calls, the breaker trips open when the slow-call
//!   ratio is over `slow_ratio_threshold` (or equals it at 1.0), the error
//!   ratio is over `count`, or the error count is over `count`, as in
//!   Sentinel.
//! - **open**: calls are refused with
//!   [`BlockKind::Degrade`](crate::BlockKind::Degrade) for `time_window_sec`.
//! - **half-open**: after that time, exactly `probe_num` calls are let through
//!   as probes, however many threads ask at once; the others are refused. The
//!   first probe that completes badly (slow, or with an error) opens the
//!   breaker again for another `time_window_sec`; when all of them complete
//!   well it closes, with an empty window. A probe whose call panics (its
//!   entry dropped as the thread unwinds) failed, whatever the grade. A
//!   probe that never runs (a later check blocks it or panics, or it is
//!   dropped) opens it again too, so it cannot wait forever
//!   (Sentinel issue 1638).
//!
//! Every change of state is one compare-and-swap, is logged with `tracing`
//! at info level, and is reported to listeners as a [`StateChange`]. A rule
//! reloaded unchanged keeps its breaker, state and window included.

//! ```
//! use sentinel_flow_core::degrade::{BreakerState, DegradeGrade, DegradeRule};
//! use sentinel_flow_core::{BlockKind, ManualClock, Sentinel};
//!
//! let clock = ManualClock::new(1_700_000_000_000);
//! let sentinel = Sentinel::builder().clock(clock.clone()).build();
//! sentinel.degrade_rules().load(vec![DegradeRule {
//!     min_request_amount: 2,
//!     time_window_sec: 5,
//!     ..DegradeRule::new("GET:/stock", DegradeGrade::ErrorCount, 1.0)
//! }])?;
//!
//! for _ in 0..2 {
//!     let entry = sentinel.entry("GET:/stock").unwrap();
//!     entry.set_error("timeout");
//! }
//! let refused = sentinel.entry("GET:/stock").unwrap_err();
//! assert_eq!(refused.kind(), BlockKind::Degrade);
//! assert_eq!(sentinel.degrade_rules().breakers()[0].1.state, BreakerState::Open);
//!
//! clock.advance_ms(5_000);
//! drop(sentinel.entry("GET:/stock").unwrap()); // the probe succeeds
//! assert_eq!(sentinel.degrade_rules().breakers()[0].1.state, BreakerState::Closed);
//! # Ok::<(), sentinel_flow_core::RuleErrors>(())
//! ```
//!
//! The module is the kind alone: `rule.rs` the rule as loaded,
//! `breaker.rs` and `window.rs` the breaker and its window, here its
//! compiled form, the check and the completion. The breakers' states are
//! read through the instance's rule set, which composes every kind
//! ([`RuleManager::breakers`](crate::RuleManager::breakers),
//! [`RuleManager::on_state_change`](crate::RuleManager::on_state_change)).

mod breaker;
mod fields;
mod listeners;
mod rule;
mod slot;
mod window;

use std::sync::Arc;

pub(crate) use breaker::{Admission, CircuitBreaker, Probe};
pub use breaker::{BreakerSnapshot, BreakerState, StateChange};
pub use listeners::StateListener;
pub(crate) use listeners::StateListeners;
pub use rule::{
    DegradeGrade, DegradeRule, MAX_ERROR_COUNT, MAX_MIN_REQUEST_AMOUNT, MAX_PROBE_NUM,
    MAX_SLOW_RT_MS, MAX_STAT_INTERVAL_MS, MAX_TIME_WINDOW_SEC,
};
pub(crate) use slot::DegradeKind;

use crate::rule::compiled::{CompiledRule, List};
use crate::rule::footprint::Footprint;

impl CompiledRule for CircuitBreaker {
    type Rule = DegradeRule;
    type PerResource = List<Self>;

    fn compile(rule: &DegradeRule) -> Self {
        CircuitBreaker::new(Arc::new(rule.clone()))
    }

    fn source(&self) -> &DegradeRule {
        self.rule()
    }

    fn resource(rule: &DegradeRule) -> &str {
        &rule.resource
    }

    fn per_resource(list: List<Self>) -> List<Self> {
        list
    }
}

impl DegradeRule {
    /// The most memory the rule may take once loaded: the rule, its
    /// breaker (window included) and its resource's name.
    pub(crate) fn footprint(&self) -> Footprint {
        self.footprint_compiled_as::<CircuitBreaker>()
    }
}
