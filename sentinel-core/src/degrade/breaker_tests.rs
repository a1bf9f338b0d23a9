//! Tests of the circuit breaker's state machine, trip rules and probes.

use std::cell::RefCell;
use std::sync::Barrier;
use std::sync::atomic::AtomicUsize;

use super::*;
use BreakerState::{Closed, HalfOpen, Open};

const T0: u64 = 1_700_000_000_000;

fn breaker(rule: DegradeRule) -> CircuitBreaker {
    assert_eq!(rule.validate(0), Ok(()));
    CircuitBreaker::new(Arc::new(rule))
}

fn slow_rule(max_rt: f64, ratio: f64) -> DegradeRule {
    DegradeRule {
        slow_ratio_threshold: ratio,
        ..DegradeRule::new("res", DegradeGrade::SlowRequestRatio, max_rt)
    }
}

fn quiet(_: &StateChange<'_>) {}

/// Records every change reported: `(prev, next, snapshot)`.
#[derive(Default)]
struct Changes(RefCell<Vec<(BreakerState, BreakerState, Option<f64>)>>);

impl Changes {
    fn listener(&self) -> impl Fn(&StateChange<'_>) + '_ {
        |change| {
            assert_eq!(change.rule.resource, "res");
            self.0
                .borrow_mut()
                .push((change.prev, change.next, change.snapshot));
        }
    }

    fn take(&self) -> Vec<(BreakerState, BreakerState, Option<f64>)> {
        std::mem::take(&mut self.0.borrow_mut())
    }
}

/// Completes calls at `now`: `true` for a bad one (slow, or an error).
fn complete(cb: &CircuitBreaker, now: u64, calls: &[bool]) {
    for &bad in calls {
        let rt = if bad { cb.max_rt_ms + 1 } else { cb.max_rt_ms };
        cb.on_complete(now, rt, bad, None, &quiet);
    }
}

fn probe(cb: &CircuitBreaker, now: u64) -> Probe {
    match cb.try_pass(now, &quiet) {
        Admission::Probe(probe) => probe,
        other => panic!("expected a probe at {now}, got {other:?} in {}", cb.state()),
    }
}

fn trip(cb: &CircuitBreaker, now: u64) {
    complete(cb, now, &[true; 5]);
    assert_eq!(cb.state(), Open);
}

#[test]
fn closed_passes_and_counts() {
    let cb = breaker(slow_rule(100.0, 0.5));
    assert_eq!(cb.try_pass(T0, &quiet), Admission::Pass);
    complete(&cb, T0, &[true, false, false]);
    let snap = cb.snapshot(T0);
    assert_eq!((snap.state, snap.total, snap.bad), (Closed, 3, 1));
    assert_eq!(snap.next_retry_ms, None);
}

#[test]
fn slow_means_rt_over_the_rounded_count() {
    let cb = breaker(slow_rule(10.4, 0.0));
    cb.on_complete(T0, 10, false, None, &quiet);
    assert_eq!(cb.snapshot(T0).bad, 0);
    cb.on_complete(T0, 11, false, None, &quiet);
    assert_eq!(cb.snapshot(T0).bad, 1);
    let cb = breaker(slow_rule(10.5, 0.0));
    cb.on_complete(T0, 11, false, None, &quiet);
    assert_eq!(cb.snapshot(T0).bad, 0);
    // An error is not slow.
    cb.on_complete(T0, 0, true, None, &quiet);
    assert_eq!(cb.snapshot(T0).bad, 0);
}

#[test]
fn slow_ratio_trips_over_the_threshold_only() {
    let changes = Changes::default();
    let cb = breaker(slow_rule(100.0, 0.5));
    // 3 slow of 6 is 0.5: not over.
    for (i, rt) in [50, 50, 50, 200, 200, 200].into_iter().enumerate() {
        cb.on_complete(T0 + i as u64, rt, false, None, &changes.listener());
    }
    assert_eq!(cb.state(), Closed);
    // 4 of 7 is over.
    cb.on_complete(T0 + 10, 101, false, None, &changes.listener());
    assert_eq!(cb.state(), Open);
    assert_eq!(changes.take(), vec![(Closed, Open, Some(4.0 / 7.0))]);
}

#[test]
fn slow_ratio_of_one_trips_when_every_call_is_slow() {
    let changes = Changes::default();
    let cb = breaker(slow_rule(100.0, 1.0));
    complete(&cb, T0, &[true, true, true, true, false, true, true]);
    assert_eq!(cb.state(), Closed, "6 of 7 slow is under 1.0");

    let cb = breaker(slow_rule(100.0, 1.0));
    complete(&cb, T0, &[true; 4]);
    assert_eq!(cb.state(), Closed, "under min_request_amount");
    cb.on_complete(T0, 101, false, None, &changes.listener());
    assert_eq!(cb.state(), Open);
    assert_eq!(changes.take(), vec![(Closed, Open, Some(1.0))]);
}

#[test]
fn slow_ratio_of_zero_trips_at_the_first_slow_call() {
    let cb = breaker(slow_rule(100.0, 0.0));
    complete(&cb, T0, &[false; 10]);
    assert_eq!(cb.state(), Closed, "a ratio of 0 is not over 0");
    complete(&cb, T0, &[true]);
    assert_eq!(cb.state(), Open);
}

#[test]
fn error_ratio_trips_over_count_only() {
    let changes = Changes::default();
    let cb = breaker(DegradeRule::new("res", DegradeGrade::ErrorRatio, 0.5));
    complete(&cb, T0, &[true, false, true, false]);
    assert_eq!(cb.state(), Closed, "under min_request_amount");
    complete(&cb, T0, &[false, true]);
    assert_eq!(cb.state(), Closed, "3 of 6 is not over 0.5");
    cb.on_complete(T0, 0, true, None, &changes.listener());
    assert_eq!(cb.state(), Open);
    assert_eq!(changes.take(), vec![(Closed, Open, Some(4.0 / 7.0))]);
    // Slowness does not count.
    let cb = breaker(DegradeRule::new("res", DegradeGrade::ErrorRatio, 0.0));
    for _ in 0..10 {
        cb.on_complete(T0, 1_000_000, false, None, &quiet);
    }
    assert_eq!(cb.state(), Closed);
}

#[test]
fn error_count_trips_over_count_only() {
    let changes = Changes::default();
    let rule = DegradeRule {
        min_request_amount: 3,
        ..DegradeRule::new("res", DegradeGrade::ErrorCount, 2.0)
    };
    let cb = breaker(rule);
    complete(&cb, T0, &[true, true]);
    assert_eq!(cb.state(), Closed, "2 errors, under min_request_amount");
    complete(&cb, T0, &[false, false, false]);
    assert_eq!(cb.state(), Closed, "2 errors is not over 2");
    cb.on_complete(T0, 0, true, None, &changes.listener());
    assert_eq!(cb.state(), Open);
    assert_eq!(changes.take(), vec![(Closed, Open, Some(3.0))]);
}

#[test]
fn min_request_amount_is_respected() {
    let rule = DegradeRule {
        min_request_amount: 20,
        ..DegradeRule::new("res", DegradeGrade::ErrorRatio, 0.1)
    };
    let cb = breaker(rule);
    complete(&cb, T0, &[true; 19]);
    assert_eq!(cb.state(), Closed);
    complete(&cb, T0, &[false]);
    assert_eq!(cb.state(), Open);
}

#[test]
fn a_new_window_starts_the_count_again() {
    let cb = breaker(DegradeRule::new("res", DegradeGrade::ErrorCount, 4.0));
    // 4 errors late in one window, 4 early in the next: never 5 in one.
    complete(&cb, T0 + 900, &[true; 4]);
    complete(&cb, T0 + 1_000, &[true; 4]);
    assert_eq!(cb.state(), Closed);
    assert_eq!(
        (cb.snapshot(T0 + 1_000).total, cb.snapshot(T0 + 1_000).bad),
        (4, 4)
    );
    assert_eq!(cb.snapshot(T0 + 2_000).total, 0);
    complete(&cb, T0 + 1_999, &[true]);
    assert_eq!(cb.state(), Open);
}

#[test]
fn the_stat_interval_sets_the_window() {
    let rule = DegradeRule {
        stat_interval_ms: 10_000,
        ..DegradeRule::new("res", DegradeGrade::ErrorCount, 4.0)
    };
    let cb = breaker(rule);
    for i in 0..5 {
        complete(&cb, T0 + i * 1_500, &[true]);
    }
    assert_eq!(cb.state(), Open);
}

#[test]
fn open_blocks_until_the_retry_time_then_a_good_probe_closes() {
    let changes = Changes::default();
    let cb = breaker(slow_rule(100.0, 0.5));
    complete(&cb, T0, &[true; 5]);
    assert_eq!(cb.snapshot(T0).next_retry_ms, Some(T0 + 10_000));
    // Completions of calls let through before the trip are counted but
    // change nothing.
    complete(&cb, T0 + 1, &[false; 20]);
    assert_eq!(cb.state(), Open);
    assert_eq!(cb.snapshot(T0 + 1).total, 25);

    assert_eq!(
        cb.try_pass(T0 + 9_999, &changes.listener()),
        Admission::Block
    );
    assert!(changes.take().is_empty());
    let p = match cb.try_pass(T0 + 10_000, &changes.listener()) {
        Admission::Probe(p) => p,
        other => panic!("{other:?}"),
    };
    assert_eq!(changes.take(), vec![(Open, HalfOpen, None)]);
    assert_eq!(cb.try_pass(T0 + 10_001, &quiet), Admission::Block);
    let snap = cb.snapshot(T0 + 10_001);
    assert_eq!(
        (snap.state, snap.probes_admitted, snap.probes_passed),
        (HalfOpen, 1, 0)
    );
    assert_eq!(snap.next_retry_ms, None);

    cb.on_complete(T0 + 10_050, 100, false, Some(p), &changes.listener());
    assert_eq!(changes.take(), vec![(HalfOpen, Closed, None)]);
    assert_eq!(cb.try_pass(T0 + 10_051, &quiet), Admission::Pass);
    // The window was emptied on closing: the same interval's figures
    // start from the probe's successors.
    assert_eq!(cb.snapshot(T0 + 10_050).total, 0);
    complete(&cb, T0 + 10_060, &[true; 4]);
    assert_eq!(cb.state(), Closed, "4 calls are under min_request_amount");
}

#[test]
fn a_bad_probe_opens_again_for_a_whole_window() {
    let changes = Changes::default();
    let cb = breaker(DegradeRule::new("res", DegradeGrade::ErrorRatio, 0.5));
    trip(&cb, T0);
    let p = probe(&cb, T0 + 10_000);
    cb.on_complete(T0 + 10_300, 5, true, Some(p), &changes.listener());
    assert_eq!(changes.take(), vec![(HalfOpen, Open, Some(1.0))]);
    assert_eq!(cb.snapshot(T0 + 10_300).next_retry_ms, Some(T0 + 20_300));
    assert_eq!(cb.try_pass(T0 + 20_299, &quiet), Admission::Block);
    let p = probe(&cb, T0 + 20_300);
    cb.on_complete(T0 + 20_301, 5, false, Some(p), &quiet);
    assert_eq!(cb.state(), Closed);
}

#[test]
fn a_slow_probe_opens_again() {
    let cb = breaker(slow_rule(100.0, 0.5));
    trip(&cb, T0);
    let p = probe(&cb, T0 + 10_000);
    // An error is not what this grade judges; slowness is.
    cb.on_complete(T0 + 10_001, 100, true, Some(p), &quiet);
    assert_eq!(cb.state(), Closed);
    trip(&cb, T0 + 20_000);
    let p = probe(&cb, T0 + 30_000);
    cb.on_complete(T0 + 30_200, 101, false, Some(p), &quiet);
    assert_eq!(cb.state(), Open);
}

#[test]
fn calls_other_than_probes_do_not_decide_half_open() {
    let cb = breaker(DegradeRule::new("res", DegradeGrade::ErrorCount, 1.0));
    trip(&cb, T0);
    let p = probe(&cb, T0 + 10_000);
    // Calls let through before the trip, completing now.
    complete(&cb, T0 + 10_001, &[true, false, true]);
    assert_eq!(cb.state(), HalfOpen);
    assert_eq!(cb.snapshot(T0 + 10_001).total, 3);
    cb.on_complete(T0 + 10_002, 0, false, Some(p), &quiet);
    assert_eq!(cb.state(), Closed);
}

#[test]
fn three_probes_close_only_when_all_complete_well() {
    let changes = Changes::default();
    let rule = DegradeRule {
        probe_num: 3,
        ..DegradeRule::new("res", DegradeGrade::ErrorRatio, 0.5)
    };
    let cb = breaker(rule);
    trip(&cb, T0);
    let probes = [
        probe(&cb, T0 + 10_000),
        probe(&cb, T0 + 10_000),
        probe(&cb, T0 + 10_001),
    ];
    assert_eq!(cb.try_pass(T0 + 10_001, &quiet), Admission::Block);
    cb.on_complete(T0 + 10_002, 1, false, Some(probes[0]), &quiet);
    cb.on_complete(T0 + 10_003, 1, false, Some(probes[1]), &quiet);
    let snap = cb.snapshot(T0 + 10_003);
    assert_eq!(
        (snap.state, snap.probes_admitted, snap.probes_passed),
        (HalfOpen, 3, 2)
    );
    assert_eq!(cb.try_pass(T0 + 10_003, &quiet), Admission::Block);
    changes.take();
    cb.on_complete(T0 + 10_004, 1, false, Some(probes[2]), &changes.listener());
    assert_eq!(changes.take(), vec![(HalfOpen, Closed, None)]);
}

#[test]
fn one_bad_probe_of_three_reopens_and_late_ones_decide_nothing() {
    let rule = DegradeRule {
        probe_num: 3,
        ..DegradeRule::new("res", DegradeGrade::ErrorRatio, 0.5)
    };
    let cb = breaker(rule);
    trip(&cb, T0);
    let first = [
        probe(&cb, T0 + 10_000),
        probe(&cb, T0 + 10_000),
        probe(&cb, T0 + 10_000),
    ];
    cb.on_complete(T0 + 10_001, 1, false, Some(first[0]), &quiet);
    cb.on_complete(T0 + 10_002, 1, true, Some(first[1]), &quiet);
    assert_eq!(cb.state(), Open);
    // The third probe of that period completes well while open, then
    // during the next half-open period: neither closes the breaker.
    cb.on_complete(T0 + 10_003, 1, false, Some(first[2]), &quiet);
    assert_eq!(cb.state(), Open);
    let second = probe(&cb, T0 + 20_002);
    cb.on_complete(T0 + 20_003, 1, false, Some(first[2]), &quiet);
    cb.on_abandon(T0 + 20_003, first[2], &quiet);
    let snap = cb.snapshot(T0 + 20_003);
    assert_eq!(
        (snap.state, snap.probes_admitted, snap.probes_passed),
        (HalfOpen, 1, 0)
    );
    cb.on_complete(T0 + 20_004, 1, false, Some(second), &quiet);
    assert_eq!(cb.state(), HalfOpen, "1 of 3 probes of this period");
}

/// Sentinel issue 1638: the probe is blocked by a later rule, so it never
/// completes.
#[test]
fn an_abandoned_probe_does_not_leave_the_breaker_half_open() {
    let changes = Changes::default();
    let cb = breaker(slow_rule(50.0, 0.5));
    trip(&cb, T0);
    let p = probe(&cb, T0 + 10_000);
    cb.on_abandon(T0 + 10_000, p, &changes.listener());
    assert_eq!(changes.take(), vec![(HalfOpen, Open, None)]);
    assert_eq!(cb.snapshot(T0 + 10_000).next_retry_ms, Some(T0 + 20_000));
    assert_eq!(cb.try_pass(T0 + 19_999, &quiet), Admission::Block);
    // After another time window it probes again.
    let Admission::Probe(p) = cb.try_pass(T0 + 20_000, &changes.listener()) else {
        panic!("no probe after the second open time");
    };
    assert_eq!(cb.try_pass(T0 + 20_000, &quiet), Admission::Block);
    cb.on_complete(T0 + 20_010, 10, false, Some(p), &changes.listener());
    assert_eq!(
        changes.take(),
        vec![(Open, HalfOpen, None), (HalfOpen, Closed, None)]
    );
    // Abandoning it late changes nothing.
    cb.on_abandon(T0 + 20_011, p, &changes.listener());
    assert_eq!(cb.state(), Closed);
    assert!(changes.take().is_empty());
}

#[test]
fn a_late_clock_reading_never_corrupts_state() {
    let cb = breaker(DegradeRule::new("res", DegradeGrade::ErrorCount, 0.0));
    complete(&cb, T0, &[false; 4]);
    // A completion read the clock before the window began.
    complete(&cb, T0 - 5_000, &[true]);
    assert_eq!(cb.state(), Open);
    assert_eq!(cb.snapshot(T0).total, 5);
    assert_eq!(cb.try_pass(0, &quiet), Admission::Block);
    assert_eq!(
        cb.try_pass(u64::MAX, &quiet),
        Admission::Probe(Probe { generation: 1 })
    );
}

/// Threads released at once ask a half-open breaker for probes, over
/// several half-open periods: exactly `probe_num` get one each period.
fn exactly_probe_num_under_threads(probe_num: u32) {
    const THREADS: usize = 8;
    const PERIODS: u64 = 20;
    let rule = DegradeRule {
        probe_num,
        ..DegradeRule::new("res", DegradeGrade::ErrorCount, 0.0)
    };
    let cb = breaker(rule);
    let opened = AtomicUsize::new(0);
    let on_change = |c: &StateChange<'_>| {
        if c.next == HalfOpen {
            opened.fetch_add(1, Ordering::Relaxed);
        }
    };
    cb.on_complete(T0, 0, true, None, &quiet);
    complete(&cb, T0, &[false; 4]);
    assert_eq!(cb.state(), Open);
    let barrier = Barrier::new(THREADS);
    let mut now = T0;
    for period in 1..=PERIODS {
        now += 10_000;
        let probes: Vec<Vec<Probe>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        (0..200)
                            .filter_map(|_| match cb.try_pass(now, &on_change) {
                                Admission::Probe(p) => Some(p),
                                Admission::Block => None,
                                Admission::Pass => panic!("passed while not closed"),
                            })
                            .collect()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let probes: Vec<Probe> = probes.into_iter().flatten().collect();
        assert_eq!(probes.len(), probe_num as usize, "period {period}");
        assert_eq!(opened.load(Ordering::Relaxed), period as usize);
        // The last probe completes badly: open again for the next period.
        for (i, &p) in probes.iter().enumerate() {
            let bad = i + 1 == probes.len();
            cb.on_complete(now, 0, bad, Some(p), &quiet);
        }
        assert_eq!(cb.state(), Open, "period {period}");
    }
}

#[test]
fn exactly_one_probe_under_eight_threads() {
    exactly_probe_num_under_threads(1);
}

#[test]
fn exactly_three_probes_under_eight_threads() {
    exactly_probe_num_under_threads(3);
}

#[test]
fn states_display_in_lowercase() {
    assert_eq!(Closed.to_string(), "closed");
    assert_eq!(Open.to_string(), "open");
    assert_eq!(HalfOpen.to_string(), "half_open");
}
