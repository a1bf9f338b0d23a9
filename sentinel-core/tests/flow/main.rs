//! Integration tests of flow control, one file per topic: QPS and its
//! accuracy under overload (`qps`), the concurrency grade (`concurrency`),
//! `limit_app` and rule order (`limit_app`), the relate and chain strategies
//! (`strategies`), the warm-up curve (`warm_up`), the rate limiter's pacing and
//! queue (`rate_limiter`), a synchronous wait on the instance's clock
//! (`queue_wait`), reloads (`reloads`), rules with a window of their own
//! (`window`), the cluster hook (`cluster`) and cluster concurrency
//! tokens (`cluster_concurrency`). What every kind shares
//! (refused lists, listeners) is the contract in `tests/kinds/contract.rs`.
//!
//! Every test builds its own [`Sentinel`] on a [`ManualClock`]; time windows
//! are crossed by moving the clock, never by sleeping. The queue tests run on
//! tokio's paused clock, which moves only while every task waits.

use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::{BlockError, EntryType, ManualClock, Sentinel};

use crate::support::admitted;

#[path = "../support/mod.rs"]
mod support;

mod cluster;
mod cluster_concurrency;
mod concurrency;
mod limit_app;
mod qps;
mod queue_wait;
mod rate_limiter;
mod reloads;
mod strategies;
mod warm_up;
mod window;

/// A QPS rule on `resource` for the callers `limit_app` selects.
fn for_app(resource: &str, limit_app: &str, count: f64) -> FlowRule {
    FlowRule {
        limit_app: limit_app.into(),
        ..FlowRule::new(resource, count)
    }
}

/// The flow rule that refused an entry (and checks that a flow rule did).
fn blocking_rule(err: &BlockError) -> &FlowRule {
    support::rule_of(err)
}

/// As [`admit`], inbound from `origin`.
fn admit_from(sentinel: &Sentinel, resource: &str, origin: &str, n: usize) -> usize {
    admitted(n, || {
        sentinel
            .entry_builder(resource)
            .origin(origin)
            .entry_type(EntryType::Inbound)
            .enter()
    })
}

/// One simulated second of traffic on `resource`, from the current time (a
/// whole second): 100 steps of 10 ms with 3 attempts each, so both 500 ms
/// buckets see traffic. Each admitted entry exits at once. `seen` is told
/// the time and outcome of every attempt. The clock ends a second later.
fn one_second_of_traffic(
    clock: &ManualClock,
    sentinel: &Sentinel,
    resource: &str,
    mut seen: impl FnMut(u64, bool),
) -> usize {
    let mut admitted = 0;
    for _ in 0..100 {
        for _ in 0..3 {
            let now = sentinel.now_ms();
            let passed = sentinel.entry(resource).is_ok();
            admitted += usize::from(passed);
            seen(now, passed);
        }
        clock.advance_ms(10);
    }
    admitted
}
