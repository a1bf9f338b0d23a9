//! The error count, error ratio and slow request ratio grades at their
//! edges.

use sentinel_flow_core::degrade::{BreakerState, DegradeGrade, DegradeRule};

use crate::support::{T0, call_taking, enter, fail, instance, load, stats, succeed};
use crate::{Changes, breaker, degrade_rule, next_second, state, window};

use BreakerState::{Closed, Open};

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
