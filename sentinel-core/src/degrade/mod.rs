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
//!   well it closes, with an empty window. A probe that never runs (a later
//!   check blocks it, or it is dropped) opens it again too, so it cannot wait
//!   forever (Sentinel issue 1638).
//!
//! Every change of state is one compare-and-swap, is logged with `tracing`
//! at info level, and is reported to listeners as a [`StateChange`]. A rule
//! reloaded unchanged keeps its breaker, state and window included.

// wired by the slot chain in a following change
#![allow(dead_code)]

mod breaker;
mod rule;
mod window;

// wired by the slot chain in a following change
#[allow(unused_imports)]
pub(crate) use breaker::{Admission, CircuitBreaker, Probe};
pub use breaker::{BreakerSnapshot, BreakerState, StateChange};
pub use rule::{DegradeGrade, DegradeRule, MAX_PROBE_NUM, MAX_STAT_INTERVAL_MS};
