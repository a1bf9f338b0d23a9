//! The rate limiter's queue under `enter_async`, on tokio's paused clock:
//! pacing above 1000 QPS, the max queueing time, and cancelled waits that
//! give back what they took.

use sentinel_flow_core::Sentinel;
use sentinel_flow_core::flow::FlowGrade;

use super::*;
use crate::support::queue::{Entering, drive, start};

/// `n` entries of `resource` through `enter_async`, not started.
fn entering<'s>(sentinel: &'s Sentinel, resource: &'static str, n: usize) -> Vec<Entering<'s>> {
    (0..n)
        .map(|_| Box::pin(sentinel.entry_builder(resource).enter_async()) as Entering<'s>)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn rate_limiter_above_1000_qps_queues_each_entry_half_a_millisecond_later() {
    let (_clock, sentinel) = instance();
    load(&sentinel, [rate_limiter("r", 2_000.0, 500)]);

    let mut futures = entering(&sentinel, "r", 1_002);
    let mut results = start(&mut futures).await;
    assert!(
        matches!(results[0], Some(Ok(_))),
        "the first entry passes at once"
    );
    for (k, result) in results.iter().enumerate().take(1_001).skip(1) {
        assert!(result.is_none(), "entry {k} waits its turn");
    }
    let err = results[1_001]
        .take()
        .expect("the 1002nd is decided at once")
        .unwrap_err();
    assert_eq!(blocking_rule(&err).count, 2_000.0);

    // Every queued entry is let through k * 0.5 ms after the first
    // (tokio's timer rounds up to the next millisecond): drive time on
    // in 0.5 ms steps to 501 ms.
    let queued: Vec<usize> = (1..=1_000).collect();
    let through = drive(&mut futures, &queued, Duration::from_micros(500), 1_002).await;
    for (k, driven, entry) in through {
        let due = Duration::from_micros(500 * k as u64);
        assert!(
            driven >= due && driven <= due + Duration::from_millis(1),
            "entry {k} let through after {driven:?}, due after {due:?}"
        );
        results[k] = Some(Ok(entry));
    }

    let now = sentinel.now_ms();
    let node = stats(&sentinel, "r");
    assert_eq!(node.total_pass(now), 1_001);
    assert_eq!(node.total_block(now), 1);
    assert_eq!(node.cur_concurrency(), 1_001);
    drop(results);
    assert_eq!(node.cur_concurrency(), 0);
}

#[tokio::test(start_paused = true)]
async fn rate_limiter_queues_up_to_the_max_queueing_time() {
    let (_clock, sentinel) = instance();
    load(&sentinel, [rate_limiter("r", 10.0, 250)]);

    let mut futures = entering(&sentinel, "r", 4);
    let mut results = start(&mut futures).await;
    assert!(
        matches!(results[0], Some(Ok(_))),
        "the first passes at once"
    );
    assert!(results[1].is_none() && results[2].is_none());
    let err = results[3].take().unwrap().unwrap_err();
    assert_eq!(
        blocking_rule(&err).control_behavior,
        ControlBehavior::RateLimiter,
        "300 ms > 250 ms"
    );

    // Driven on 1 ms at a time to 250 ms: the two queued entries get
    // through 100 and 200 ms after the first.
    let through = drive(&mut futures, &[1, 2], Duration::from_millis(1), 250).await;
    for (k, driven, entry) in through {
        let due = Duration::from_millis(100 * k as u64);
        assert!(
            driven >= due && driven <= due + Duration::from_millis(1),
            "entry {k} let through after {driven:?}"
        );
        results[k] = Some(Ok(entry));
    }
    let now = sentinel.now_ms();
    assert_eq!(stats(&sentinel, "r").total_pass(now), 3);
    assert_eq!(stats(&sentinel, "r").total_block(now), 1);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_queued_entry_counts_nothing() {
    let (_clock, sentinel) = instance();
    load(&sentinel, [rate_limiter("r", 10.0, 500)]);

    let first = sentinel.entry_builder("r").enter_async().await.unwrap();
    drop(first);
    let before = stats(&sentinel, "r").total_pass(sentinel.now_ms());
    assert_eq!(before, 1);

    // Queued for 100 ms; dropped after 1 ms.
    let cancelled = tokio::time::timeout(
        Duration::from_millis(1),
        sentinel.entry_builder("r").enter_async(),
    )
    .await;
    assert!(cancelled.is_err(), "still queued when the timeout fired");

    let now = sentinel.now_ms();
    let node = stats(&sentinel, "r");
    assert_eq!(node.total_pass(now), before);
    assert_eq!(node.total_block(now), 0);
    assert_eq!(node.pass_qps(now), 1.0);
    assert_eq!(node.cur_concurrency(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_queued_entry_gives_its_reject_permits_back() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [FlowRule::new("r", 2.0), rate_limiter("r", 10.0, 500)],
    );
    drop(sentinel.entry_builder("r").enter_async().await.unwrap());
    // Passed the reject rule, then queued for 100 ms; dropped after 1.
    let cancelled = tokio::time::timeout(
        Duration::from_millis(1),
        sentinel.entry_builder("r").enter_async(),
    )
    .await;
    assert!(cancelled.is_err(), "still queued when the timeout fired");
    // The reject rule's second permit is free again.
    assert!(sentinel.entry_builder("r").enter_async().await.is_ok());
    assert!(sentinel.entry_builder("r").enter_async().await.is_err());
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_queued_entry_gives_its_concurrency_back() {
    let (clock, sentinel) = instance();
    load(
        &sentinel,
        [
            FlowRule {
                grade: FlowGrade::Concurrency,
                ..FlowRule::new("r", 1.0)
            },
            rate_limiter("r", 10.0, 500),
        ],
    );

    drop(sentinel.entry_builder("r").enter_async().await.unwrap());
    // Passes the concurrency rule (holding its place) and queues 100 ms.
    let cancelled = tokio::time::timeout(
        Duration::from_millis(1),
        sentinel.entry_builder("r").enter_async(),
    )
    .await;
    assert!(cancelled.is_err());
    assert_eq!(stats(&sentinel, "r").cur_concurrency(), 0);

    // Past the cancelled entry's slot: the next passes at once, which it
    // could not if the cancelled entry still held the one place.
    clock.advance_ms(200);
    let entry = sentinel
        .entry_builder("r")
        .enter_async()
        .await
        .expect("the cancelled entry's place was given back");
    let err = sentinel.entry_builder("r").enter_async().await.unwrap_err();
    assert_eq!(blocking_rule(&err).grade, FlowGrade::Concurrency);
    drop(entry);
    let now = sentinel.now_ms();
    assert_eq!(stats(&sentinel, "r").total_pass(now), 2);
}

#[tokio::test(start_paused = true)]

async fn a_cancelled_queued_entry_counts_nothing_in_a_rules_own_window() {
    let (clock, sentinel) = instance();
    load(
        &sentinel,
        [
            // Its own window of one 500 ms bucket: QPS = 2 x passes, so
            // 4 QPS admits 2 per bucket.
            FlowRule {
                stat_interval_ms: 500,
                stat_sample_count: 1,
                ..FlowRule::new("r", 4.0)
            },
            rate_limiter("r", 10.0, 500),
        ],
    );

    drop(sentinel.entry_builder("r").enter_async().await.unwrap());
    let cancelled = tokio::time::timeout(
        Duration::from_millis(1),
        sentinel.entry_builder("r").enter_async(),
    )
    .await;
    assert!(cancelled.is_err());

    // Still in the first 500 ms bucket, past the cancelled entry's slot:
    // one pass so far, so one more fits.
    clock.advance_ms(200);
    assert_eq!(stats(&sentinel, "r").total_pass(sentinel.now_ms()), 1);
    let second = sentinel.entry_builder("r").enter_async().await;
    assert!(
        second.is_ok(),
        "one real pass in the window, the second should fit: {second:?}"
    );
}
