//! What an adaptive rule does to entries: admission up to the limit in
//! force, its origin scope, what a completed call feeds it, what a reload
//! keeps, and exactness under threads.

use std::sync::atomic::{AtomicU32, Ordering};

use sentinel_flow_core::adaptive::{AdaptiveAlgorithm, AdaptiveRule, AdaptiveSnapshot};
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::{BlockKind, Sentinel};

use crate::support::{instance, load};

/// An AIMD rule on "r" of `limit` calls, folding a 100 ms window of at
/// least 10 calls.
fn aimd(limit: u32) -> AdaptiveRule {
    AdaptiveRule {
        initial_limit: limit,
        min_limit: 1,
        window_ms: 100,
        ..AdaptiveRule::new("r", AdaptiveAlgorithm::aimd())
    }
}

fn state(sentinel: &Sentinel) -> AdaptiveSnapshot {
    sentinel.adaptive_rules().limits()[0].1
}

#[test]
fn admits_while_below_the_limit_and_refuses_with_its_kind() {
    let (_clock, sentinel) = instance();
    load(&sentinel, [aimd(3)]);
    let inside: Vec<_> = (0..3).map(|_| sentinel.entry("r").unwrap()).collect();
    let refused = sentinel.entry("r").unwrap_err();
    assert_eq!(refused.kind(), BlockKind::Adaptive);
    assert_eq!(refused.rule_as::<AdaptiveRule>(), Some(&aimd(3)));
    assert_eq!((state(&sentinel).limit, state(&sentinel).in_flight), (3, 3));
    drop(inside);
    assert_eq!(state(&sentinel).in_flight, 0);
    // Another resource is not limited.
    let _others: Vec<_> = (0..5).map(|_| sentinel.entry("s").unwrap()).collect();
}

#[test]
fn an_origins_rule_counts_that_origin_alone_and_other_the_rest() {
    let (_clock, sentinel) = instance();
    let for_a = AdaptiveRule {
        limit_app: "a".into(),
        ..aimd(1)
    };
    let for_other = AdaptiveRule {
        limit_app: "other".into(),
        ..aimd(2)
    };
    load(&sentinel, [for_a.clone(), for_other]);
    let from = |origin| sentinel.entry_builder("r").origin(origin).enter();
    let a = from("a").unwrap();
    assert_eq!(
        from("a").unwrap_err().rule_as::<AdaptiveRule>(),
        Some(&for_a)
    );
    // "b" and "c" share the rule for other origins; no origin is not counted.
    let b = from("b").unwrap();
    let c = from("c").unwrap();
    assert!(from("d").is_err());
    let plain: Vec<_> = (0..4).map(|_| sentinel.entry("r").unwrap()).collect();
    drop((a, b, c, plain));
}

#[test]
fn failed_calls_back_aimd_off_at_the_window_fold() {
    let (clock, sentinel) = instance();
    load(&sentinel, [aimd(50)]);
    let calls: Vec<_> = (0..10).map(|_| sentinel.entry("r").unwrap()).collect();
    calls[0].set_error("boom");
    clock.advance_ms(100);
    // The first exit opens the window; the fold needs it 100 ms old.
    drop(calls);
    assert_eq!(state(&sentinel).limit, 50);
    let calls: Vec<_> = (0..10).map(|_| sentinel.entry("r").unwrap()).collect();
    calls[0].set_error("boom");
    clock.advance_ms(100);
    drop(calls);
    // One window with a failure: 50 × 0.9.
    assert_eq!(state(&sentinel).limit, 45);
    assert_eq!(state(&sentinel).in_flight, 0);
}

/// Each kind whose check asked to hear of an exit hears it: the breaker
/// counts the failures that back AIMD off.
#[test]
fn a_breaker_and_an_adaptive_rule_on_one_resource_both_hear_each_exit() {
    let (clock, sentinel) = instance();
    load(&sentinel, [aimd(50)]);
    load(
        &sentinel,
        [DegradeRule::new("r", DegradeGrade::ErrorCount, 1.0)],
    );
    for _ in 0..2 {
        let calls: Vec<_> = (0..10).map(|_| sentinel.entry("r").unwrap()).collect();
        calls[0].set_error("boom");
        clock.advance_ms(100);
        drop(calls);
    }
    assert_eq!(state(&sentinel).limit, 45);
    assert_eq!(state(&sentinel).in_flight, 0);
    // Two errors over a count of one: the breaker is open.
    assert_eq!(sentinel.entry("r").unwrap_err().kind(), BlockKind::Degrade);
}

