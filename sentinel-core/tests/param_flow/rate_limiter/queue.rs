//! The hot-parameter rate limiter's queue under `enter_async`, on tokio's
//! paused clock, and cancelled waits (in a flow queue or a hot-parameter
//! queue) that give the hot count back.

use std::time::Duration;

use sentinel_flow_core::ParamValue;
use sentinel_flow_core::flow::{ControlBehavior, FlowRule};
use sentinel_flow_core::param_flow::ParamFlowGrade;

use super::*;
use crate::concurrency;
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
