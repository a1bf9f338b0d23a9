//! Bounded memory: a million distinct values stay within the capacity,
//! and a hot value keeps its state among floods of cold ones.

use std::sync::atomic::{AtomicU64, Ordering};

use sentinel_flow_core::ParamValue;
use sentinel_flow_core::param_flow::ParamFlowRule;

use crate::support::{instance, load};
use crate::{admit, arg, concurrency, enter, hot_rule, table_of};

#[test]
fn a_million_distinct_values_stay_within_capacity_and_a_hot_value_keeps_its_state() {
    const VALUES: u64 = 1_000_000;
    const CAPACITY: usize = 1_000;
    let (clock, sentinel) = instance();
    // An hour's duration: a spent value stays refused for the whole run
    // unless its state is forgotten (a forgotten value starts afresh).
    load(
        &sentinel,
        [ParamFlowRule {
            duration_in_sec: 3_600,
            capacity: Some(CAPACITY),
            ..ParamFlowRule::new("r", 0, 1.0)
        }],
    );
    let hot = arg("hot");
    assert!(enter(&sentinel, "r", &hot).is_ok());

    for i in 0..VALUES {
        // 10 new values per millisecond, and the hot value once; least
        // recently seen values are evicted (stamps are per millisecond).
        if i % 10 == 0 {
            clock.advance_ms(1);
            assert!(enter(&sentinel, "r", &hot).is_err(), "hot value at {i}");
        }
        assert!(enter(&sentinel, "r", &arg(i)).is_ok(), "value {i}");
    }
    let table = table_of(&sentinel, "r");
    assert_eq!(table.values, CAPACITY);
    // Every install past the capacity evicted one value; the hot value was
    // never evicted (it would have been installed again).
    assert_eq!(table.evictions, VALUES + 1 - CAPACITY as u64);
    assert_eq!(table.overflows, 0);
    assert!(enter(&sentinel, "r", &hot).is_err());
    // A value forgotten long ago starts afresh.
    assert!(enter(&sentinel, "r", &arg(0u64)).is_ok());
    assert!(enter(&sentinel, "r", &arg(0u64)).is_err());
}

#[test]
fn a_hot_value_at_twice_its_limit_is_held_to_it_among_20000_cold_values_per_second() {
    const LIMIT: u64 = 5;
    const SECONDS: u64 = 5;
    let (clock, sentinel) = instance();
    // The default table: 4 000 values.
    load(&sentinel, [ParamFlowRule::new("r", 0, LIMIT as f64)]);
    let hot = arg("hot");
    let mut cold = 0u64;
    let mut admitted_per_second = Vec::new();
    for _ in 0..SECONDS {
        let mut admitted = 0;
        for ms in 0..1_000 {
            // 20 distinct cold values every millisecond, each seen once ...
            for _ in 0..20 {
                cold += 1;
                assert!(enter(&sentinel, "r", &arg(cold)).is_ok());
            }
            // ... and the hot value twice every 200 ms: twice its limit. A
            // value is known as frequent from its second sighting; one
            // forgotten before it would start afresh once.
            if ms % 200 < 2 && enter(&sentinel, "r", &hot).is_ok() {
                admitted += 1;
            }
            clock.advance_ms(1);
        }
        admitted_per_second.push(admitted);
    }
    // Sentinel's bucket refills once more than a second has passed: 5
    // each second, within 10%.
    assert!(
        admitted_per_second
            .iter()
            .all(|&n| n * 10 >= LIMIT * 9 && n * 10 <= LIMIT * 11),
        "hot value admitted {admitted_per_second:?} per second, limit {LIMIT}"
    );
    let table = table_of(&sentinel, "r");
    assert_eq!(table.values, 4_000);
    assert!(table.evictions >= SECONDS * 20_000 - 4_000);
}

#[test]
fn a_tracked_hot_value_stays_exactly_limited_while_four_threads_flood_cold_values() {
    const LIMIT: usize = 5;
    let (clock, sentinel) = instance();
    // An hour's duration: no refill during the run, so every admission of
    // the hot value past its limit is one it should not have had. 4 000
    // values, the default for one second.
    load(
        &sentinel,
        [ParamFlowRule {
            duration_in_sec: 3_600,
            capacity: Some(4_000),
            ..ParamFlowRule::new("r", 0, LIMIT as f64)
        }],
    );
    let hot = arg("hot");
    assert_eq!(admit(&sentinel, "r", &hot, 2 * LIMIT), LIMIT);
    let admitted = AtomicU64::new(0);
    std::thread::scope(|scope| {
        for thread in 0..4u64 {
            let (clock, sentinel, hot, admitted) = (&clock, &sentinel, &hot, &admitted);
            scope.spawn(move || {
                for i in 0..50_000u64 {
                    let cold = arg(thread << 32 | i);
                    assert!(enter(sentinel, "r", &cold).is_ok());
                    if i % 5_000 == 0 && enter(sentinel, "r", hot).is_ok() {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                    if thread == 0 && i % 100 == 0 {
                        clock.advance_ms(1);
                    }
                }
            });
        }
    });
    assert_eq!(
        admitted.load(Ordering::Relaxed),
        0,
        "the hot value was let in again"
    );
    let table = table_of(&sentinel, "r");
    assert!(table.evictions > 150_000, "{table:?}");
}

#[test]
fn the_default_capacity_is_4000_values_per_second_of_duration() {
    let (_clock, sentinel) = instance();
    let rule = ParamFlowRule::new("r", 0, 1.0);
    assert_eq!(rule.effective_capacity(), 4_000);
    load(&sentinel, [rule]);
    for i in 0..100_000u64 {
        assert!(enter(&sentinel, "r", &arg(i)).is_ok());
    }
    let table = table_of(&sentinel, "r");
    assert_eq!(table.values, 4_000);
    assert_eq!(table.evictions, 96_000);
}

#[test]
fn a_concurrency_table_full_of_calls_in_flight_lets_new_values_pass_untracked() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [ParamFlowRule {
            capacity: Some(8),
            ..concurrency("r", 0, 1.0)
        }],
    );
    let mut held: Vec<_> = (0..8u64)
        .map(|i| enter(&sentinel, "r", &arg(i)).unwrap())
        .collect();
    // No way is free: a new value passes untracked, each time.
    let new = arg("new");
    let untracked: Vec<_> = (0..2)
        .map(|_| enter(&sentinel, "r", &new).expect("untracked, as Sentinel's LRU"))
        .collect();
    let table = table_of(&sentinel, "r");
    assert_eq!((table.values, table.overflows), (8, 2));
    // In a list, an untracked element is refused: its count could not be
    // given back.
    let err = enter(&sentinel, "r", &[ParamValue::list(["new"])]).unwrap_err();
    assert_eq!(hot_rule(&err).capacity, Some(8));
    drop(untracked);

    // Once a value leaves, the new one is tracked and limited.
    held.pop();
    let tracked = enter(&sentinel, "r", &new).unwrap();
    assert!(enter(&sentinel, "r", &new).is_err());
    assert_eq!(table_of(&sentinel, "r").values, 8);
    drop((tracked, held));
}
