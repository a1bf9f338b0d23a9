//! Integration tests of circuit breaking (degrade rules) through the public
//! API: the error count, error ratio and slow ratio grades at their edges,
//! the whole Closed -> Open -> HalfOpen cycle as listeners hear it, exactly
//! `probe_num` probes under threads, probes that never run (Sentinel issue
//! 1638: a later slot blocks them, or an `enter_async` waiting in a rate
//! limiter's queue is cancelled), reloads that keep a breaker, refused rule
//! lists, and what counts as a completion.
//!
//! Every test builds its own [`Sentinel`] on a [`ManualClock`]; response
//! times and open times are made by moving the clock, never by sleeping.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};

use sentinel_flow_core::degrade::{BreakerSnapshot, BreakerState, DegradeGrade, DegradeRule};
use sentinel_flow_core::slot::{self, EntryContext, Slot};
use sentinel_flow_core::{BlockError, BlockKind, Entry, ManualClock, Sentinel};

mod support;
use support::{T0, call_taking, enter, fail, instance, instance_with, load, stats, succeed};

use BreakerState::{Closed, HalfOpen, Open};

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

// ---- 1. error count ----

#[test]
fn error_count_trips_once_the_window_holds_min_request_amount_and_blocks_naming_the_rule() {
    let (clock, sentinel) = instance();
    let rule = DegradeRule {
        min_request_amount: 4,
        time_window_sec: 10,
        ..DegradeRule::new("r", DegradeGrade::ErrorCount, 2.0)
    };
    load(&sentinel, [rule.clone()]);
    let changes = Changes::listen(&sentinel);

    for _ in 0..3 {
        fail(&sentinel, "r");
    }
    assert_eq!(
        state(&sentinel, &rule),
        Closed,
        "3 errors in 3 calls, under 4"
    );
    assert_eq!(window(&sentinel, &rule), (3, 3));
    // The fourth call succeeds; the window now holds 4 calls, 3 errors > 2.
    clock.advance_ms(5);
    succeed(&sentinel, "r");
    let snapshot = breaker(&sentinel, &rule);
    assert_eq!(snapshot.state, Open);
    assert_eq!((snapshot.total, snapshot.bad), (4, 3));
    assert_eq!(snapshot.next_retry_ms, Some(T0 + 5 + 10_000));
    assert_eq!(changes.take(), vec![(Closed, Open, Some(3.0))]);

    for _ in 0..5 {
        let err = sentinel.entry("r").unwrap_err();
        assert_eq!(degrade_rule(&err), &rule);
        assert_eq!(err.resource(), "r");
    }
    let now = sentinel.now_ms();
    let node = stats(&sentinel, "r");
    assert_eq!(node.total_pass(now), 4);
    assert_eq!(node.total_block(now), 5);
    assert_eq!(node.total_exception(now), 3);
    assert_eq!(node.total_success(now), 4);
    assert_eq!(
        window(&sentinel, &rule),
        (4, 3),
        "refused calls are not completions"
    );
    // Still open just before the retry time.
    clock.set(T0 + 5 + 9_999);
    assert_eq!(degrade_rule(&sentinel.entry("r").unwrap_err()), &rule);
    assert!(changes.take().is_empty());
}

#[test]
fn error_count_equal_to_count_does_not_trip() {
    let (_clock, sentinel) = instance();
    let rule = DegradeRule {
        min_request_amount: 1,
        ..DegradeRule::new("r", DegradeGrade::ErrorCount, 2.0)
    };
    load(&sentinel, [rule.clone()]);
    fail(&sentinel, "r");
    fail(&sentinel, "r");
    for _ in 0..5 {
        succeed(&sentinel, "r");
    }
    assert_eq!(state(&sentinel, &rule), Closed, "2 errors is not over 2");
    fail(&sentinel, "r");
    assert_eq!(state(&sentinel, &rule), Open);
    assert_eq!(window(&sentinel, &rule), (8, 3));
}

// ---- 2. error ratio ----

