//! The whole Closed -> Open -> HalfOpen cycle and back, as listeners hear
//! it, and a slow probe opening the breaker again.

use sentinel_flow_core::degrade::{BreakerState, DegradeGrade, DegradeRule};

use crate::support::{T0, call_taking, enter, fail, instance, load, succeed};
use crate::{Changes, breaker, degrade_rule, state, window};

use BreakerState::{Closed, HalfOpen, Open};

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
