//! The checker against Sentinel's formulas, step by step, with time passed
//! as numbers.

use std::sync::Arc;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicI64, AtomicU64};

use super::*;
use crate::ParamValue;

const MS: u64 = 1_000_000;

fn qps(count: f64) -> ParamFlowRule {
    ParamFlowRule::new("r", 0, count)
}

fn args(value: impl Into<ParamValue>) -> [ParamValue; 1] {
    [value.into()]
}

/// Checks one permit of `value` at `now_ms`.
fn at(compiled: &CompiledParamFlow, value: &str, now_ms: u64) -> ParamDecision {
    compiled.check(&args(value), 1, now_ms, || now_ms * MS)
}

#[test]
fn token_bucket_follows_sentinels_formula_step_by_step() {
    let c = CompiledParamFlow::new(qps(5.0));
    let a = ParamValue::from("a");
    // First request: maxCount - acquire = 5 - 1 tokens left, time recorded.
    assert_eq!(at(&c, "a", 10_000), ParamDecision::Pass);
    assert_eq!(c.tokens_of(&a), Some((4, 10_000)));
    for left in (0..4).rev() {
        assert_eq!(at(&c, "a", 10_500), ParamDecision::Pass);
        assert_eq!(c.tokens_of(&a), Some((left, 10_000)));
    }
    assert_eq!(at(&c, "a", 10_999), ParamDecision::Block);
    // passTime must exceed the duration: 1000 ms is not enough.
    assert_eq!(at(&c, "a", 11_000), ParamDecision::Block);
    // 1001 ms: toAdd = 1001 * 5 / 1000 = 5, capped at 5, minus 1.
    assert_eq!(at(&c, "a", 11_001), ParamDecision::Pass);
    assert_eq!(c.tokens_of(&a), Some((4, 11_001)));
    // A batch takes several tokens; one larger than what is left is refused
    // without taking any.
    assert_eq!(c.check(&args("a"), 3, 11_002, || 0), ParamDecision::Pass);
    assert_eq!(c.tokens_of(&a), Some((1, 11_001)));
    assert_eq!(c.check(&args("a"), 2, 11_003, || 0), ParamDecision::Block);
    assert_eq!(c.tokens_of(&a), Some((1, 11_001)));
    // 1.6 s later: toAdd = 1600 * 5 / 1000 = 8; 1 + 8 > 5, so 5 - 1.
    assert_eq!(at(&c, "a", 12_601), ParamDecision::Pass);
    assert_eq!(c.tokens_of(&a), Some((4, 12_601)));
    // A batch above the maximum never passes.
    assert_eq!(c.check(&args("a"), 6, 99_000, || 0), ParamDecision::Block);
    // Other values have buckets of their own.
    assert_eq!(at(&c, "b", 12_601), ParamDecision::Pass);
    assert_eq!(c.tokens_of(&ParamValue::from("b")), Some((4, 12_601)));
}

#[test]
fn partial_refills_and_long_durations_use_integer_math() {
    let c = CompiledParamFlow::new(ParamFlowRule {
        duration_in_sec: 2,
        ..qps(10.0)
    });
    let a = ParamValue::from("a");
    assert_eq!(at(&c, "a", 0), ParamDecision::Pass);
    for _ in 0..9 {
        assert_eq!(at(&c, "a", 1), ParamDecision::Pass);
    }
    assert_eq!(c.tokens_of(&a), Some((0, 0)));
    assert_eq!(at(&c, "a", 2_000), ParamDecision::Block);
    // 2001 ms of 2000: toAdd = 2001 * 10 / 2000 = 10.
    assert_eq!(at(&c, "a", 2_001), ParamDecision::Pass);
    assert_eq!(c.tokens_of(&a), Some((9, 2_001)));
    for _ in 0..9 {
        assert_eq!(at(&c, "a", 2_002), ParamDecision::Pass);
    }
    // Not a whole duration: Sentinel adds nothing until one has passed.
    assert_eq!(at(&c, "a", 3_500), ParamDecision::Block);
    // 2300 ms: toAdd = 2300 * 10 / 2000 = 11, capped at 10, minus 1.
    assert_eq!(at(&c, "a", 4_301), ParamDecision::Pass);
    assert_eq!(c.tokens_of(&a), Some((9, 4_301)));
}