#[test]
fn error_ratio_respects_min_request_amount_and_trips_only_over_the_ratio() {
    let (clock, sentinel) = instance();
    let rule = DegradeRule {
        min_request_amount: 5,
        ..DegradeRule::new("r", DegradeGrade::ErrorRatio, 0.5)
    };
    load(&sentinel, [rule.clone()]);
    let changes = Changes::listen(&sentinel);

    // Every call fails, but the window holds fewer than 5.
    for _ in 0..4 {
        fail(&sentinel, "r");
    }
    assert_eq!(state(&sentinel, &rule), Closed, "100% errors of 4 calls");
    assert_eq!(window(&sentinel, &rule), (4, 4));

    // A new window: 2/5 then 3/6 = 0.5, equal, not over.
    next_second(&clock, &sentinel);
    assert_eq!(window(&sentinel, &rule), (0, 0));
    for fails in [false, false, false, true, true, true] {
        if fails {
            fail(&sentinel, "r");
        } else {
            succeed(&sentinel, "r");
        }
    }
    assert_eq!(state(&sentinel, &rule), Closed, "3 of 6 is not over 0.5");
    assert_eq!(window(&sentinel, &rule), (6, 3));
    assert!(changes.take().is_empty());

    fail(&sentinel, "r");
    assert_eq!(state(&sentinel, &rule), Open, "4 of 7 is over 0.5");
    assert_eq!(changes.take(), vec![(Closed, Open, Some(4.0 / 7.0))]);
    assert_eq!(degrade_rule(&sentinel.entry("r").unwrap_err()), &rule);
}

#[test]
fn error_ratio_ignores_slowness() {
    let (clock, sentinel) = instance();
    let rule = DegradeRule {
        min_request_amount: 2,
        ..DegradeRule::new("r", DegradeGrade::ErrorRatio, 0.0)
    };
    load(&sentinel, [rule.clone()]);
    for _ in 0..5 {
        call_taking(&clock, &sentinel, "r", 150);
    }
    assert_eq!(state(&sentinel, &rule), Closed);
    assert_eq!(window(&sentinel, &rule), (5, 0));
    fail(&sentinel, "r");
    assert_eq!(
        state(&sentinel, &rule),
        Open,
        "any error is over a ratio of 0"
    );
}

// ---- 3. slow request ratio ----

#[test]
fn slow_ratio_counts_calls_over_count_ms_and_trips_over_the_threshold() {
    let (clock, sentinel) = instance();
    let rule = DegradeRule {
        min_request_amount: 4,
        slow_ratio_threshold: 0.5,
        ..DegradeRule::new("r", DegradeGrade::SlowRequestRatio, 100.0)
    };
    load(&sentinel, [rule.clone()]);
    let changes = Changes::listen(&sentinel);

    // 100 ms is not slow (slow is over count); 101 ms is. 2 of 4 is 0.5.
    for rt in [100, 101, 100, 101] {
        call_taking(&clock, &sentinel, "r", rt);
    }
    assert_eq!(window(&sentinel, &rule), (4, 2));
    assert_eq!(state(&sentinel, &rule), Closed, "0.5 is not over 0.5");
    // An error is not what this grade judges.
    let entry = enter(&sentinel, "r");
    entry.set_error("boom");
    drop(entry);
    assert_eq!(window(&sentinel, &rule), (5, 2));
    assert_eq!(state(&sentinel, &rule), Closed);

    // 3 of 6 is still 0.5; 4 of 7 is over.
    call_taking(&clock, &sentinel, "r", 101);
    assert_eq!(state(&sentinel, &rule), Closed, "3 of 6");
    call_taking(&clock, &sentinel, "r", 250);
    assert_eq!(state(&sentinel, &rule), Open, "4 of 7");
    assert_eq!(changes.take(), vec![(Closed, Open, Some(4.0 / 7.0))]);
    assert!(sentinel.now_ms() < T0 + 1_000, "all in one window");
    assert_eq!(degrade_rule(&sentinel.entry("r").unwrap_err()), &rule);
}

