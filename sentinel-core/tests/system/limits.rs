//! Each limit against the inbound total, inbound entries only, the
//! strictest rule winning, Sentinel's BBR condition for the load limit with
//! injected readings, and the QPS limit under threads.

use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};

use sentinel_flow_core::BlockKind;
use sentinel_flow_core::system::SystemRule;

use crate::{inbound, rule, setup};

#[test]
fn inbound_qps_over_the_limit_is_refused_across_resources() {
    let (clock, _, sentinel) = setup(vec![rule(|r| r.qps = Some(3.0))]);
    assert!(inbound(&sentinel, "a").is_ok());
    assert!(inbound(&sentinel, "b").is_ok());
    assert!(inbound(&sentinel, "c").is_ok());
    let err = inbound(&sentinel, "a").unwrap_err();
    assert_eq!(err.kind(), BlockKind::System);
    assert_eq!(err.resource(), "a", "named with the resource entered");
    assert_eq!(
        err.rule_as::<SystemRule>().unwrap().to_string(),
        "system rule: qps <= 3"
    );
    // Outbound entries are neither checked nor counted in the inbound total.
    for _ in 0..10 {
        assert!(sentinel.entry("db").is_ok());
    }
    // The next second has room again.
    clock.advance_ms(1_000);
    assert!(inbound(&sentinel, "a").is_ok());
    let now = sentinel.now_ms();
    assert_eq!(
        sentinel
            .resource_node("a")
            .unwrap()
            .stats()
            .total_block(now),
        1
    );
}

#[test]
fn concurrency_over_max_thread_is_refused() {
    let (_, _, sentinel) = setup(vec![rule(|r| r.max_thread = Some(2))]);
    // Sentinel compares the calls inside before this one: 0, 1, 2 pass.
    let held: Vec<_> = (0..3).map(|_| inbound(&sentinel, "r").unwrap()).collect();
    assert_eq!(
        inbound(&sentinel, "r").unwrap_err().kind(),
        BlockKind::System
    );
    drop(held);
    assert!(inbound(&sentinel, "r").is_ok());
}

#[test]
fn average_response_time_over_the_limit_is_refused() {
    let (clock, _, sentinel) = setup(vec![rule(|r| r.avg_rt = Some(20))]);
    let entry = inbound(&sentinel, "r").unwrap();
    clock.advance_ms(20);
    drop(entry);
    assert!(inbound(&sentinel, "r").is_ok(), "20 ms is not over 20");
    let entry = inbound(&sentinel, "r").unwrap();
    clock.advance_ms(60);
    drop(entry); // average now (20 + 0 + 60) / 3 ms
    assert_eq!(
        inbound(&sentinel, "r").unwrap_err().kind(),
        BlockKind::System
    );
    // A second later the slow calls have left the window.
    clock.advance_ms(1_000);
    assert!(inbound(&sentinel, "r").is_ok());
}

#[test]
fn cpu_usage_over_the_limit_is_refused_and_unknown_usage_passes() {
    let (_, status, sentinel) = setup(vec![rule(|r| r.highest_cpu_usage = Some(0.8))]);
    assert!(inbound(&sentinel, "r").is_ok(), "unknown usage");
    status.set_cpu_usage(Some(0.8));
    assert!(inbound(&sentinel, "r").is_ok(), "at the limit");
    status.set_cpu_usage(Some(0.95));
    let err = inbound(&sentinel, "r").unwrap_err();
    assert_eq!(
        err.rule_as::<SystemRule>().unwrap().to_string(),
        "system rule: cpu <= 0.8"
    );
    status.set_cpu_usage(Some(0.3));
    assert!(inbound(&sentinel, "r").is_ok());
}

#[test]
fn a_high_load_refuses_only_while_the_service_falls_behind() {
    let (clock, status, sentinel) = setup(vec![rule(|r| r.highest_system_load = Some(4.0))]);
    // History: 100 calls of 50 ms completed in one bucket: max success QPS
    // 200 (a 500 ms bucket), min RT 50 ms: it keeps up with 200 * 50 / 1000
    // = 10 calls inside.
    let warm: Vec<_> = (0..100).map(|_| inbound(&sentinel, "r").unwrap()).collect();
    clock.advance_ms(50);
    drop(warm);
    let node = sentinel.inbound_node();
    let now = sentinel.now_ms();
    assert_eq!(node.max_success_qps(now), 200.0);
    assert_eq!(node.min_rt(now), 50);
    status.set_load_average(Some(8.0));
    let held: Vec<_> = (0..11).map(|_| inbound(&sentinel, "r").unwrap()).collect();
    let err = inbound(&sentinel, "r").unwrap_err();
    assert_eq!(
        err.rule_as::<SystemRule>().unwrap().to_string(),
        "system rule: load <= 4"
    );
    // Below the load limit nothing is refused, however many are inside.
    status.set_load_average(Some(3.0));
    let more = inbound(&sentinel, "r").unwrap();
    drop((held, more));
}

#[test]
fn with_no_history_a_high_load_admits_what_sentinels_defaults_allow() {
    // No completion yet: max success QPS counts one per bucket (2) and the
    // min RT is the 5 000 ms ceiling, so 2 * 5000 / 1000 = 10 may be inside.
    let (_, status, sentinel) = setup(vec![rule(|r| r.highest_system_load = Some(1.0))]);
    status.set_load_average(Some(2.0));
    let held: Vec<_> = (0..11).map(|_| inbound(&sentinel, "r").unwrap()).collect();
    assert_eq!(
        inbound(&sentinel, "r").unwrap_err().kind(),
        BlockKind::System
    );
    status.set_load_average(None);
    assert!(
        inbound(&sentinel, "r").is_ok(),
        "an unknown load is not over"
    );
    drop(held);
}

#[test]
fn the_strictest_value_of_each_limit_applies() {
    let (_, _, sentinel) = setup(vec![
        rule(|r| {
            r.id = Some(1);
            r.qps = Some(10.0);
            r.max_thread = Some(1);
        }),
        rule(|r| {
            r.id = Some(2);
            r.qps = Some(2.0);
            r.max_thread = Some(50);
        }),
    ]);
    let first = inbound(&sentinel, "r").unwrap();
    let second = inbound(&sentinel, "r").unwrap();
    let err = inbound(&sentinel, "r").unwrap_err();
    assert_eq!(
        err.rule_as::<SystemRule>().unwrap().to_string(),
        "system rule #2: qps <= 2"
    );
    drop((first, second));
    assert_eq!(sentinel.system_rules().rules().len(), 2, "kept as loaded");
}

#[test]
fn the_qps_limit_holds_under_threads() {
    let (_, _, sentinel) = setup(vec![rule(|r| r.qps = Some(100.0))]);
    let passed = AtomicU64::new(0);
    let barrier = Barrier::new(4);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                barrier.wait();
                for _ in 0..200 {
                    if inbound(&sentinel, "r").is_ok() {
                        passed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    // The check reads, then the pass is counted (Sentinel's order): threads
    // racing between the two may each pass, at most one extra per thread.
    let passed = passed.into_inner();
    assert!((100..=104).contains(&passed), "{passed} passed");
}
