//! Panics in the chain and in guarded code give back everything taken.
//!
//! A user [`Slot`] that panics in its check, or guarded code that panics
//! while it holds an [`Entry`], must leave behind no concurrency permit,
//! QPS permit, hot-parameter count or half-open probe: the resource keeps
//! admitting as if the panicking call had never come (a panic in a check)
//! or had completed with an error (a panic in guarded code), and the
//! statistics stay exact under threads.
//!
//! Every test builds its own [`Sentinel`] on a [`ManualClock`]. The panics
//! are caught with `catch_unwind`, as a server's request loop would; their
//! messages are printed by the default panic hook.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};

use sentinel_flow_core::degrade::{BreakerState, DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::{FlowGrade, FlowRule};
use sentinel_flow_core::param_flow::{ParamFlowGrade, ParamFlowRule};
use sentinel_flow_core::slot::{self, EntryContext, ExitContext, Slot};
use sentinel_flow_core::{BlockError, Entry, ManualClock, ParamValue, Sentinel};

use crate::support;
use crate::support::{T0, enter, instance_with, load, stats};

/// A user slot at `order` that panics in its check while `on`.
#[derive(Debug)]
struct Panics {
    order: i32,
    on: Arc<AtomicBool>,
}

impl Panics {
    /// A slot at `order`, panicking from the start, and its switch.
    fn at(order: i32) -> (Self, Arc<AtomicBool>) {
        let on = Arc::new(AtomicBool::new(true));
        let slot = Panics {
            order,
            on: Arc::clone(&on),
        };
        (slot, on)
    }
}

impl Slot for Panics {
    fn order(&self) -> i32 {
        self.order
    }

    fn entry(&self, _: &EntryContext<'_>) -> Result<(), BlockError> {
        if self.on.load(Ordering::Relaxed) {
            panic!("a user slot panics in its check");
        }
        Ok(())
    }
}

/// An instance whose user slot at `order` panics while the switch is on.
fn with_panicking_slot(order: i32) -> (ManualClock, Sentinel, Arc<AtomicBool>) {
    let (slot, on) = Panics::at(order);
    let (clock, sentinel) = instance_with(|builder| builder.slot(slot));
    (clock, sentinel, on)
}

/// Whether entering through `enter` panicked.
fn panics<T>(enter: impl FnOnce() -> T) -> bool {
    catch_unwind(AssertUnwindSafe(|| drop(enter()))).is_err()
}

/// Enters `resource` and panics while holding the entry.
fn panic_inside(sentinel: &Sentinel, resource: &str) {
    let caught = catch_unwind(AssertUnwindSafe(|| {
        let _entry = enter(sentinel, resource);
        panic!("guarded code panics");
    }));
    assert!(caught.is_err());
}

fn concurrency(resource: &str, count: f64) -> FlowRule {
    FlowRule {
        grade: FlowGrade::Concurrency,
        ..FlowRule::new(resource, count)
    }
}

/// Holds as many entries of `resource` as are let through, up to `most`.
fn hold_all<'s>(sentinel: &'s Sentinel, resource: &str, most: usize) -> Vec<Entry<'s>> {
    (0..most)
        .map_while(|_| sentinel.entry(resource).ok())
        .collect()
}

fn breaker_state(sentinel: &Sentinel) -> (BreakerState, Option<u64>) {
    let breakers = sentinel.degrade_rules().breakers();
    assert_eq!(breakers.len(), 1);
    (breakers[0].1.state, breakers[0].1.next_retry_ms)
}

// ---- a user slot that panics in its check ----

