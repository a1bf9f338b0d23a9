//! The token bucket per value and its refill formula, batches, specific
//! items, `param_idx` from the end, list arguments, burst and long
//! durations.

use sentinel_flow_core::param_flow::{ParamFlowGrade, ParamFlowItem, ParamFlowRule};
use sentinel_flow_core::{BlockKind, ParamValue};

use crate::support::{instance, load, stats};
use crate::{admit, arg, concurrency, enter, hot_rule, table_of};

#[test]
fn qps_reject_limits_each_value_on_its_own_and_refills_by_sentinels_formula() {
    let (clock, sentinel) = instance();
    let rule = ParamFlowRule::new("r", 0, 2.0);
    load(&sentinel, [rule.clone()]);
    let alice = [ParamValue::from("alice"), ParamValue::from(42)];
    let bob = [ParamValue::from("bob"), ParamValue::from(42)];

    assert!(enter(&sentinel, "r", &alice).is_ok());
    assert!(enter(&sentinel, "r", &alice).is_ok());
    let err = enter(&sentinel, "r", &alice).unwrap_err();
    assert_eq!(err.kind(), BlockKind::ParamFlow);
    assert_eq!(err.resource(), "r");
    assert_eq!(err.rule_as::<ParamFlowRule>(), Some(&rule));
    // The same value as a shared string is the same value.
    let shared = [ParamValue::Str("alice".into()), ParamValue::from(1)];
    assert_eq!(
        hot_rule(&enter(&sentinel, "r", &shared).unwrap_err()),
        &rule
    );

    // Bob has tokens of his own, though the second argument is the same.
    assert_eq!(admit(&sentinel, "r", &bob, 5), 2);
    // Another resource is not limited, nor an entry without arguments.
    assert_eq!(admit(&sentinel, "other", &alice, 5), 5);
    assert!(sentinel.entry("r").is_ok());

    // No refill until more than `duration_in_sec` has passed since the
    // first request: 1000 ms is not enough ...
    clock.advance_ms(1_000);
    assert_eq!(admit(&sentinel, "r", &alice, 3), 0);
    // ... 1001 ms adds 1001 × 2 / 1000 = 2 tokens.
    clock.advance_ms(1);
    assert_eq!(admit(&sentinel, "r", &alice, 5), 2);
    // Bob's bucket refills at its own request, from its own last refill.
    assert_eq!(admit(&sentinel, "r", &bob, 5), 2);

    let now = sentinel.now_ms();
    let node = stats(&sentinel, "r");
    assert_eq!(node.total_pass(now), 2 + 2 + 1 + 2 + 2);
    assert_eq!(node.total_block(now), 1 + 1 + 3 + 3 + 3 + 3);
}

#[test]
fn qps_reject_takes_a_batch_of_tokens() {
    let (_clock, sentinel) = instance();
    load(&sentinel, [ParamFlowRule::new("r", 0, 3.0)]);
    let batch = |value: &str, n: u32| {
        sentinel
            .entry_builder("r")
            .args(&arg(value))
            .batch_count(n)
            .enter()
    };
    // More than the bucket holds is refused even for a fresh value.
    assert!(hot_rule(&batch("a", 4).unwrap_err()).count == 3.0);
    assert!(batch("a", 2).is_ok(), "3 - 2 = 1 left");
    assert!(batch("a", 2).is_err(), "1 < 2");
    assert!(batch("a", 1).is_ok());
    assert!(batch("a", 1).is_err());
}

#[test]
fn items_have_thresholds_of_their_own_whatever_the_values_representation() {
    let (clock, sentinel) = instance();
    let rule = ParamFlowRule {
        param_flow_item_list: vec![
            ParamFlowItem::new("vip", 5.0),
            ParamFlowItem::new(7u8, 3.0),
            ParamFlowItem::new("banned", 0.0),
            ParamFlowItem::new("fraction", 2.9),
        ],
        ..ParamFlowRule::new("r", 0, 1.0)
    };
    load(&sentinel, [rule.clone()]);

    assert_eq!(admit(&sentinel, "r", &arg("vip"), 10), 5);
    assert_eq!(
        admit(&sentinel, "r", &arg(ParamValue::Str("vip".into())), 3),
        0
    );
    assert_eq!(admit(&sentinel, "r", &arg("regular"), 10), 1);
    assert_eq!(admit(&sentinel, "r", &arg("other"), 10), 1);
    // An item given as a u8 matches the same integer of any type.
    assert_eq!(admit(&sentinel, "r", &arg(7i64), 10), 3);
    assert_eq!(admit(&sentinel, "r", &arg(ParamValue::UInt(7)), 3), 0);
    assert_eq!(admit(&sentinel, "r", &arg(8u64), 10), 1);
    // Threshold 0 refuses even the first request; thresholds are whole.
    let err = enter(&sentinel, "r", &arg("banned")).unwrap_err();
    assert_eq!(hot_rule(&err), &rule);
    assert_eq!(admit(&sentinel, "r", &arg("fraction"), 10), 2);

    // After a refill each value gets its own threshold again.
    clock.advance_ms(1_001);
    assert_eq!(admit(&sentinel, "r", &arg("vip"), 10), 5);
    assert_eq!(admit(&sentinel, "r", &arg("regular"), 10), 1);
    assert_eq!(admit(&sentinel, "r", &arg(7u32), 10), 3);
    assert_eq!(admit(&sentinel, "r", &arg("banned"), 10), 0);
}