#[test]
fn burst_raises_the_bucket_above_count() {
    let c = CompiledParamFlow::new(ParamFlowRule {
        burst_count: 3,
        ..qps(2.0)
    });
    let a = ParamValue::from("a");
    assert_eq!(at(&c, "a", 0), ParamDecision::Pass);
    assert_eq!(c.tokens_of(&a), Some((4, 0)));
    for _ in 0..4 {
        assert_eq!(at(&c, "a", 0), ParamDecision::Pass);
    }
    assert_eq!(at(&c, "a", 0), ParamDecision::Block);
    // Refill at count's rate: 1500 ms * 2 / 1000 = 3 tokens, then one taken.
    assert_eq!(at(&c, "a", 1_500), ParamDecision::Pass);
    assert_eq!(c.tokens_of(&a), Some((2, 1_500)));
    // A long pause fills up to count + burst only.
    assert_eq!(at(&c, "a", 60_000), ParamDecision::Pass);
    assert_eq!(c.tokens_of(&a), Some((4, 60_000)));
}

#[test]
fn a_clock_that_goes_backwards_refills_nothing() {
    let c = CompiledParamFlow::new(qps(1.0));
    assert_eq!(at(&c, "a", 5_000), ParamDecision::Pass);
    assert_eq!(at(&c, "a", 1_000), ParamDecision::Block);
    assert_eq!(at(&c, "a", 0), ParamDecision::Block);
    assert_eq!(at(&c, "a", 6_001), ParamDecision::Pass);
}

#[test]
fn specific_items_have_their_own_threshold() {
    let c = CompiledParamFlow::new(ParamFlowRule {
        param_flow_item_list: vec![
            ParamFlowItem::new("vip", 3.0),
            ParamFlowItem::new(7u64, 0.0),
            ParamFlowItem::new("small", 1.9),
        ],
        ..qps(1.0)
    });
    for _ in 0..3 {
        assert_eq!(at(&c, "vip", 0), ParamDecision::Pass);
    }
    assert_eq!(at(&c, "vip", 0), ParamDecision::Block);
    assert_eq!(at(&c, "plain", 0), ParamDecision::Pass);
    assert_eq!(at(&c, "plain", 0), ParamDecision::Block);
    // 1.9 is read as 1, as Sentinel's (long) count.
    assert_eq!(at(&c, "small", 0), ParamDecision::Pass);
    assert_eq!(at(&c, "small", 0), ParamDecision::Block);
    // An item of count 0 refuses its value from the first call, whatever
    // the integer type it comes in.
    for seven in [
        ParamValue::from(7u8),
        ParamValue::UInt(7),
        ParamValue::Int(7),
    ] {
        assert_eq!(c.check(&[seven], 1, 0, || 0), ParamDecision::Block);
    }
    assert_eq!(c.check(&args(8), 1, 0, || 0), ParamDecision::Pass);
}

#[test]
fn items_of_other_kinds_leave_strings_at_the_rules_count() {
    // No item is a string: a string value takes the rule's count, even
    // one whose text spells an item's value; the items still apply.
    let c = CompiledParamFlow::new(ParamFlowRule {
        param_flow_item_list: vec![
            ParamFlowItem::new(false, 5.0),
            ParamFlowItem::new(7u64, 0.0),
        ],
        ..qps(1.0)
    });
    assert_eq!(at(&c, "7", 0), ParamDecision::Pass);
    assert_eq!(at(&c, "7", 0), ParamDecision::Block);
    assert_eq!(at(&c, "false", 0), ParamDecision::Pass);
    assert_eq!(at(&c, "false", 0), ParamDecision::Block);
    assert_eq!(c.check(&args(7), 1, 0, || 0), ParamDecision::Block);
    for _ in 0..5 {
        assert_eq!(c.check(&args(false), 1, 0, || 0), ParamDecision::Pass);
    }
    assert_eq!(c.check(&args(false), 1, 0, || 0), ParamDecision::Block);
}

