//! Integration tests of hot-parameter rules (Sentinel's param flow) through
//! the public API: the token bucket per value and its refill formula,
//! specific items, `param_idx` from the end, collection arguments, burst and
//! long durations, the rate limiter (sync and `enter_async`), the exact
//! concurrency grade under threads, counts given back when a later check
//! refuses or a queued entry is cancelled, bounded memory with a million
//! values, reloads, refused rule lists and user key types.
//!
//! Every test builds its own [`Sentinel`] on a [`ManualClock`] started on a
//! whole second; time is crossed by moving the clock, never by sleeping. The
//! queue tests run on tokio's paused clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::param_flow::{
    ParamControlBehavior, ParamFlowGrade, ParamFlowItem, ParamFlowRule, ParamTableStats,
};
use sentinel_flow_core::slot::{EntryContext, Slot};
use sentinel_flow_core::{BlockError, BlockKind, Entry, ParamKey, ParamValue, RuleError, Sentinel};

mod support;
use support::{admitted, instance, instance_with, load, refusals, stats};

/// One argument.
fn arg(value: impl Into<ParamValue>) -> [ParamValue; 1] {
    [value.into()]
}

fn enter<'s>(
    sentinel: &'s Sentinel,
    resource: &str,
    args: &[ParamValue],
) -> Result<Entry<'s>, BlockError> {
    sentinel.entry_builder(resource).args(args).enter()
}

/// Tries `n` entries of `resource` with `args` now, each exited at once;
/// how many passed.
fn admit(sentinel: &Sentinel, resource: &str, args: &[ParamValue], n: usize) -> usize {
    admitted(n, || enter(sentinel, resource, args))
}

/// The hot-parameter rule that refused an entry (and checks that one did).
fn hot_rule(err: &BlockError) -> &ParamFlowRule {
    support::rule_of(err)
}

fn concurrency(resource: &str, param_idx: i32, count: f64) -> ParamFlowRule {
    ParamFlowRule {
        grade: ParamFlowGrade::Concurrency,
        ..ParamFlowRule::new(resource, param_idx, count)
    }
}

fn rate_limiter(resource: &str, count: f64, max_queueing_time_ms: u64) -> ParamFlowRule {
    ParamFlowRule {
        control_behavior: ParamControlBehavior::RateLimiter,
        max_queueing_time_ms,
        ..ParamFlowRule::new(resource, 0, count)
    }
}

/// The value-table figures of the only rule on `resource`.
fn table_of(sentinel: &Sentinel, resource: &str) -> ParamTableStats {
    let tables: Vec<_> = sentinel
        .param_flow_rules()
        .tables()
        .into_iter()
        .filter(|(rule, _)| rule.resource == resource)
        .collect();
    assert_eq!(tables.len(), 1, "one rule on {resource}");
    tables[0].1
}

// ---- 1. QPS, reject ----

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

// ---- 2. specific items ----

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

// ---- 3. param_idx ----

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

// ---- 4. collection arguments ----

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

// ---- 5. burst and long durations ----

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

// ---- 6. rate limiter ----

#[test]
fn rate_limiter_without_a_queue_spaces_each_value_on_its_own() {
    let (clock, sentinel) = instance();
    load(
        &sentinel,
        [
            // 1000 / 4 = 250 ms apart.
            rate_limiter("r", 4.0, 0),
            // round(1000 × 2 / 3) = 667 ms apart.
            ParamFlowRule {
                duration_in_sec: 2,
                ..rate_limiter("slow", 3.0, 0)
            },
        ],
    );
    let (a, b) = (arg("a"), arg("b"));

    for step in 0..4 {
        assert!(enter(&sentinel, "r", &a).is_ok(), "step {step}");
        let err = enter(&sentinel, "r", &a).unwrap_err();
        assert_eq!(
            hot_rule(&err).control_behavior,
            ParamControlBehavior::RateLimiter
        );
        clock.advance_ms(249);
        assert!(enter(&sentinel, "r", &a).is_err(), "1 ms early at {step}");
        clock.advance_ms(1);
    }
    // b has a pace of its own.
    assert!(enter(&sentinel, "r", &b).is_ok());
    assert!(enter(&sentinel, "r", &b).is_err());

    assert!(enter(&sentinel, "slow", &a).is_ok());
    clock.advance_ms(666);
    assert!(enter(&sentinel, "slow", &a).is_err());
    clock.advance_ms(1);
    assert!(enter(&sentinel, "slow", &a).is_ok());
    let now = sentinel.now_ms();
    assert_eq!(stats(&sentinel, "r").total_pass(now), 5);
    assert_eq!(stats(&sentinel, "r").total_block(now), 9);
}

