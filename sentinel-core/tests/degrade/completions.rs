//! What counts as a completion: not a refused entry, a plain exit as a
//! good one, a batch as one call, and nothing that completed after the trip.

use sentinel_flow_core::Entry;
use sentinel_flow_core::degrade::{BreakerState, DegradeGrade, DegradeRule};

use crate::support::{enter, fail, instance, load, stats};
use crate::{Changes, degrade_rule, opens_at_first_error, state, window};

use BreakerState::{Closed, HalfOpen, Open};

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