#[test]
fn items_of_other_kinds_leave_numbers_at_the_rules_count() {
    // Marker items only (a gateway rule's): a number takes the rule's
    // count, the marker its item's.
    let markers = CompiledParamFlow::new(ParamFlowRule {
        param_flow_item_list: vec![ParamFlowItem::new(false, 3.0)],
        ..qps(1.0)
    });
    for number in [ParamValue::Int(0), ParamValue::Int(-5), ParamValue::UInt(1)] {
        assert_eq!(
            markers.check(std::slice::from_ref(&number), 1, 0, || 0),
            ParamDecision::Pass
        );
        assert_eq!(markers.check(&[number], 1, 0, || 0), ParamDecision::Block);
    }
    for _ in 0..3 {
        assert_eq!(markers.check(&args(false), 1, 0, || 0), ParamDecision::Pass);
    }
    assert_eq!(
        markers.check(&args(false), 1, 0, || 0),
        ParamDecision::Block
    );
    // An integer item applies to the integer whatever its variant; a float
    // of the same magnitude is another value.
    for (item, value) in [
        (ParamValue::UInt(9), ParamValue::Int(9)),
        (ParamValue::Int(9), ParamValue::UInt(9)),
    ] {
        let ints = CompiledParamFlow::new(ParamFlowRule {
            param_flow_item_list: vec![ParamFlowItem::new(item, 0.0)],
            ..qps(1.0)
        });
        assert_eq!(ints.check(&[value], 1, 0, || 0), ParamDecision::Block);
        assert_eq!(
            ints.check(&[ParamValue::Float(9.0)], 1, 0, || 0),
            ParamDecision::Pass
        );
    }
}

#[test]
fn count_zero_refuses_every_value() {
    for rule in [
        qps(0.0),
        qps(0.7),
        ParamFlowRule {
            control_behavior: ParamControlBehavior::RateLimiter,
            max_queueing_time_ms: 1_000,
            ..qps(0.0)
        },
        ParamFlowRule {
            grade: ParamFlowGrade::Concurrency,
            ..qps(0.0)
        },
    ] {
        let c = CompiledParamFlow::new(rule);
        assert_eq!(at(&c, "a", 0), ParamDecision::Block, "{}", c.rule());
        assert_eq!(c.check(&args("a"), 0, 0, || 0), ParamDecision::Block);
    }
}

#[test]
fn param_idx_counts_from_the_end_and_a_missing_argument_passes() {
    let last = CompiledParamFlow::new(ParamFlowRule {
        param_idx: -1,
        ..qps(1.0)
    });
    let call = |c: &CompiledParamFlow, args: &[ParamValue]| c.check(args, 1, 0, || 0);
    let two = [ParamValue::from("x"), ParamValue::from("hot")];
    assert_eq!(call(&last, &two), ParamDecision::Pass);
    // The last argument, "hot", is spent; the first is not looked at.
    let other_first = [ParamValue::from("y"), ParamValue::from("hot")];
    assert_eq!(call(&last, &other_first), ParamDecision::Block);
    assert_eq!(call(&last, &args("hot")), ParamDecision::Block);
    assert_eq!(call(&last, &[]), ParamDecision::Pass);

    let second = CompiledParamFlow::new(ParamFlowRule {
        param_idx: 1,
        ..qps(0.0)
    });
    assert_eq!(call(&second, &two), ParamDecision::Block);
    assert_eq!(call(&second, &args("x")), ParamDecision::Pass);
    for idx in [-3, 2, i32::MIN, i32::MAX] {
        let out_of_range = CompiledParamFlow::new(ParamFlowRule {
            param_idx: idx,
            ..qps(0.0)
        });
        assert_eq!(call(&out_of_range, &two), ParamDecision::Pass, "{idx}");
    }
}

