//! The concurrency grade: exact under threads, every reservation given
//! back, none leaked by a blocked entry.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use sentinel_flow_core::BlockKind;
use sentinel_flow_core::flow::{FlowGrade, FlowRule};

use crate::blocking_rule;
use crate::support::{instance, load, stats};

#[test]
fn concurrency_grade_is_exact_under_threads_and_gives_every_reservation_back() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [FlowRule {
            grade: FlowGrade::Concurrency,
            ..FlowRule::new("r", 3.0)
        }],
    );

    let inside = AtomicI64::new(0);
    let max_inside = AtomicI64::new(0);
    let passed = AtomicU64::new(0);
    let blocked = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..2_000 {
                    match sentinel.entry("r") {
                        Ok(entry) => {
                            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                            max_inside.fetch_max(now, Ordering::SeqCst);
                            std::thread::yield_now();
                            inside.fetch_sub(1, Ordering::SeqCst);
                            drop(entry);
                            passed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(err) => {
                            assert_eq!(err.kind(), BlockKind::Flow);
                            blocked.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });

    let max = max_inside.load(Ordering::SeqCst);
    assert!(max > 0 && max <= 3, "at most 3 inside at once, saw {max}");
    let (passed, blocked) = (passed.into_inner(), blocked.into_inner());
    assert_eq!(passed + blocked, 16_000);
    let now = sentinel.now_ms();
    let node = stats(&sentinel, "r");
    assert_eq!(node.cur_concurrency(), 0);
    assert_eq!(node.total_pass(now), passed);
    assert_eq!(node.total_block(now), blocked);

    // Every reservation was given back: exactly 3 fit again.
    let held: Vec<_> = (0..3).map(|_| sentinel.entry("r").unwrap()).collect();
    assert!(sentinel.entry("r").is_err());
    drop(held);
    assert!(sentinel.entry("r").is_ok());
}

#[test]
fn a_blocked_concurrency_entry_leaks_no_reservation() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [FlowRule {
            grade: FlowGrade::Concurrency,
            ..FlowRule::new("r", 1.0)
        }],
    );

    let held = sentinel.entry("r").unwrap();
    for _ in 0..100 {
        let err = sentinel.entry("r").unwrap_err();
        assert_eq!(blocking_rule(&err).grade, FlowGrade::Concurrency);
    }
    assert_eq!(stats(&sentinel, "r").cur_concurrency(), 1);
    drop(held);
    assert_eq!(stats(&sentinel, "r").cur_concurrency(), 0);
    let next = sentinel.entry("r").expect("the held place was given back");
    assert!(sentinel.entry("r").is_err(), "and only that one");
    drop(next);
}