#[test]
fn three_panicking_user_slots_leave_a_concurrency_3_resource_admitting() {
    let (_clock, sentinel, on) = with_panicking_slot(slot::order::FLOW + 1);
    load(&sentinel, [concurrency("r", 3.0)]);

    for _ in 0..3 {
        assert!(panics(|| sentinel.entry("r")));
    }
    on.store(false, Ordering::Relaxed);
    let held = hold_all(&sentinel, "r", 4);
    assert_eq!(held.len(), 3, "every permit came back");
    drop(held);
    let node = stats(&sentinel, "r");
    assert_eq!(node.cur_concurrency(), 0);
    assert_eq!(
        node.total_pass(sentinel.now_ms()),
        3,
        "panicked entries uncounted"
    );
    assert_eq!(node.total_block(sentinel.now_ms()), 1);
}

#[test]
fn a_panicking_user_slot_gives_back_a_reject_rules_qps_permits() {
    let (_clock, sentinel, on) = with_panicking_slot(slot::order::DEGRADE + 1);
    load(&sentinel, [FlowRule::new("r", 3.0)]);

    for _ in 0..3 {
        assert!(panics(|| sentinel.entry("r")));
    }
    on.store(false, Ordering::Relaxed);
    assert_eq!(
        support::admit(&sentinel, "r", 4),
        3,
        "the second's permits are whole"
    );
}

#[test]
fn a_panicking_user_slot_gives_back_hot_parameter_counts() {
    let (_clock, sentinel, on) = with_panicking_slot(slot::order::FLOW - 1);
    load(
        &sentinel,
        [ParamFlowRule {
            grade: ParamFlowGrade::Concurrency,
            ..ParamFlowRule::new("r", 0, 1.0)
        }],
    );
    let args = [ParamValue::from("hot")];
    let entry = || sentinel.entry_builder("r").args(&args).enter();

    for _ in 0..3 {
        assert!(panics(entry));
    }
    on.store(false, Ordering::Relaxed);
    let held = entry().expect("the value's count came back");
    assert!(entry().is_err(), "the limit still holds");
    drop(held);
    assert!(entry().is_ok());
}

#[test]
fn a_probe_panicking_in_a_later_user_slot_reopens_the_breaker() {
    let (clock, sentinel, on) = with_panicking_slot(slot::order::DEGRADE + 1);
    load(&sentinel, [opens_at_first_error("r", 60)]);
    on.store(false, Ordering::Relaxed);
    enter(&sentinel, "r").set_error("boom");
    assert_eq!(breaker_state(&sentinel).0, BreakerState::Open);

    clock.advance_ms(60_000);
    on.store(true, Ordering::Relaxed);
    assert!(panics(|| sentinel.entry("r")));
    assert_eq!(
        breaker_state(&sentinel),
        (BreakerState::Open, Some(T0 + 120_000)),
        "the abandoned probe opened the breaker again"
    );

    on.store(false, Ordering::Relaxed);
    clock.advance_ms(60_000);
    let probe = enter(&sentinel, "r");
    assert_eq!(breaker_state(&sentinel).0, BreakerState::HalfOpen);
    drop(probe);
    assert_eq!(breaker_state(&sentinel).0, BreakerState::Closed);
}

/// A user slot whose exit hook panics while `on`.
#[derive(Debug)]
struct PanicsAtExit(Arc<AtomicBool>);

impl Slot for PanicsAtExit {
    fn order(&self) -> i32 {
        slot::order::DEGRADE + 1
    }

    fn entry(&self, _: &EntryContext<'_>) -> Result<(), BlockError> {
        Ok(())
    }

    fn exit(&self, _: &ExitContext<'_>) {
        if self.0.load(Ordering::Relaxed) {
            panic!("a user slot panics in its exit hook");
        }
    }
}

fn with_panicking_exit_hook() -> (Sentinel, Arc<AtomicBool>) {
    let on = Arc::new(AtomicBool::new(true));
    let hook = PanicsAtExit(Arc::clone(&on));
    let (_clock, sentinel) = instance_with(|builder| builder.slot(hook));
    (sentinel, on)
}

