//! The rate limiter per value, without a queue and with synchronous
//! entries queued up to the limit; its `enter_async` queue in `queue`.

use sentinel_flow_core::param_flow::{ParamControlBehavior, ParamFlowRule};
use sentinel_flow_core::{BlockKind, Sentinel};

use crate::support;
use crate::support::{instance, load, stats};
use crate::{arg, enter, hot_rule, rate_limiter};

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
mod queue;
