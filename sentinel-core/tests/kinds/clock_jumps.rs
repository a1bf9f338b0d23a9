//! An instance whose clock jumps: set back a few seconds or an hour, or
//! forward to the year 2500 and back. The engine's time never goes
//! backwards and goes on at once, so flow windows, circuit breakers and
//! hot-parameter limits all work normally within one window of the jump.
//!
//! Every test builds its own [`Sentinel`] on a [`ManualClock`] and moves
//! the clock by hand.

use sentinel_flow_core::degrade::{BreakerState, DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::param_flow::ParamFlowRule;
use sentinel_flow_core::{ManualClock, ParamValue, Sentinel};

use crate::support::{T0, admit, admitted, instance, load};

/// Milliseconds from the Unix epoch to 2500-01-01.
const YEAR_2500: u64 = 16_725_225_600_000;

/// A flow rule of 10 a second on `resource`.
fn ten_a_second(resource: &str) -> FlowRule {
    FlowRule::new(resource, 10.0)
}

fn breaker_state(sentinel: &Sentinel) -> BreakerState {
    let breakers = sentinel.degrade_rules().breakers();
    assert_eq!(breakers.len(), 1);
    breakers[0].1.state
}

/// Reads the time once, at the jump, as a live instance does on every
/// entry (the clock's movement before the engine first sees it back
/// cannot be told from the jump itself).
fn seen_at_the_jump(sentinel: &Sentinel) {
    let _ = sentinel.now_ms();
}

/// Admits `r` as a flow rule of 10 a second allows in each of the next
/// `seconds` seconds of the clock; the counts per second.
fn per_second(clock: &ManualClock, sentinel: &Sentinel, seconds: usize) -> Vec<usize> {
    (0..seconds)
        .map(|_| {
            clock.advance_ms(1_000);
            admit(sentinel, "r", 20)
        })
        .collect()
}

#[test]
fn a_clock_set_back_5_s_admits_normally_within_one_window() {
    let (clock, sentinel) = instance();
    load(&sentinel, [ten_a_second("r")]);
    clock.advance_ms(500);
    assert_eq!(admit(&sentinel, "r", 20), 10);
    let before = sentinel.now_ms();

    clock.set(T0 + 500 - 5_000);
    assert_eq!(sentinel.now_ms(), before, "time holds, never goes back");
    assert_eq!(per_second(&clock, &sentinel, 3), [10, 10, 10]);
    assert_eq!(sentinel.now_ms(), before + 3_000, "and goes on at once");
}

#[test]
fn a_clock_set_back_1_h_half_opens_an_open_breaker_after_its_retry_timeout() {
    let (clock, sentinel) = instance();
    load(&sentinel, [ten_a_second("r")]);
    load(
        &sentinel,
        [DegradeRule {
            min_request_amount: 1,
            time_window_sec: 10,
            ..DegradeRule::new("r", DegradeGrade::ErrorCount, 0.0)
        }],
    );
    sentinel.entry("r").expect("closed").set_error("boom");
    assert_eq!(breaker_state(&sentinel), BreakerState::Open);

    clock.set(T0 - 3_600_000);
    seen_at_the_jump(&sentinel);
    clock.advance_ms(9_999);
    assert!(sentinel.entry("r").is_err(), "open for its whole timeout");
    clock.advance_ms(1);
    let probe = sentinel
        .entry("r")
        .expect("half-open after 10 s of engine time");
    assert_eq!(breaker_state(&sentinel), BreakerState::HalfOpen);
    drop(probe);
    assert_eq!(breaker_state(&sentinel), BreakerState::Closed);
    assert_eq!(per_second(&clock, &sentinel, 2), [10, 10]);
}

#[test]
fn a_clock_forward_to_the_year_2500_and_back_keeps_every_limit_working() {
    let (clock, sentinel) = instance();
    load(&sentinel, [ten_a_second("r")]);
    load(&sentinel, [ParamFlowRule::new("hot", 0, 5.0)]);
    let args = [ParamValue::from("k")];
    let hot = || admitted(10, || sentinel.entry_builder("hot").args(&args).enter());
    assert_eq!(hot(), 5);

    clock.set(YEAR_2500);
    assert_eq!(hot(), 5, "a new second, in 2500");
    assert_eq!(admit(&sentinel, "r", 20), 10);

    clock.set(T0 + 1_000);
    seen_at_the_jump(&sentinel);
    for second in 1..=3 {
        // A value's tokens come back once more than its second has passed.
        clock.advance_ms(1_001);
        assert_eq!(hot(), 5, "second {second} after the return");
        assert_eq!(
            admit(&sentinel, "r", 20),
            10,
            "second {second} after the return"
        );
    }
    assert_eq!(
        sentinel.now_ms(),
        YEAR_2500 + 3_003,
        "on from 2500, not pinned"
    );
}