/// A window of 10 calls of 20 in flight, completed well: AIMD adds one.
fn grow_once(clock: &sentinel_flow_core::ManualClock, sentinel: &Sentinel) {
    let calls: Vec<_> = (0..20).map(|_| sentinel.entry("r").unwrap()).collect();
    clock.advance_ms(100);
    drop(calls);
}

#[test]
fn a_reloaded_unchanged_rule_keeps_its_limit_and_calls_and_a_changed_one_starts_afresh() {
    let (clock, sentinel) = instance();
    load(&sentinel, [aimd(20)]);
    grow_once(&clock, &sentinel);
    grow_once(&clock, &sentinel);
    let learned = state(&sentinel).limit;
    assert!(learned > 20, "{learned}");
    let held = sentinel.entry("r").unwrap();
    load(&sentinel, [aimd(20)]);
    assert_eq!(
        (state(&sentinel).limit, state(&sentinel).in_flight),
        (learned, 1)
    );
    drop(held);
    assert_eq!(state(&sentinel).in_flight, 0);
    // Parameters changed: the learned limit goes.
    let changed = AdaptiveRule {
        window_ms: 200,
        ..aimd(20)
    };
    load(&sentinel, [changed]);
    assert_eq!(
        (state(&sentinel).limit, state(&sentinel).in_flight),
        (20, 0)
    );
    // Removed, then loaded again: a fresh start too.
    grow_once(&clock, &sentinel);
    load(&sentinel, Vec::<AdaptiveRule>::new());
    assert!(sentinel.adaptive_rules().limits().is_empty());
    load(&sentinel, [aimd(20)]);
    assert_eq!(state(&sentinel).limit, 20);
}

#[test]
fn a_call_admitted_under_a_replaced_rule_releases_its_old_place_only() {
    let (_clock, sentinel) = instance();
    load(&sentinel, [aimd(1)]);
    let old = sentinel.entry("r").unwrap();
    load(&sentinel, [aimd(2)]);
    let new = sentinel.entry("r").unwrap();
    drop(old);
    assert_eq!(state(&sentinel).in_flight, 1);
    let _second = sentinel.entry("r").unwrap();
    assert!(sentinel.entry("r").is_err());
    drop(new);
}

/// Threads entering at once never have more calls inside than the limit,
/// against a counter of the calls inside kept by the test.
#[test]
fn never_more_in_flight_than_the_limit_under_threads() {
    const LIMIT: u32 = 4;
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [AdaptiveRule {
            // No window ever folds: the limit stays.
            min_samples: 1_000_000,
            ..aimd(LIMIT)
        }],
    );
    let inside = AtomicU32::new(0);
    let most = AtomicU32::new(0);
    let admitted = AtomicU32::new(0);
    std::thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                for _ in 0..5_000 {
                    if let Ok(entry) = sentinel.entry("r") {
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        admitted.fetch_add(1, Ordering::Relaxed);
                        std::hint::spin_loop();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        drop(entry);
                    }
                }
            });
        }
    });
    assert!(most.load(Ordering::SeqCst) <= LIMIT, "{most:?}");
    assert!(admitted.load(Ordering::Relaxed) >= 5_000);
    assert_eq!(state(&sentinel).in_flight, 0);
}

#[test]
fn a_resources_snapshot_shows_each_rules_limit_and_calls_in_flight() {
    let (_clock, sentinel) = instance();
    load(&sentinel, [aimd(3)]);
    let held = sentinel.entry("r").unwrap();
    let snapshot = sentinel
        .resources()
        .into_iter()
        .find(|r| &*r.name == "r")
        .expect("r has a node");
    assert_eq!(snapshot.rules.adaptive, 1);
    let [status] = &snapshot.adaptive[..] else {
        panic!("one adaptive rule: {:?}", snapshot.adaptive);
    };
    assert_eq!(*status.rule, aimd(3));
    assert_eq!((status.state.limit, status.state.in_flight), (3, 1));
    drop(held);
}