#[test]
fn a_panicking_exit_hook_leaves_nothing_held() {
    let (sentinel, on) = with_panicking_exit_hook();
    load(&sentinel, [concurrency("r", 1.0)]);

    for _ in 0..3 {
        let entry = enter(&sentinel, "r");
        assert!(panics(|| entry));
    }
    on.store(false, Ordering::Relaxed);
    assert_eq!(stats(&sentinel, "r").cur_concurrency(), 0);
    assert_eq!(hold_all(&sentinel, "r", 2).len(), 1);
}

#[test]
fn an_exit_hook_panicking_while_guarded_code_unwinds_does_not_abort() {
    let (sentinel, _on) = with_panicking_exit_hook();
    load(&sentinel, [concurrency("r", 1.0)]);

    panic_inside(&sentinel, "r");
    let node = stats(&sentinel, "r");
    assert_eq!(node.cur_concurrency(), 0);
    assert_eq!(node.total_exception(sentinel.now_ms()), 1);
}

#[test]
fn a_state_listener_panicking_as_a_breaker_half_opens_leaves_the_probe_held() {
    let (clock, sentinel) = instance_with(|builder| builder);
    load(&sentinel, [opens_at_first_error("r", 60)]);
    sentinel.degrade_rules().on_state_change(|change| {
        if change.next == BreakerState::HalfOpen {
            panic!("a state listener panics");
        }
    });
    enter(&sentinel, "r").set_error("boom");

    clock.advance_ms(60_000);
    let probe = enter(&sentinel, "r");
    assert_eq!(breaker_state(&sentinel).0, BreakerState::HalfOpen);
    drop(probe);
    assert_eq!(breaker_state(&sentinel).0, BreakerState::Closed);
}

// ---- guarded code that panics ----

#[test]
fn a_panic_in_guarded_code_frees_the_concurrency_permit_and_counts_an_error() {
    let (_clock, sentinel) = instance_with(|builder| builder);
    load(&sentinel, [concurrency("r", 1.0)]);

    for _ in 0..3 {
        panic_inside(&sentinel, "r");
    }
    let node = stats(&sentinel, "r");
    let now = sentinel.now_ms();
    assert_eq!(node.cur_concurrency(), 0);
    assert_eq!(node.total_pass(now), 3);
    assert_eq!(node.total_success(now), 3, "completed, if badly");
    assert_eq!(node.total_exception(now), 3, "a panic is an error");
    assert_eq!(hold_all(&sentinel, "r", 2).len(), 1);
}

fn opens_at_first_error(resource: &str, time_window_sec: u32) -> DegradeRule {
    DegradeRule {
        min_request_amount: 1,
        time_window_sec,
        ..DegradeRule::new(resource, DegradeGrade::ErrorCount, 0.0)
    }
}

/// A probe that panics, under each grade: the breaker opens again (never
/// stays half-open), and half-opens again after its retry timeout.
#[test]
fn a_panicking_probe_reopens_the_breaker_which_half_opens_after_its_retry_timeout() {
    let slow = DegradeRule {
        min_request_amount: 1,
        time_window_sec: 60,
        slow_ratio_threshold: 0.5,
        ..DegradeRule::new("r", DegradeGrade::SlowRequestRatio, 10.0)
    };
    let ratio = DegradeRule {
        min_request_amount: 1,
        time_window_sec: 60,
        ..DegradeRule::new("r", DegradeGrade::ErrorRatio, 0.5)
    };
    for rule in [opens_at_first_error("r", 60), slow, ratio] {
        let (clock, sentinel) = instance_with(|builder| builder);
        load(&sentinel, [rule.clone()]);
        let opening = enter(&sentinel, "r");
        opening.set_error("boom");
        clock.advance_ms(20);
        drop(opening);
        assert_eq!(breaker_state(&sentinel).0, BreakerState::Open, "{rule}");

        clock.advance_ms(60_000);
        let reopened_at = sentinel.now_ms();
        panic_inside(&sentinel, "r");
        assert_eq!(
            breaker_state(&sentinel),
            (BreakerState::Open, Some(reopened_at + 60_000)),
            "{rule}: a panicking probe failed"
        );

        clock.advance_ms(59_999);
        assert!(sentinel.entry("r").is_err(), "{rule}");
        clock.advance_ms(1);
        let probe = enter(&sentinel, "r");
        assert_eq!(breaker_state(&sentinel).0, BreakerState::HalfOpen, "{rule}");
        drop(probe);
        assert_eq!(breaker_state(&sentinel).0, BreakerState::Closed, "{rule}");
    }
}