#[test]
fn param_idx_counts_from_the_end_and_a_missing_argument_passes() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [
            ParamFlowRule::new("last", -1, 1.0),
            // Threshold 0 refuses every value it sees: entries pass only
            // when the argument is missing.
            ParamFlowRule::new("fifth", 5, 0.0),
            ParamFlowRule::new("third_from_end", -3, 0.0),
            ParamFlowRule::new("first", 0, 0.0),
        ],
    );
    let args = |values: &[&str]| -> Vec<ParamValue> {
        values.iter().map(|&v| ParamValue::from(v)).collect()
    };

    assert!(enter(&sentinel, "last", &args(&["x", "u1"])).is_ok());
    let err = enter(&sentinel, "last", &args(&["y", "u1"])).unwrap_err();
    assert_eq!(
        hot_rule(&err).param_idx,
        -1,
        "the last argument is u1 again"
    );
    assert!(
        enter(&sentinel, "last", &args(&["u1"])).is_err(),
        "last of one"
    );
    assert!(enter(&sentinel, "last", &args(&["a", "b", "u1"])).is_err());
    assert!(enter(&sentinel, "last", &args(&["x", "u2"])).is_ok());
    assert!(
        enter(&sentinel, "last", &args(&["u2", "x"])).is_ok(),
        "x is new"
    );
    assert!(
        enter(&sentinel, "last", &args(&["u1", "x"])).is_err(),
        "x again"
    );

    let two = args(&["a", "b"]);
    assert_eq!(admit(&sentinel, "fifth", &two, 5), 5, "no argument 5");
    let six = args(&["a", "b", "c", "d", "e", "f"]);
    assert_eq!(
        hot_rule(&enter(&sentinel, "fifth", &six).unwrap_err()).param_idx,
        5
    );
    assert_eq!(admit(&sentinel, "third_from_end", &two, 5), 5, "no -3 of 2");
    let three = args(&["a", "b", "c"]);
    assert!(enter(&sentinel, "third_from_end", &three).is_err());

    // Entries without arguments pass every rule.
    for resource in ["last", "fifth", "third_from_end", "first"] {
        assert_eq!(admit(&sentinel, resource, &[], 3), 3, "{resource}");
        assert!(sentinel.entry(resource).is_ok(), "{resource}");
    }
    assert!(enter(&sentinel, "first", &two).is_err());
}

#[test]
fn a_list_argument_is_checked_per_element_and_one_hot_element_blocks_it() {
    let (_clock, sentinel) = instance();
    load(&sentinel, [ParamFlowRule::new("r", 0, 1.0)]);
    let list = |values: &[&str]| [ParamValue::list(values.iter().copied())];

    assert!(enter(&sentinel, "r", &list(&["a", "b"])).is_ok());
    assert!(
        enter(&sentinel, "r", &arg("a")).is_err(),
        "a took its token"
    );
    assert!(
        enter(&sentinel, "r", &arg("b")).is_err(),
        "b took its token"
    );

    // b is hot: the whole entry is refused ...
    let err = enter(&sentinel, "r", &list(&["c", "b"])).unwrap_err();
    assert_eq!(hot_rule(&err).count, 1.0);
    // ... and c's token, taken before b was refused, was given back.
    assert!(
        enter(&sentinel, "r", &arg("c")).is_ok(),
        "c's token is back"
    );
    assert!(enter(&sentinel, "r", &arg("c")).is_err());

    // A list built from a vector is a list too; an element repeated takes
    // a token each time.
    let from_vec = [ParamValue::from(vec![
        ParamValue::from("d"),
        ParamValue::from("a"),
    ])];
    assert!(enter(&sentinel, "r", &from_vec).is_err());
    assert!(enter(&sentinel, "r", &list(&["e", "e"])).is_err());
    assert!(enter(&sentinel, "r", &arg("d")).is_ok(), "d given back");
    assert!(enter(&sentinel, "r", &arg("e")).is_ok(), "e given back");
    // An empty list has no element to refuse.
    assert_eq!(admit(&sentinel, "r", &list(&[]), 3), 3);
}

