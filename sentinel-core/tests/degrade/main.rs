//! Integration tests of circuit breaking (degrade rules) through the public
//! API, one file per topic: the error count, error ratio and slow ratio
//! grades at their edges (`grades`), the whole Closed -> Open -> HalfOpen
//! cycle as listeners hear it (`cycle`), exactly `probe_num` probes under
//! threads and probes that never run (`probes`: Sentinel issue 1638, a later
//! slot blocks them, or an `enter_async` waiting in a rate limiter's queue is
//! cancelled), reloads that keep a breaker (`reloads`), and what counts as a
//! completion (`completions`).
//!
//! Every test builds its own [`Sentinel`] on a [`ManualClock`]; response
//! times and open times are made by moving the clock, never by sleeping.

use std::sync::{Arc, Mutex};

use sentinel_flow_core::degrade::{BreakerSnapshot, BreakerState, DegradeGrade, DegradeRule};
use sentinel_flow_core::{BlockError, ManualClock, Sentinel};

#[path = "../support/mod.rs"]
mod support;

mod completions;
mod cycle;
mod grades;
mod probes;
mod reloads;

/// A rule that opens at the first error (error count over 0, one call in
/// the window is enough), for `time_window_sec`.
fn opens_at_first_error(resource: &str, time_window_sec: u32) -> DegradeRule {
    DegradeRule {
        min_request_amount: 1,
        time_window_sec,
        ..DegradeRule::new(resource, DegradeGrade::ErrorCount, 0.0)
    }
}

/// The breaker of `rule`, as `breakers()` shows it now.
fn breaker(sentinel: &Sentinel, rule: &DegradeRule) -> BreakerSnapshot {
    let found: Vec<BreakerSnapshot> = sentinel
        .degrade_rules()
        .breakers()
        .into_iter()
        .filter(|(r, _)| r == rule)
        .map(|(_, snapshot)| snapshot)
        .collect();
    match found[..] {
        [snapshot] => snapshot,
        _ => panic!("{} breakers for {rule}", found.len()),
    }
}

fn state(sentinel: &Sentinel, rule: &DegradeRule) -> BreakerState {
    breaker(sentinel, rule).state
}

/// `(total, bad)` of the breaker's current window.
fn window(sentinel: &Sentinel, rule: &DegradeRule) -> (u64, u64) {
    let snapshot = breaker(sentinel, rule);
    (snapshot.total, snapshot.bad)
}

/// The degrade rule that refused an entry (and checks that one did).
fn degrade_rule(err: &BlockError) -> &DegradeRule {
    support::rule_of(err)
}

/// Moves the clock to the start of the next statistics second, so that a
/// breaker's window (1000 ms, aligned) starts empty.
fn next_second(clock: &ManualClock, sentinel: &Sentinel) {
    let now = sentinel.now_ms();
    clock.set(now - now % 1_000 + 1_000);
}

type Heard = (BreakerState, BreakerState, Option<f64>);

/// Records every change of state of the instance's breakers, in order.
#[derive(Clone, Default)]
struct Changes(Arc<Mutex<Vec<(String, Heard)>>>);

impl Changes {
    fn listen(sentinel: &Sentinel) -> Changes {
        let changes = Changes::default();
        let log = Arc::clone(&changes.0);
        sentinel.degrade_rules().on_state_change(move |change| {
            log.lock().unwrap().push((
                change.rule.resource.clone(),
                (change.prev, change.next, change.snapshot),
            ));
        });
        changes
    }

    /// The changes heard since the last call, of any resource.
    fn take(&self) -> Vec<Heard> {
        self.take_named()
            .into_iter()
            .map(|(_, heard)| heard)
            .collect()
    }

    fn take_named(&self) -> Vec<(String, Heard)> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}