#[test]
fn a_list_argument_checks_each_element_and_gives_back_on_block() {
    let c = CompiledParamFlow::new(qps(1.0));
    let list = |values: &[&str]| [ParamValue::list(values.iter().copied())];
    assert_eq!(c.check(&list(&["a", "b"]), 1, 0, || 0), ParamDecision::Pass);
    assert_eq!(at(&c, "a", 0), ParamDecision::Block);
    assert_eq!(at(&c, "b", 0), ParamDecision::Block);
    // "c" passes, then "b" is refused: "c" gets its token back.
    assert_eq!(
        c.check(&list(&["c", "b"]), 1, 0, || 0),
        ParamDecision::Block
    );
    assert_eq!(c.tokens_of(&ParamValue::from("c")), Some((1, 0)));
    assert_eq!(at(&c, "c", 0), ParamDecision::Pass);
    // The same value twice takes two tokens.
    assert_eq!(
        c.check(&list(&["d", "d"]), 1, 0, || 0),
        ParamDecision::Block
    );
    assert_eq!(at(&c, "d", 0), ParamDecision::Pass);
    // An empty list has nothing to limit.
    assert_eq!(c.check(&list(&[]), 1, 0, || 0), ParamDecision::Pass);
}

#[test]
fn a_list_under_the_concurrency_grade_holds_each_element() {
    let c = CompiledParamFlow::new(ParamFlowRule {
        grade: ParamFlowGrade::Concurrency,
        ..qps(1.0)
    });
    let ab = [ParamValue::list(["a", "b"])];
    let ParamDecision::Held(held) = c.check(&ab, 1, 0, || 0) else {
        panic!("a list within its limits is held");
    };
    assert!(matches!(held, ParamHeld::List(_)));
    assert_eq!(at(&c, "a", 0), ParamDecision::Block);
    // "c" is taken, then "b" refused: "c" is given back at once.
    let cb = [ParamValue::list(["c", "b"])];
    assert_eq!(c.check(&cb, 1, 0, || 0), ParamDecision::Block);
    let ParamDecision::Held(held_c) = at(&c, "c", 0) else {
        panic!("c was given back");
    };
    c.release(held);
    c.release(held_c);
    for value in ["a", "b", "c"] {
        assert_eq!(c.table().count_of(c.table().key_of(&value.into())), 0);
    }
    assert!(matches!(at(&c, "a", 0), ParamDecision::Held(_)));
}

#[test]
fn rate_limiter_spaces_requests_and_bounds_the_queue() {
    let c = CompiledParamFlow::new(ParamFlowRule {
        control_behavior: ParamControlBehavior::RateLimiter,
        max_queueing_time_ms: 250,
        ..qps(10.0)
    });
    let t = 7_000;
    // costTime = round(1000 * 1 * 1 / 10) = 100 ms.
    assert_eq!(at(&c, "a", t), ParamDecision::Pass);
    assert_eq!(at(&c, "a", t), ParamDecision::Wait(100 * MS));
    assert_eq!(at(&c, "a", t), ParamDecision::Wait(200 * MS));
    // The next would wait 300 ms: not less than 250.
    assert_eq!(at(&c, "a", t), ParamDecision::Block);
    // Other values are paced on their own.
    assert_eq!(at(&c, "b", t), ParamDecision::Pass);
    // Time catches up with the queue: the slot after it is free.
    assert_eq!(at(&c, "a", t + 300), ParamDecision::Pass);
    // A batch of 2 costs 200 ms: it waits for the slot after it.
    assert_eq!(
        c.check(&args("a"), 2, t + 300, || (t + 300) * MS),
        ParamDecision::Wait(200 * MS)
    );
    // Nanosecond time: 50 ms into the wait, 150 ms remain.
    assert_eq!(
        c.check(&args("b"), 1, t + 50, || (t + 50) * MS + 1),
        ParamDecision::Wait(50 * MS - 1)
    );
}

