//! Integration tests of hot-parameter rules (Sentinel's param flow), one
//! file per topic: the token bucket per value with its items, `param_idx`,
//! list arguments, burst and long durations (`qps`), the rate limiter
//! (`rate_limiter`, its queue under `enter_async` in `rate_limiter::queue`),
//! the concurrency grade and counts given back when a later check refuses
//! (`concurrency`), bounded memory with a million values (`capacity`),
//! reloads (`reloads`), user key types (`keys`) and rules in cluster mode
//! asking the cluster service (`cluster`).
//!
//! Every test builds its own [`Sentinel`] on a [`ManualClock`] started on a
//! whole second; time is crossed by moving the clock, never by sleeping. The
//! queue tests run on tokio's paused clock.

use sentinel_flow_core::param_flow::{
    ParamControlBehavior, ParamFlowGrade, ParamFlowRule, ParamTableStats,
};
use sentinel_flow_core::{BlockError, Entry, ParamValue, Sentinel};

use crate::support::admitted;

#[path = "../support/mod.rs"]
mod support;

mod capacity;
mod cluster;
mod concurrency;
mod keys;
mod qps;
mod rate_limiter;
mod reloads;

/// One argument.
fn arg(value: impl Into<ParamValue>) -> [ParamValue; 1] {
    [value.into()]
}

fn enter<'s>(
    sentinel: &'s Sentinel,
    resource: &str,
    args: &[ParamValue],
) -> Result<Entry<'s>, BlockError> {
    sentinel.entry_builder(resource).args(args).enter()
}

/// Tries `n` entries of `resource` with `args` now, each exited at once;
/// how many passed.
fn admit(sentinel: &Sentinel, resource: &str, args: &[ParamValue], n: usize) -> usize {
    admitted(n, || enter(sentinel, resource, args))
}

/// The hot-parameter rule that refused an entry (and checks that one did).
fn hot_rule(err: &BlockError) -> &ParamFlowRule {
    support::rule_of(err)
}

fn concurrency(resource: &str, param_idx: i32, count: f64) -> ParamFlowRule {
    ParamFlowRule {
        grade: ParamFlowGrade::Concurrency,
        ..ParamFlowRule::new(resource, param_idx, count)
    }
}

fn rate_limiter(resource: &str, count: f64, max_queueing_time_ms: u64) -> ParamFlowRule {
    ParamFlowRule {
        control_behavior: ParamControlBehavior::RateLimiter,
        max_queueing_time_ms,
        ..ParamFlowRule::new(resource, 0, count)
    }
}

/// The value-table figures of the only rule on `resource`.
fn table_of(sentinel: &Sentinel, resource: &str) -> ParamTableStats {
    let tables: Vec<_> = sentinel
        .param_flow_rules()
        .tables()
        .into_iter()
        .filter(|(rule, _)| rule.resource == resource)
        .collect();
    assert_eq!(tables.len(), 1, "one rule on {resource}");
    tables[0].1
}