#[test]
fn a_slow_ratio_threshold_of_one_trips_only_when_every_call_is_slow() {
    let (clock, sentinel) = instance();
    let rule = DegradeRule {
        min_request_amount: 3,
        slow_ratio_threshold: 1.0,
        ..DegradeRule::new("r", DegradeGrade::SlowRequestRatio, 50.0)
    };
    load(&sentinel, [rule.clone()]);
    let changes = Changes::listen(&sentinel);

    // One call of exactly 50 ms among slow ones: never every call slow.
    for rt in [51, 51, 50, 51, 51, 60, 70] {
        call_taking(&clock, &sentinel, "r", rt);
    }
    assert_eq!(window(&sentinel, &rule), (7, 6));
    assert_eq!(state(&sentinel, &rule), Closed, "6 of 7 slow is under 1.0");

    next_second(&clock, &sentinel);
    call_taking(&clock, &sentinel, "r", 51);
    call_taking(&clock, &sentinel, "r", 51);
    assert_eq!(state(&sentinel, &rule), Closed, "2 calls, under 3");
    call_taking(&clock, &sentinel, "r", 51);
    assert_eq!(state(&sentinel, &rule), Open, "3 of 3 slow");
    assert_eq!(changes.take(), vec![(Closed, Open, Some(1.0))]);
}

#[test]
fn a_fractional_count_is_rounded_to_a_whole_millisecond() {
    let (clock, sentinel) = instance();
    // 99.6 ms rounds to 100: a call of 100 ms is not slow.
    let rule = DegradeRule {
        min_request_amount: 2,
        slow_ratio_threshold: 0.0,
        ..DegradeRule::new("r", DegradeGrade::SlowRequestRatio, 99.6)
    };
    load(&sentinel, [rule.clone()]);
    call_taking(&clock, &sentinel, "r", 100);
    call_taking(&clock, &sentinel, "r", 100);
    assert_eq!(window(&sentinel, &rule), (2, 0));
    assert_eq!(state(&sentinel, &rule), Closed);
    call_taking(&clock, &sentinel, "r", 101);
    assert_eq!(state(&sentinel, &rule), Open, "1 of 3 is over 0");
}

// ---- 4. the whole cycle, as listeners hear it ----

#[test]
fn closed_open_half_open_and_back_as_listeners_hear_it() {
    let (clock, sentinel) = instance();
    let rule = DegradeRule {
        min_request_amount: 2,
        time_window_sec: 5,
        ..DegradeRule::new("r", DegradeGrade::ErrorCount, 1.0)
    };
    load(&sentinel, [rule.clone()]);
    let changes = Changes::listen(&sentinel);

    fail(&sentinel, "r");
    fail(&sentinel, "r");
    assert_eq!(
        changes.take_named(),
        vec![("r".to_owned(), (Closed, Open, Some(2.0)))]
    );
    assert_eq!(breaker(&sentinel, &rule).next_retry_ms, Some(T0 + 5_000));

    // Open for the whole time window.
    clock.advance_ms(4_999);
    assert_eq!(degrade_rule(&sentinel.entry("r").unwrap_err()), &rule);
    assert!(changes.take().is_empty());

    // Then one probe; the others are refused while it runs.
    clock.advance_ms(1);
    let probe = enter(&sentinel, "r");
    assert_eq!(changes.take(), vec![(Open, HalfOpen, None)]);
    let snapshot = breaker(&sentinel, &rule);
    assert_eq!(
        (
            snapshot.state,
            snapshot.probes_admitted,
            snapshot.probes_passed
        ),
        (HalfOpen, 1, 0)
    );
    assert_eq!(snapshot.next_retry_ms, None);
    assert_eq!(degrade_rule(&sentinel.entry("r").unwrap_err()), &rule);
    clock.advance_ms(20);
    drop(probe);
    assert_eq!(changes.take(), vec![(HalfOpen, Closed, None)]);
    assert_eq!(state(&sentinel, &rule), Closed);
    assert_eq!(
        window(&sentinel, &rule),
        (0, 0),
        "closed with an empty window"
    );
    succeed(&sentinel, "r");

    // Again, and this time the probe fails.
    fail(&sentinel, "r");
    fail(&sentinel, "r");
    assert_eq!(changes.take(), vec![(Closed, Open, Some(2.0))]);
    let opened = sentinel.now_ms();
    clock.set(opened + 5_000);
    let probe = enter(&sentinel, "r");
    clock.advance_ms(30);
    probe.set_error("still broken");
    drop(probe);
    assert_eq!(
        changes.take(),
        vec![(Open, HalfOpen, None), (HalfOpen, Open, Some(1.0))]
    );
    // Open again for a whole window from the probe's end.
    let failed = opened + 5_030;
    assert_eq!(
        breaker(&sentinel, &rule).next_retry_ms,
        Some(failed + 5_000)
    );
    clock.set(failed + 4_999);
    assert_eq!(degrade_rule(&sentinel.entry("r").unwrap_err()), &rule);
    clock.set(failed + 5_000);
    enter(&sentinel, "r").exit();
    assert_eq!(
        changes.take(),
        vec![(Open, HalfOpen, None), (HalfOpen, Closed, None)]
    );
    assert_eq!(state(&sentinel, &rule), Closed);
}