// ---- under threads ----

/// A slot that panics on every entry whose argument is `"slot"`.
#[derive(Debug)]
struct PanicsOnArg;

impl Slot for PanicsOnArg {
    fn order(&self) -> i32 {
        slot::order::DEGRADE + 1
    }

    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        if ctx.args().first() == Some(&ParamValue::from("slot")) {
            panic!("a user slot panics in its check");
        }
        Ok(())
    }
}

#[test]
fn counts_stay_exact_with_threads_some_panicking() {
    const THREADS: usize = 4;
    const ROUNDS: u64 = 2_000;
    let (_clock, sentinel) = instance_with(|builder| builder.slot(PanicsOnArg));
    load(&sentinel, [concurrency("r", THREADS as f64)]);
    load(
        &sentinel,
        [ParamFlowRule {
            grade: ParamFlowGrade::Concurrency,
            ..ParamFlowRule::new("r", 0, THREADS as f64)
        }],
    );

    let slot_panics = AtomicU64::new(0);
    let body_panics = AtomicU64::new(0);
    let refused = AtomicU64::new(0);
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for thread in 0..THREADS as u64 {
            let (sentinel, barrier) = (&sentinel, &barrier);
            let (slot_panics, body_panics, refused) = (&slot_panics, &body_panics, &refused);
            s.spawn(move || {
                barrier.wait();
                for round in 0..ROUNDS {
                    let what = match (round + thread) % 3 {
                        0 => "slot",
                        1 => "body",
                        _ => "fine",
                    };
                    let args = [ParamValue::from(what)];
                    let outcome = catch_unwind(AssertUnwindSafe(|| {
                        match sentinel.entry_builder("r").args(&args).enter() {
                            Ok(_entry) if what == "body" => panic!("guarded code panics"),
                            Ok(_entry) => {}
                            Err(_) => {
                                refused.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }));
                    if outcome.is_err() {
                        match what {
                            "slot" => slot_panics.fetch_add(1, Ordering::Relaxed),
                            _ => body_panics.fetch_add(1, Ordering::Relaxed),
                        };
                    }
                }
            });
        }
    });

    let total = THREADS as u64 * ROUNDS;
    let slot_panics = slot_panics.into_inner();
    let body_panics = body_panics.into_inner();
    assert_eq!(
        refused.into_inner(),
        0,
        "one entry per thread never exceeds the limits"
    );
    assert_eq!(
        slot_panics,
        (0..THREADS as u64)
            .map(|t| (0..ROUNDS).filter(|r| (r + t) % 3 == 0).count() as u64)
            .sum::<u64>()
    );
    let node = stats(&sentinel, "r");
    let now = sentinel.now_ms();
    assert_eq!(node.cur_concurrency(), 0);
    assert_eq!(node.total_pass(now), total - slot_panics);
    assert_eq!(node.total_success(now), total - slot_panics);
    assert_eq!(node.total_exception(now), body_panics);
    // Every permit and hot-parameter count came back: THREADS entries of
    // one value are admitted at once, and no more.
    let args = [ParamValue::from("fine")];
    let held: Vec<_> = (0..THREADS + 1)
        .map_while(|_| sentinel.entry_builder("r").args(&args).enter().ok())
        .collect();
    assert_eq!(held.len(), THREADS);
}