/// A clock whose waits take no time: entries queued one after another at
/// one instant, as threads arriving together would be.
#[derive(Debug)]
struct StandingStill(sentinel_flow_core::ManualClock);

impl sentinel_flow_core::Clock for StandingStill {
    fn now_ms(&self) -> u64 {
        self.0.now_ms()
    }

    fn now_nanos(&self) -> u64 {
        self.0.now_nanos()
    }

    fn sleep(&self, _: std::time::Duration) {}
}

#[test]
fn rate_limiter_makes_sync_entries_queue_up_to_the_limit() {
    let sentinel = Sentinel::builder()
        .clock(StandingStill(sentinel_flow_core::ManualClock::new(
            support::T0,
        )))
        .build();
    // 1 ms apart, a queue of 5 ms, the clock standing still: the k-th
    // entry after the first waits k ms, until a wait of 5 ms, not under
    // the limit, is refused.
    load(&sentinel, [rate_limiter("r", 1_000.0, 5)]);
    let a = arg("a");
    for k in 0..5 {
        assert!(
            enter(&sentinel, "r", &a).is_ok(),
            "entry {k} queued, then let through"
        );
    }
    assert_eq!(
        enter(&sentinel, "r", &a).unwrap_err().kind(),
        BlockKind::ParamFlow
    );
    assert_eq!(stats(&sentinel, "r").total_pass(sentinel.now_ms()), 5);
}

#[cfg(feature = "tokio")]
mod queue {
    use super::*;

    use std::time::Duration;

    use sentinel_flow_core::flow::ControlBehavior;

    use crate::support::queue::{Entering, drive, start};