#[test]
fn rate_limiter_rounds_cost_and_defaults_to_no_queue() {
    let c = CompiledParamFlow::new(ParamFlowRule {
        control_behavior: ParamControlBehavior::RateLimiter,
        duration_in_sec: 2,
        ..qps(3.0)
    });
    // costTime = round(1000 * 2 / 3) = 667 ms; no queue by default.
    assert_eq!(at(&c, "a", 0), ParamDecision::Pass);
    assert_eq!(at(&c, "a", 666), ParamDecision::Block);
    assert_eq!(at(&c, "a", 667), ParamDecision::Pass);
    assert_eq!(at(&c, "a", 1_333), ParamDecision::Block);
    assert_eq!(at(&c, "a", 1_334), ParamDecision::Pass);
}

#[test]
fn concurrency_is_exact_with_eight_threads_on_one_value() {
    const LIMIT: i64 = 3;
    let c = Arc::new(CompiledParamFlow::new(ParamFlowRule {
        grade: ParamFlowGrade::Concurrency,
        ..qps(LIMIT as f64)
    }));
    let inside = Arc::new(AtomicI64::new(0));
    let most = Arc::new(AtomicI64::new(0));
    let passed = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (c, inside, most, passed) =
                (c.clone(), inside.clone(), most.clone(), passed.clone());
            std::thread::spawn(move || {
                let hot = args("hot");
                for i in 0..20_000u64 {
                    match c.check(&hot, 1, i / 1_000, || 0) {
                        ParamDecision::Held(held) => {
                            let now = inside.fetch_add(1, SeqCst) + 1;
                            most.fetch_max(now, SeqCst);
                            passed.fetch_add(1, SeqCst);
                            // Hold the value across a reschedule: with 2
                            // cores, more than 2 calls are inside only so.
                            std::thread::yield_now();
                            inside.fetch_sub(1, SeqCst);
                            c.release(held);
                        }
                        ParamDecision::Block => {}
                        other => panic!("{other:?}"),
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let most = most.load(SeqCst);
    assert!(most <= LIMIT, "{most} calls inside at once, limit {LIMIT}");
    assert!(passed.load(SeqCst) > 1_000);
    let key = c.table().key_of(&ParamValue::from("hot"));
    assert_eq!(c.table().count_of(key), 0, "every count given back");
}

#[test]
fn concurrency_counts_calls_not_permits() {
    let c = CompiledParamFlow::new(ParamFlowRule {
        grade: ParamFlowGrade::Concurrency,
        ..qps(2.0)
    });
    let ParamDecision::Held(first) = c.check(&args("a"), 5, 0, || 0) else {
        panic!()
    };
    let ParamDecision::Held(second) = at(&c, "a", 0) else {
        panic!()
    };
    assert_eq!(at(&c, "a", 0), ParamDecision::Block);
    c.release(first);
    let ParamDecision::Held(third) = at(&c, "a", 0) else {
        panic!()
    };
    c.release(second);
    c.release(third);
}

#[test]
fn a_million_distinct_values_keep_memory_bounded_and_hot_state() {
    let c = CompiledParamFlow::new(ParamFlowRule {
        duration_in_sec: 3_600,
        capacity: Some(64),
        ..qps(2.0)
    });
    assert_eq!(c.table().slots(), 64);
    let hot = args("hot");
    assert_eq!(c.check(&hot, 2, 0, || 0), ParamDecision::Pass);
    for i in 0..1_000_000u64 {
        let now = 1 + i / 4;
        // The hot value is seen every millisecond and stays spent.
        if i % 4 == 0 {
            assert_eq!(c.check(&hot, 1, now, || 0), ParamDecision::Block, "{i}");
        }
        assert_eq!(c.check(&args(i), 1, now, || 0), ParamDecision::Pass);
    }
    assert!(c.table().occupied() <= 64);
    assert!(c.evictions() >= 1_000_000 - 64);
    // A value evicted long ago starts afresh.
    assert_eq!(c.check(&args(0u64), 2, 250_001, || 0), ParamDecision::Pass);
}

#[test]
fn the_decision_is_small() {
    assert!(std::mem::size_of::<ParamDecision>() <= 16);
    assert_eq!(std::mem::size_of::<ParamHeld>(), 16);
}
