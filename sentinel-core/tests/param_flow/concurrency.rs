//! The concurrency grade, exact under threads, and the counts given back
//! when a later check (flow, another hot-parameter rule, a user slot, a
//! breaker) refuses; the place of the kind in the chain.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::param_flow::{ParamFlowGrade, ParamFlowItem, ParamFlowRule};
use sentinel_flow_core::slot::{EntryContext, Slot};
use sentinel_flow_core::{BlockError, BlockKind};

use crate::support::{instance, instance_with, load, stats};
use crate::{arg, concurrency, enter, hot_rule, table_of};

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