    fn entering<'s>(
        sentinel: &'s Sentinel,
        resource: &'static str,
        args: &'s [ParamValue],
    ) -> Entering<'s> {
        Box::pin(sentinel.entry_builder(resource).args(args).enter_async())
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limiter_queues_each_value_up_to_the_max_queueing_time() {
        let (_clock, sentinel) = instance();
        load(&sentinel, [rate_limiter("r", 10.0, 250)]);
        // A flow rule that passes leaves the hot-parameter wait alone.
        load(&sentinel, [FlowRule::new("r", 100.0)]);
        let (a, b) = (arg("a"), arg("b"));

        let mut futures: Vec<Entering<'_>> = vec![
            entering(&sentinel, "r", &a),
            entering(&sentinel, "r", &a),
            entering(&sentinel, "r", &a),
            entering(&sentinel, "r", &a),
            entering(&sentinel, "r", &b),
        ];
        let mut results = start(&mut futures).await;
        assert!(matches!(results[0], Some(Ok(_))), "the first a at once");
        assert!(results[1].is_none(), "a waits 100 ms");
        assert!(results[2].is_none(), "a waits 200 ms");
        let err = results[3].take().unwrap().unwrap_err();
        assert_eq!(
            hot_rule(&err).control_behavior,
            ParamControlBehavior::RateLimiter,
            "300 ms >= 250 ms"
        );
        assert!(matches!(results[4], Some(Ok(_))), "b has its own pace");

        let step = Duration::from_millis(1);
        for (k, driven, entry) in drive(&mut futures, &[1, 2], step, 250).await {
            let (due, ms) = (100 * k as u128, driven.as_millis());
            assert!(
                (due..=due + 1).contains(&ms),
                "entry {k} let through after {ms} ms, due after {due}"
            );
            results[k] = Some(Ok(entry));
        }
        let now = sentinel.now_ms();
        assert_eq!(stats(&sentinel, "r").total_pass(now), 4);
        assert_eq!(stats(&sentinel, "r").total_block(now), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_of_exactly_the_max_queueing_time_is_refused() {
        let (_clock, sentinel) = instance();
        load(&sentinel, [rate_limiter("r", 10.0, 200)]);
        let a = arg("a");
        let mut futures: Vec<Entering<'_>> = (0..3).map(|_| entering(&sentinel, "r", &a)).collect();
        let mut results = start(&mut futures).await;
        assert!(matches!(results[0], Some(Ok(_))));
        assert!(results[1].is_none(), "100 ms < 200 ms");
        let err = results[2].take().unwrap().unwrap_err();
        assert_eq!(
            hot_rule(&err).max_queueing_time_ms,
            200,
            "200 ms waits too long"
        );
        let through = drive(&mut futures, &[1], Duration::from_millis(1), 101).await;
        assert_eq!(through.len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_wait_in_a_flow_queue_gives_the_hot_count_back() {
        let (clock, sentinel) = instance();
        load(&sentinel, [concurrency("r", 0, 1.0)]);
        load(
            &sentinel,
            [FlowRule {
                control_behavior: ControlBehavior::RateLimiter,
                max_queueing_time_ms: 500,
                ..FlowRule::new("r", 10.0)
            }],
        );
        let k = arg("k");

        drop(
            sentinel
                .entry_builder("r")
                .args(&k)
                .enter_async()
                .await
                .unwrap(),
        );
        // Holds k's count and queues 100 ms in the flow rate limiter; the
        // wait is cancelled after 1 ms.
        let cancelled = tokio::time::timeout(
            Duration::from_millis(1),
            sentinel.entry_builder("r").args(&k).enter_async(),
        )
        .await;
        assert!(cancelled.is_err(), "still queued when the timeout fired");

        // Past the cancelled entry's slot the next passes at once, which it
        // could not if the cancelled entry still held k's one count.
        clock.advance_ms(200);
        let entry = sentinel
            .entry_builder("r")
            .args(&k)
            .enter_async()
            .await
            .expect("the cancelled entry's count was given back");
        let err = sentinel
            .entry_builder("r")
            .args(&k)
            .enter_async()
            .await
            .unwrap_err();
        assert_eq!(hot_rule(&err).grade, ParamFlowGrade::Concurrency);
        drop(entry);
        assert_eq!(stats(&sentinel, "r").total_pass(sentinel.now_ms()), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_wait_in_a_hot_parameter_queue_gives_the_hot_count_back() {
        let (clock, sentinel) = instance();
        load(
            &sentinel,
            [concurrency("r", 0, 1.0), rate_limiter("r", 10.0, 500)],
        );
        let k = arg("k");

        drop(
            sentinel
                .entry_builder("r")
                .args(&k)
                .enter_async()
                .await
                .unwrap(),
        );
        let cancelled = tokio::time::timeout(
            Duration::from_millis(1),
            sentinel.entry_builder("r").args(&k).enter_async(),
        )
        .await;
        assert!(cancelled.is_err(), "still queued when the timeout fired");

        clock.advance_ms(200);
        let entry = sentinel
            .entry_builder("r")
            .args(&k)
            .enter_async()
            .await
            .expect("the cancelled entry's count was given back");
        let err = enter(&sentinel, "r", &k).unwrap_err();
        assert_eq!(hot_rule(&err).grade, ParamFlowGrade::Concurrency);
        drop(entry);
    }
}

// ---- 7. concurrency grade ----

#[test]
fn concurrency_is_exact_under_threads_and_leaks_nothing() {
    const LIMIT: i64 = 3;
    let (_clock, sentinel) = instance();
    load(&sentinel, [concurrency("r", 0, LIMIT as f64)]);

    let inside = AtomicI64::new(0);
    let max_inside = AtomicI64::new(0);
    let passed = AtomicU64::new(0);
    let blocked = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                let k = arg("k");
                for _ in 0..2_000 {
                    match enter(&sentinel, "r", &k) {
                        Ok(entry) => {
                            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                            max_inside.fetch_max(now, Ordering::SeqCst);
                            // Hold the count across a reschedule: with 2
                            // cores more calls are inside at once only so.
                            std::thread::yield_now();
                            inside.fetch_sub(1, Ordering::SeqCst);
                            drop(entry);
                            passed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(err) => {
                            assert_eq!(hot_rule(&err).grade, ParamFlowGrade::Concurrency);
                            blocked.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });

    let max = max_inside.load(Ordering::SeqCst);
    assert!(max > 0 && max <= LIMIT, "at most {LIMIT} inside, saw {max}");
    let (passed, blocked) = (passed.into_inner(), blocked.into_inner());
    assert_eq!(passed + blocked, 16_000);
    let now = sentinel.now_ms();
    let node = stats(&sentinel, "r");
    assert_eq!(node.cur_concurrency(), 0);
    assert_eq!(node.total_pass(now), passed);
    assert_eq!(node.total_block(now), blocked);

    // Every count was given back: exactly 3 fit again.
    let k = arg("k");
    let held: Vec<_> = (0..3).map(|_| enter(&sentinel, "r", &k).unwrap()).collect();
    assert!(enter(&sentinel, "r", &k).is_err());
    drop(held);
    assert!(enter(&sentinel, "r", &k).is_ok());
    let table = table_of(&sentinel, "r");
    assert_eq!((table.values, table.overflows), (1, 0));
}

#[test]
fn concurrency_counts_calls_not_permits_and_values_apart() {
    let (_clock, sentinel) = instance();
    load(&sentinel, [concurrency("r", 0, 2.0)]);
    let (a, b) = (arg("a"), arg("b"));
    let big = sentinel
        .entry_builder("r")
        .args(&a)
        .batch_count(5)
        .enter()
        .expect("one call, whatever its batch");
    let second = enter(&sentinel, "r", &a).unwrap();
    assert!(enter(&sentinel, "r", &a).is_err());
    let others: Vec<_> = (0..2).map(|_| enter(&sentinel, "r", &b).unwrap()).collect();
    drop(big);
    let third = enter(&sentinel, "r", &a).expect("the batch entry gave its count back");
    drop((second, third, others));
}

// ---- 8. counts given back when a later check refuses ----

#[test]
fn a_flow_refusal_gives_the_hot_concurrency_count_back() {
    let (_clock, sentinel) = instance();
    load(&sentinel, [concurrency("r", 0, 1.0)]);
    load(&sentinel, [FlowRule::new("r", 0.0)]);
    let k = arg("k");

    // Each is refused by flow, not by the hot-parameter rule: the count
    // taken by the one before was given back.
    for i in 0..5 {
        let err = enter(&sentinel, "r", &k).unwrap_err();
        assert_eq!(err.kind(), BlockKind::Flow, "attempt {i}: {err}");
        assert!(err.rule_as::<FlowRule>().is_some());
    }
    sentinel.flow_rules().load(vec![]).unwrap();
    let held = enter(&sentinel, "r", &k).expect("the count was not leaked");
    assert_eq!(hot_rule(&enter(&sentinel, "r", &k).unwrap_err()).count, 1.0);
    drop(held);
    assert!(enter(&sentinel, "r", &k).is_ok());
}

#[test]
fn a_later_hot_parameter_rule_refusing_gives_the_count_back() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [concurrency("r", 0, 1.0), ParamFlowRule::new("r", 0, 1.0)],
    );
    let k = arg("k");
    drop(enter(&sentinel, "r", &k).unwrap());
    // The QPS rule refuses each time, not the concurrency rule: the count
    // taken before it refused was given back.
    for _ in 0..3 {
        let err = enter(&sentinel, "r", &k).unwrap_err();
        assert_eq!(hot_rule(&err).grade, ParamFlowGrade::Qps);
    }
    // An item's threshold applies to the concurrency grade too.
    load(
        &sentinel,
        [ParamFlowRule {
            param_flow_item_list: vec![ParamFlowItem::new("pair", 2.0)],
            ..concurrency("c", 0, 1.0)
        }],
    );
    let (pair, solo) = (arg("pair"), arg("solo"));
    let held: Vec<_> = (0..2)
        .map(|_| enter(&sentinel, "c", &pair).unwrap())
        .collect();
    assert!(enter(&sentinel, "c", &pair).is_err());
    let one = enter(&sentinel, "c", &solo).unwrap();
    assert!(enter(&sentinel, "c", &solo).is_err());
    drop((held, one));
}

/// Refuses every entry while switched on; runs after every built-in check.
#[derive(Debug, Default)]
struct Refuse(Arc<AtomicBool>);

impl Slot for Refuse {
    fn order(&self) -> i32 {
        0
    }

    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        if self.0.load(Ordering::SeqCst) {
            return Err(ctx.block(BlockKind::Custom("refuse")));
        }
        Ok(())
    }
}

#[test]
fn a_user_slot_or_breaker_refusal_gives_the_hot_concurrency_count_back() {
    let refuse = Arc::new(AtomicBool::new(true));
    let (_clock, sentinel) = instance_with(|builder| builder.slot(Refuse(refuse.clone())));
    load(&sentinel, [concurrency("r", 0, 1.0)]);
    let k = arg("k");

    for _ in 0..3 {
        let err = enter(&sentinel, "r", &k).unwrap_err();
        assert_eq!(err.kind(), BlockKind::Custom("refuse"));
    }
    refuse.store(false, Ordering::SeqCst);

    // An open circuit breaker: one error trips it for 10 s.
    load(
        &sentinel,
        [DegradeRule {
            min_request_amount: 1,
            ..DegradeRule::new("r", DegradeGrade::ErrorCount, 0.0)
        }],
    );
    let failing = enter(&sentinel, "r", &arg("other")).unwrap();
    failing.set_error("boom");
    drop(failing);
    for _ in 0..3 {
        let err = enter(&sentinel, "r", &k).unwrap_err();
        assert_eq!(err.kind(), BlockKind::Degrade, "{err}");
    }
    sentinel.degrade_rules().load(vec![]).unwrap();

    let held = enter(&sentinel, "r", &k).expect("no count was leaked");
    assert_eq!(hot_rule(&enter(&sentinel, "r", &k).unwrap_err()).count, 1.0);
    drop(held);
}

#[test]
fn param_flow_rules_are_checked_after_authority_and_before_flow() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [ParamFlowRule {
            param_flow_item_list: vec![ParamFlowItem::new("never", 0.0)],
            ..ParamFlowRule::new("r", 0, 1.0)
        }],
    );
    load(
        &sentinel,
        [AuthorityRule::new("r", AuthorityStrategy::Black, ["bad"])],
    );
    let a = arg("a");

    // Refused by authority first: a's token is not spent.
    for _ in 0..3 {
        let err = sentinel
            .entry_builder("r")
            .origin("bad")
            .args(&a)
            .enter()
            .unwrap_err();
        assert_eq!(err.kind(), BlockKind::Authority);
    }
    assert!(
        sentinel
            .entry_builder("r")
            .origin("good")
            .args(&a)
            .enter()
            .is_ok()
    );

    // Refused by the hot-parameter rule before a flow rule that would
    // refuse everything.
    load(&sentinel, [FlowRule::new("r", 0.0)]);
    let err = enter(&sentinel, "r", &arg("never")).unwrap_err();
    assert_eq!(hot_rule(&err).param_flow_item_list.len(), 1);
    assert_eq!(
        enter(&sentinel, "r", &arg("fresh")).unwrap_err().kind(),
        BlockKind::Flow
    );
}

// ---- 9. bounded memory ----

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

// ---- 10. reloads and refused rules ----

#[test]
fn reloading_an_unchanged_rule_keeps_its_values_and_a_changed_one_starts_afresh() {
    let (_clock, sentinel) = instance();
    let rule = ParamFlowRule::new("r", 0, 1.0);
    load(&sentinel, [rule.clone()]);
    let a = arg("a");
    assert_eq!(admit(&sentinel, "r", &a, 3), 1);

    // Unchanged, beside a new rule elsewhere: a stays spent.
    load(
        &sentinel,
        [ParamFlowRule::new("other", 0, 5.0), rule.clone()],
    );
    assert_eq!(admit(&sentinel, "r", &a, 3), 0);
    assert_eq!(table_of(&sentinel, "r").values, 1);

    // A changed count is a new rule: a starts afresh.
    let changed = ParamFlowRule::new("r", 0, 2.0);
    load(&sentinel, [changed.clone()]);
    assert_eq!(table_of(&sentinel, "r").values, 0);
    assert_eq!(admit(&sentinel, "r", &a, 3), 2);
    // So does a changed item list.
    let with_item = ParamFlowRule {
        param_flow_item_list: vec![ParamFlowItem::new("b", 3.0)],
        ..changed
    };
    load(&sentinel, [with_item.clone()]);
    assert_eq!(admit(&sentinel, "r", &a, 3), 2);
    assert_eq!(sentinel.param_flow_rules().rules(), vec![with_item]);
}

#[test]
fn a_reload_keeps_held_counts_and_a_replaced_rule_takes_its_counts_back_to_itself() {
    let (_clock, sentinel) = instance();
    let rule = concurrency("r", 0, 1.0);
    load(&sentinel, [rule.clone()]);
    let k = arg("k");

    let held = enter(&sentinel, "r", &k).unwrap();
    load(&sentinel, [rule.clone()]);
    assert!(enter(&sentinel, "r", &k).is_err(), "the count survives");
    drop(held);
    let old = enter(&sentinel, "r", &k).expect("released on the same rule");

    // A changed rule starts with no count; the old entry's exit gives its
    // count to the old rule, not to the new one.
    load(
        &sentinel,
        [ParamFlowRule {
            id: Some(2),
            ..rule
        }],
    );
    let new = enter(&sentinel, "r", &k).expect("a fresh rule");
    drop(old);
    assert!(enter(&sentinel, "r", &k).is_err(), "new still holds k");
    drop(new);
    assert!(enter(&sentinel, "r", &k).is_ok());
}

#[test]
fn bad_rules_are_refused_by_field_and_the_rules_in_force_stay() {
    let (_clock, sentinel) = instance();
    let in_force = vec![ParamFlowRule::new("r", 0, 1.0)];
    sentinel.param_flow_rules().load(in_force.clone()).unwrap();
    let a = arg("a");
    assert_eq!(admit(&sentinel, "r", &a, 2), 1);

    let base = || ParamFlowRule::new("r", 0, 1.0);
    let items = |list: Vec<ParamFlowItem>| ParamFlowRule {
        param_flow_item_list: list,
        ..base()
    };
    let cases: Vec<(&str, ParamFlowRule)> = vec![
        ("count", ParamFlowRule::new("r", 0, -1.0)),
        ("count", ParamFlowRule::new("r", 0, f64::NAN)),
        ("resource", ParamFlowRule::new(" ", 0, 1.0)),
        (
            "duration_in_sec",
            ParamFlowRule {
                duration_in_sec: 0,
                ..base()
            },
        ),
        (
            "control_behavior",
            ParamFlowRule {
                grade: ParamFlowGrade::Concurrency,
                control_behavior: ParamControlBehavior::RateLimiter,
                ..base()
            },
        ),
        (
            "param_flow_item_list",
            items(vec![
                ParamFlowItem::new("x", 1.0),
                ParamFlowItem::new("x", 2.0),
            ]),
        ),
        (
            "param_flow_item_list",
            items(vec![
                ParamFlowItem::new(7u8, 1.0),
                ParamFlowItem::new(7i64, 1.0),
            ]),
        ),
        (
            "param_flow_item_list",
            items(vec![ParamFlowItem::new("x", -1.0)]),
        ),
        (
            "capacity",
            ParamFlowRule {
                capacity: Some(0),
                ..base()
            },
        ),
    ];
    for (field, bad) in cases {
        let errors = sentinel
            .param_flow_rules()
            .load(vec![base(), bad.clone()])
            .expect_err(field);
        let [error]: &[RuleError; 1] = errors.errors().try_into().expect("one error");
        assert_eq!(
            (error.kind, error.index, error.field),
            ("param_flow", 1, field),
            "{bad:?}: {error}"
        );
        assert!(errors.to_string().contains(field), "{errors}");
        assert_eq!(sentinel.param_flow_rules().rules(), in_force);
    }

    // Every problem of a list is reported, in order.
    let errors = sentinel
        .param_flow_rules()
        .load(vec![
            ParamFlowRule::new("r", 0, -1.0),
            base(),
            ParamFlowRule {
                duration_in_sec: 0,
                ..base()
            },
        ])
        .unwrap_err();
    assert_eq!(
        refusals(&errors),
        [
            ("param_flow", 0, "count"),
            ("param_flow", 2, "duration_in_sec")
        ]
    );

    // The rule in force kept its state through every refused load.
    assert_eq!(admit(&sentinel, "r", &a, 2), 0);
    assert_eq!(sentinel.param_flow_rules().rules(), in_force);
}

// ---- 11. user key types ----

/// A user id, limited as its number.
struct UserId(u64);

impl ParamKey for UserId {
    fn to_param(&self) -> ParamValue {
        ParamValue::from(self.0)
    }
}

/// A product key, limited as a string longer than an inline one.
struct Sku {
    vendor: &'static str,
    id: u32,
}

impl ParamKey for Sku {
    fn to_param(&self) -> ParamValue {
        ParamValue::from(format!("{}/product/{:08}", self.vendor, self.id))
    }
}

#[test]
fn a_user_key_type_is_limited_like_its_value() {
    let (_clock, sentinel) = instance();
    sentinel
        .param_flow_rules()
        .load(vec![ParamFlowRule {
            param_flow_item_list: vec![ParamFlowItem::new(ParamValue::of(&UserId(1)), 4.0)],
            ..ParamFlowRule::new("r", 0, 2.0)
        }])
        .unwrap();

    assert_eq!(
        admit(&sentinel, "r", &arg(ParamValue::of(&UserId(7))), 5),
        2
    );
    assert_eq!(admit(&sentinel, "r", &arg(7u32), 5), 0, "7 is 7");
    assert_eq!(
        admit(&sentinel, "r", &arg(ParamValue::of(&UserId(1))), 9),
        4
    );

    // A slice of keys is a list: 7 is spent, 8's token is given back.
    let keys = [UserId(8), UserId(7)];
    let list = arg(ParamValue::of(&keys[..]));
    assert!(hot_rule(&enter(&sentinel, "r", &list).unwrap_err()).count == 2.0);
    assert_eq!(
        admit(&sentinel, "r", &arg(ParamValue::of(&UserId(8))), 5),
        2
    );
    assert_eq!(
        admit(&sentinel, "r", &arg(ParamValue::of(&vec![UserId(9)])), 5),
        2
    );

    let sku = Sku {
        vendor: "acme-industries",
        id: 42,
    };
    let value = ParamValue::of(&sku);
    assert!(matches!(value, ParamValue::Str(_)), "{value:?}");
    assert_eq!(admit(&sentinel, "r", &arg(value), 5), 2);
    let same: Arc<str> = format!("{}/product/{:08}", sku.vendor, sku.id).into();
    assert_eq!(admit(&sentinel, "r", &arg(same), 5), 0);
}