#[test]
fn a_slow_probe_opens_the_breaker_again() {
    let (clock, sentinel) = instance();
    let rule = DegradeRule {
        min_request_amount: 1,
        slow_ratio_threshold: 0.0,
        time_window_sec: 1,
        ..DegradeRule::new("r", DegradeGrade::SlowRequestRatio, 100.0)
    };
    load(&sentinel, [rule.clone()]);
    let changes = Changes::listen(&sentinel);
    call_taking(&clock, &sentinel, "r", 101);
    clock.set(T0 + 101 + 1_000);
    call_taking(&clock, &sentinel, "r", 101);
    assert_eq!(state(&sentinel, &rule), Open);
    assert_eq!(breaker(&sentinel, &rule).next_retry_ms, Some(T0 + 2_202));
    clock.set(T0 + 2_202);
    call_taking(&clock, &sentinel, "r", 100);
    assert_eq!(state(&sentinel, &rule), Closed);
    assert_eq!(
        changes.take(),
        vec![
            (Closed, Open, Some(1.0)),
            (Open, HalfOpen, None),
            (HalfOpen, Open, Some(1.0)),
            (Open, HalfOpen, None),
            (HalfOpen, Closed, None),
        ]
    );
}

// ---- 5. exactly probe_num probes under threads ----