#[test]
fn a_list_argument_under_the_concurrency_grade_holds_each_element() {
    let (_clock, sentinel) = instance();
    load(&sentinel, [concurrency("r", 0, 1.0)]);
    let xy = [ParamValue::list(["x", "y"])];

    let held = enter(&sentinel, "r", &xy).unwrap();
    assert!(enter(&sentinel, "r", &arg("x")).is_err());
    assert!(enter(&sentinel, "r", &arg("y")).is_err());
    drop(held);

    let y = enter(&sentinel, "r", &arg("y")).unwrap();
    // y is inside: the list is refused, and the count x took is given back.
    let err = enter(&sentinel, "r", &xy).unwrap_err();
    assert_eq!(hot_rule(&err).grade, ParamFlowGrade::Concurrency);
    let x = enter(&sentinel, "r", &arg("x")).expect("x's count was given back");
    assert!(enter(&sentinel, "r", &arg("x")).is_err());
    drop((x, y));
    let both = enter(&sentinel, "r", &xy).expect("every count given back");
    drop(both);
    assert_eq!(table_of(&sentinel, "r").overflows, 0);
}

#[test]
fn burst_lets_a_quiet_value_pass_more_up_to_count_plus_burst() {
    let (clock, sentinel) = instance();
    load(
        &sentinel,
        [ParamFlowRule {
            burst_count: 3,
            ..ParamFlowRule::new("r", 0, 2.0)
        }],
    );
    let a = arg("a");

    // A fresh value starts with count + burst = 5 tokens.
    assert_eq!(admit(&sentinel, "r", &a, 10), 5);
    // 1001 ms add 1001 × 2 / 1000 = 2.
    clock.advance_ms(1_001);
    assert_eq!(admit(&sentinel, "r", &a, 10), 2);
    // 2001 ms add 4.
    clock.advance_ms(2_001);
    assert_eq!(admit(&sentinel, "r", &a, 10), 4);
    // A long pause adds more than the cap: count + burst.
    clock.advance_ms(60_000);
    assert_eq!(admit(&sentinel, "r", &a, 10), 5);

    // Tokens left over are added to, then capped: one taken of 5 leaves 4,
    // + 2 = 6, capped at 5.
    let b = arg("b");
    assert_eq!(admit(&sentinel, "r", &b, 1), 1);
    clock.advance_ms(1_001);
    assert_eq!(admit(&sentinel, "r", &b, 10), 5);
}

#[test]
fn a_longer_duration_spreads_count_over_its_seconds() {
    let (clock, sentinel) = instance();
    load(
        &sentinel,
        [
            ParamFlowRule {
                duration_in_sec: 2,
                ..ParamFlowRule::new("r", 0, 4.0)
            },
            ParamFlowRule {
                duration_in_sec: 2,
                burst_count: 2,
                ..ParamFlowRule::new("burst", 0, 4.0)
            },
        ],
    );
    let a = arg("a");

    assert_eq!(admit(&sentinel, "r", &a, 10), 4);
    clock.advance_ms(1_500);
    assert_eq!(admit(&sentinel, "r", &a, 10), 0, "within the 2 s");
    clock.advance_ms(500);
    assert_eq!(
        admit(&sentinel, "r", &a, 10),
        0,
        "2000 ms is not more than 2 s"
    );
    clock.advance_ms(1);
    // 2001 × 4 / 2000 = 4.
    assert_eq!(admit(&sentinel, "r", &a, 10), 4);
    clock.advance_ms(3_001);
    // 3001 × 4 / 2000 = 6, capped at 4.
    assert_eq!(admit(&sentinel, "r", &a, 10), 4);

    assert_eq!(admit(&sentinel, "burst", &a, 10), 6);
    clock.advance_ms(2_001);
    assert_eq!(admit(&sentinel, "burst", &a, 10), 4);
    clock.advance_ms(4_001);
    // 4001 × 4 / 2000 = 8, capped at 6.
    assert_eq!(admit(&sentinel, "burst", &a, 10), 6);
}