#[test]
fn exactly_probe_num_probes_are_let_through_to_threads_entering_at_once() {
    const THREADS: usize = 8;
    const PERIODS: u64 = 12;
    let (clock, sentinel) = instance();
    let rule = DegradeRule {
        probe_num: 3,
        ..opens_at_first_error("r", 1)
    };
    load(&sentinel, [rule.clone()]);
    let half_opened = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&half_opened);
    sentinel.degrade_rules().on_state_change(move |change| {
        if change.next == HalfOpen {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    });

    fail(&sentinel, "r");
    let mut blocked_total = 0;
    for period in 1..=PERIODS {
        let retry = breaker(&sentinel, &rule)
            .next_retry_ms
            .unwrap_or_else(|| panic!("open before period {period}"));
        clock.set(retry);
        let tried = Barrier::new(THREADS);
        let results: Vec<Result<Entry<'_>, BlockError>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|_| {
                    s.spawn(|| {
                        tried.wait();
                        let result = sentinel.entry("r");
                        // Hold the entry until every thread has tried.
                        tried.wait();
                        result
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let (mut probes, refused): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
        assert_eq!(probes.len(), 3, "period {period}");
        for err in refused {
            assert_eq!(degrade_rule(&err.unwrap_err()), &rule, "period {period}");
        }
        blocked_total += THREADS - 3;
        assert_eq!(half_opened.load(Ordering::Relaxed), period as usize);
        let snapshot = breaker(&sentinel, &rule);
        assert_eq!(
            (
                snapshot.state,
                snapshot.probes_admitted,
                snapshot.probes_passed
            ),
            (HalfOpen, 3, 0),
            "period {period}"
        );

        clock.advance_ms(10);
        if period % 3 == 0 {
            // The second probe fails: open again at once; the third decides
            // nothing.
            drop(probes.remove(0));
            let failing = probes.remove(0).unwrap();
            failing.set_error("boom");
            drop(failing);
            assert_eq!(state(&sentinel, &rule), Open, "period {period}");
            drop(probes);
            assert_eq!(state(&sentinel, &rule), Open, "period {period}");
        } else {
            drop(probes.pop());
            drop(probes.pop());
            let snapshot = breaker(&sentinel, &rule);
            assert_eq!(
                (snapshot.state, snapshot.probes_passed),
                (HalfOpen, 2),
                "period {period}"
            );
            drop(probes);
            assert_eq!(state(&sentinel, &rule), Closed, "period {period}");
            fail(&sentinel, "r");
            assert_eq!(state(&sentinel, &rule), Open, "period {period}");
        }
    }
    let now = sentinel.now_ms();
    assert_eq!(stats(&sentinel, "r").total_block(now), blocked_total as u64);
}

#[test]
fn probes_completing_on_their_threads_close_the_breaker() {
    const THREADS: usize = 8;
    let (clock, sentinel) = instance();
    let rule = DegradeRule {
        probe_num: 3,
        ..opens_at_first_error("r", 1)
    };
    load(&sentinel, [rule.clone()]);
    for period in 0..10 {
        fail(&sentinel, "r");
        assert_eq!(state(&sentinel, &rule), Open);
        clock.advance_ms(1_000);
        let tried = Barrier::new(THREADS);
        let admitted: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|_| {
                    s.spawn(|| {
                        tried.wait();
                        let result = sentinel.entry("r");
                        tried.wait();
                        // Each probe completes well on its own thread.
                        usize::from(result.is_ok())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(admitted, 3, "period {period}");
        assert_eq!(state(&sentinel, &rule), Closed, "period {period}");
    }
}

// ---- 6. probes that never run (Sentinel issue 1638) ----

/// Blocks every entry while `on`, after the circuit breakers.
#[derive(Debug)]
struct Veto(Arc<AtomicBool>);

impl Slot for Veto {
    fn order(&self) -> i32 {
        slot::order::DEGRADE + 1
    }

    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        if self.0.load(Ordering::Relaxed) {
            return Err(ctx.block(BlockKind::Custom("veto")));
        }
        Ok(())
    }
}

#[test]
fn issue_1638_a_probe_blocked_by_a_later_slot_opens_the_breaker_again() {
    let veto = Arc::new(AtomicBool::new(false));
    let (clock, sentinel) = instance_with(|builder| builder.slot(Veto(Arc::clone(&veto))));
    let rule = opens_at_first_error("r", 10);
    load(&sentinel, [rule.clone()]);
    let changes = Changes::listen(&sentinel);

    fail(&sentinel, "r");
    assert_eq!(changes.take(), vec![(Closed, Open, Some(1.0))]);

    // The breaker lets a probe through; the later slot refuses it.
    clock.advance_ms(10_000);
    veto.store(true, Ordering::Relaxed);
    let err = sentinel.entry("r").unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("veto"));
    assert_eq!(
        changes.take(),
        vec![(Open, HalfOpen, None), (HalfOpen, Open, None)]
    );
    let snapshot = breaker(&sentinel, &rule);
    assert_eq!(snapshot.state, Open, "not stuck half-open");
    assert_eq!(snapshot.next_retry_ms, Some(T0 + 20_000));
    assert_eq!(stats(&sentinel, "r").total_block(sentinel.now_ms()), 1);

    // Open again for a whole window: the breaker refuses before the slot.
    veto.store(false, Ordering::Relaxed);
    clock.advance_ms(9_999);
    assert_eq!(degrade_rule(&sentinel.entry("r").unwrap_err()), &rule);

    // Then it probes again, and the probe can close it.
    clock.advance_ms(1);
    let probe = enter(&sentinel, "r");
    assert_eq!(state(&sentinel, &rule), HalfOpen);
    drop(probe);
    assert_eq!(state(&sentinel, &rule), Closed);
    assert_eq!(
        changes.take(),
        vec![(Open, HalfOpen, None), (HalfOpen, Closed, None)]
    );
}

#[test]
fn a_probe_refused_by_a_second_breaker_gives_its_place_back() {
    let (clock, sentinel) = instance();
    // Two breakers on one resource: the first opens for 1 s, the second for
    // 10 s; both open at one failure.
    let short = opens_at_first_error("r", 1);
    let long = DegradeRule {
        grade: DegradeGrade::ErrorRatio,
        ..opens_at_first_error("r", 10)
    };
    load(&sentinel, [short.clone(), long.clone()]);
    let changes = Changes::listen(&sentinel);
    fail(&sentinel, "r");
    assert_eq!(state(&sentinel, &short), Open);
    assert_eq!(state(&sentinel, &long), Open);
    changes.take();

    // The first breaker lets a probe through; the second refuses the call.
    clock.advance_ms(1_000);
    let err = sentinel.entry("r").unwrap_err();
    assert_eq!(degrade_rule(&err), &long);
    assert_eq!(
        changes.take(),
        vec![(Open, HalfOpen, None), (HalfOpen, Open, None)]
    );
    assert_eq!(breaker(&sentinel, &short).next_retry_ms, Some(T0 + 2_000));
    assert_eq!(state(&sentinel, &long), Open);
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn a_probe_cancelled_in_a_rate_limiters_queue_opens_the_breaker_again() {
    use std::time::Duration;

    use sentinel_flow_core::flow::{ControlBehavior, FlowRule};

    let (clock, sentinel) = instance();
    let rule = opens_at_first_error("r", 1);
    load(&sentinel, [rule.clone()]);
    // One call per 10 s, queueing up to 20 s: the call after the first
    // waits.
    load(
        &sentinel,
        [FlowRule {
            control_behavior: ControlBehavior::RateLimiter,
            max_queueing_time_ms: 20_000,
            ..FlowRule::new("r", 0.1)
        }],
    );
    let changes = Changes::listen(&sentinel);

    let first = sentinel.entry_builder("r").enter_async().await.unwrap();
    first.set_error("boom");
    drop(first);
    assert_eq!(changes.take(), vec![(Closed, Open, Some(1.0))]);

    // Past the open time the call is a probe, queued by the rate limiter,
    // and dropped while it waits.
    clock.advance_ms(1_000);
    let cancelled = tokio::time::timeout(
        Duration::from_millis(1),
        sentinel.entry_builder("r").enter_async(),
    )
    .await;
    assert!(cancelled.is_err(), "still queued when the timeout fired");
    assert_eq!(
        changes.take(),
        vec![(Open, HalfOpen, None), (HalfOpen, Open, None)]
    );
    let snapshot = breaker(&sentinel, &rule);
    assert_eq!(snapshot.state, Open, "not stuck half-open");
    assert_eq!(snapshot.next_retry_ms, Some(T0 + 2_000));
    let now = sentinel.now_ms();
    assert_eq!(stats(&sentinel, "r").total_pass(now), 1, "nothing counted");
    assert_eq!(stats(&sentinel, "r").cur_concurrency(), 0);

    // After another open time, a probe that waits its turn and completes
    // well closes the breaker.
    clock.advance_ms(1_000);
    let probe = sentinel
        .entry_builder("r")
        .enter_async()
        .await
        .expect("queued, then let through");
    assert_eq!(state(&sentinel, &rule), HalfOpen);
    drop(probe);
    assert_eq!(state(&sentinel, &rule), Closed);
    assert_eq!(
        changes.take(),
        vec![(Open, HalfOpen, None), (HalfOpen, Closed, None)]
    );
}

// ---- 7. reloads ----

#[test]
fn reloading_an_unchanged_rule_keeps_its_breaker_and_a_changed_one_starts_closed() {
    let (clock, sentinel) = instance();
    let rule = opens_at_first_error("r", 10);
    let elsewhere = opens_at_first_error("other", 10);
    load(&sentinel, [rule.clone()]);
    succeed(&sentinel, "r");
    fail(&sentinel, "r");
    assert_eq!(state(&sentinel, &rule), Open);
    assert_eq!(degrade_rule(&sentinel.entry("r").unwrap_err()), &rule);
    let open = breaker(&sentinel, &rule);
    let node = |sentinel: &Sentinel| {
        let now = sentinel.now_ms();
        let node = stats(sentinel, "r");
        (
            node.total_pass(now),
            node.total_block(now),
            node.total_exception(now),
            node.total_success(now),
        )
    };
    assert_eq!(node(&sentinel), (2, 1, 1, 2));

    // The same list, then the same rule beside a new one: still open, same
    // retry time, same window.
    load(&sentinel, [rule.clone()]);
    assert_eq!(breaker(&sentinel, &rule), open);
    load(&sentinel, [elsewhere.clone(), rule.clone()]);
    assert_eq!(breaker(&sentinel, &rule), open);
    assert_eq!(degrade_rule(&sentinel.entry("r").unwrap_err()), &rule);
    assert_eq!(node(&sentinel), (2, 2, 1, 2));

    // A probe held across an unchanged reload still decides.
    clock.advance_ms(10_000);
    let probe = enter(&sentinel, "r");
    load(&sentinel, [rule.clone()]);
    assert_eq!(state(&sentinel, &rule), HalfOpen);
    drop(probe);
    assert_eq!(state(&sentinel, &rule), Closed);

    // Opened again, then changed: a new breaker, closed, with an empty
    // window; the resource's statistics stay.
    fail(&sentinel, "r");
    assert_eq!(state(&sentinel, &rule), Open);
    let changed = DegradeRule {
        time_window_sec: 20,
        ..rule.clone()
    };
    load(&sentinel, [changed.clone()]);
    let snapshot = breaker(&sentinel, &changed);
    assert_eq!(
        (snapshot.state, snapshot.total, snapshot.bad),
        (Closed, 0, 0)
    );
    assert_eq!(node(&sentinel), (4, 2, 2, 4));
    succeed(&sentinel, "r");
    assert_eq!(node(&sentinel), (5, 2, 2, 5));
    // And it works on its own terms.
    fail(&sentinel, "r");
    assert_eq!(
        breaker(&sentinel, &changed).next_retry_ms,
        Some(sentinel.now_ms() + 20_000)
    );

    // Removing the rules lets every call through.
    sentinel.degrade_rules().load(vec![]).unwrap();
    assert!(sentinel.degrade_rules().breakers().is_empty());
    succeed(&sentinel, "r");
}

// ---- 8. refused rule lists ----

#[test]
fn bad_rules_are_refused_by_field_and_the_rules_in_force_stay() {
    let (_clock, sentinel) = instance();
    let in_force = opens_at_first_error("r", 10);
    load(&sentinel, [in_force.clone()]);
    fail(&sentinel, "r");
    let open = breaker(&sentinel, &in_force);
    assert_eq!(open.state, Open);

    let base = || DegradeRule::new("r", DegradeGrade::ErrorCount, 1.0);
    let cases: Vec<(&str, DegradeRule)> = vec![
        (
            "count",
            DegradeRule::new("r", DegradeGrade::ErrorCount, -1.0),
        ),
        (
            "count",
            DegradeRule::new("r", DegradeGrade::SlowRequestRatio, -0.5),
        ),
        (
            "count",
            DegradeRule::new("r", DegradeGrade::ErrorRatio, 1.5),
        ),
        (
            "count",
            DegradeRule::new("r", DegradeGrade::ErrorCount, f64::NAN),
        ),
        (
            "time_window_sec",
            DegradeRule {
                time_window_sec: 0,
                ..base()
            },
        ),
        (
            "probe_num",
            DegradeRule {
                probe_num: 0,
                ..base()
            },
        ),
        (
            "stat_interval_ms",
            DegradeRule {
                stat_interval_ms: 0,
                ..base()
            },
        ),
        (
            "min_request_amount",
            DegradeRule {
                min_request_amount: 0,
                ..base()
            },
        ),
        (
            "slow_ratio_threshold",
            DegradeRule {
                slow_ratio_threshold: 1.5,
                ..DegradeRule::new("r", DegradeGrade::SlowRequestRatio, 100.0)
            },
        ),
        (
            "resource",
            DegradeRule {
                resource: String::new(),
                ..base()
            },
        ),
    ];
    for (field, bad) in cases {
        // A good rule first, which would close the breaker if the list went in.
        let errors = sentinel
            .degrade_rules()
            .load(vec![base(), bad.clone()])
            .expect_err(field);
        let [error] = errors.errors() else {
            panic!("one error for {bad:?}: {errors}");
        };
        assert_eq!(error.kind, "degrade");
        assert_eq!(error.field, field, "{error}");
        assert_eq!(error.index, 1, "{error}");
        let shown = error.to_string();
        assert!(
            shown.starts_with(&format!("degrade[1] ({}): {field} ", bad.resource)),
            "{shown}"
        );
        assert_eq!(
            sentinel.degrade_rules().rules(),
            std::slice::from_ref(&in_force),
            "after {field}"
        );
        assert_eq!(breaker(&sentinel, &in_force), open, "after {field}");
    }

    let errors = sentinel
        .degrade_rules()
        .load(vec![DegradeRule {
            probe_num: 0,
            ..base()
        }])
        .unwrap_err();
    assert_eq!(
        errors.to_string(),
        "1 invalid rule(s): degrade[0] (r): probe_num must be in 1..=32767, got 0"
    );
    // The rule in force still blocks.
    assert_eq!(degrade_rule(&sentinel.entry("r").unwrap_err()), &in_force);
}

// ---- 9. what counts as a completion ----

#[test]
fn refused_entries_are_not_completions_and_a_plain_exit_is_a_good_one() {
    let (clock, sentinel) = instance();
    let rule = DegradeRule {
        min_request_amount: 4,
        time_window_sec: 1,
        ..DegradeRule::new("r", DegradeGrade::ErrorRatio, 0.5)
    };
    sentinel.degrade_rules().load(vec![rule.clone()]).unwrap();

    // Dropped or exited without an error: good completions. An error set
    // twice counts once.
    drop(enter(&sentinel, "r"));
    enter(&sentinel, "r").exit();
    let twice = enter(&sentinel, "r");
    twice.set_error("a");
    twice.set_error("b");
    assert!(twice.has_error());
    drop(twice);
    assert_eq!(window(&sentinel, &rule), (3, 1));
    fail(&sentinel, "r");
    assert_eq!(state(&sentinel, &rule), Closed, "2 of 4 is not over 0.5");
    fail(&sentinel, "r");
    assert_eq!(state(&sentinel, &rule), Open, "3 of 5");
    assert_eq!(window(&sentinel, &rule), (5, 3));

    // Refused calls count as blocks on the resource, not in the window.
    for _ in 0..20 {
        assert_eq!(degrade_rule(&sentinel.entry("r").unwrap_err()), &rule);
    }
    assert_eq!(window(&sentinel, &rule), (5, 3));
    let now = sentinel.now_ms();
    assert_eq!(stats(&sentinel, "r").total_block(now), 20);
    assert_eq!(stats(&sentinel, "r").total_success(now), 5);

    // Half-open: calls refused while the probe runs change nothing either.
    clock.advance_ms(1_000);
    let probe = enter(&sentinel, "r");
    for _ in 0..5 {
        assert!(sentinel.entry("r").is_err());
    }
    assert_eq!(window(&sentinel, &rule), (0, 0), "a new second");
    probe.exit();
    assert_eq!(state(&sentinel, &rule), Closed);
    assert_eq!(stats(&sentinel, "r").total_block(sentinel.now_ms()), 25);
}

#[test]
fn a_batch_entry_completes_as_one_call() {
    let (_clock, sentinel) = instance();
    let rule = DegradeRule {
        min_request_amount: 3,
        ..DegradeRule::new("r", DegradeGrade::ErrorCount, 0.0)
    };
    load(&sentinel, [rule.clone()]);
    let entry = sentinel.entry_builder("r").batch_count(5).enter().unwrap();
    entry.set_error("boom");
    drop(entry);
    // As Sentinel's breakers count: one completion whatever the batch.
    assert_eq!(window(&sentinel, &rule), (1, 1));
    assert_eq!(state(&sentinel, &rule), Closed);
    assert_eq!(
        stats(&sentinel, "r").total_exception(sentinel.now_ms()),
        5,
        "the node counts the batch"
    );
}

#[test]
fn calls_that_completed_after_the_trip_decide_nothing() {
    let (clock, sentinel) = instance();
    let rule = opens_at_first_error("r", 1);
    load(&sentinel, [rule.clone()]);
    let changes = Changes::listen(&sentinel);
    // Let through before the trip, completing after it: counted, but the
    // breaker stays open, and during half-open only the probe decides.
    let early: Vec<Entry<'_>> = (0..3).map(|_| enter(&sentinel, "r")).collect();
    fail(&sentinel, "r");
    assert_eq!(state(&sentinel, &rule), Open);
    let mut early = early.into_iter();
    drop(early.next());
    assert_eq!(state(&sentinel, &rule), Open);
    assert_eq!(window(&sentinel, &rule), (2, 1));

    clock.advance_ms(1_000);
    let probe = enter(&sentinel, "r");
    let failing = early.next().unwrap();
    failing.set_error("late");
    drop(failing);
    drop(early.next());
    assert_eq!(state(&sentinel, &rule), HalfOpen, "only the probe decides");
    drop(probe);
    assert_eq!(state(&sentinel, &rule), Closed);
    assert_eq!(
        changes.take(),
        vec![
            (Closed, Open, Some(1.0)),
            (Open, HalfOpen, None),
            (HalfOpen, Closed, None),
        ]
    );
}
