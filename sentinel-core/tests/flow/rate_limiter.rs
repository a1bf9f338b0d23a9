//! The rate limiter's pacing without a queue, and at the cold rate of a
//! warm-up rate limiter; its queue under `enter_async` in `queue`.

use std::time::Duration;

use sentinel_flow_core::BlockKind;
use sentinel_flow_core::flow::{ControlBehavior, FlowRule};

use crate::blocking_rule;
use crate::support::{instance, load, stats};

fn rate_limiter(resource: &str, count: f64, max_queueing_time_ms: u64) -> FlowRule {
    FlowRule {
        control_behavior: ControlBehavior::RateLimiter,
        max_queueing_time_ms,
        ..FlowRule::new(resource, count)
    }
}

#[test]
fn rate_limiter_without_a_queue_admits_one_entry_per_half_millisecond() {
    let (clock, sentinel) = instance();
    load(&sentinel, [rate_limiter("r", 2_000.0, 0)]);

    for i in 0..100 {
        assert!(sentinel.entry("r").is_ok(), "slot {i}");
        let err = sentinel.entry("r").unwrap_err();
        assert_eq!(
            blocking_rule(&err).control_behavior,
            ControlBehavior::RateLimiter
        );
        // Half-way to the next slot is not enough.
        clock.advance(Duration::from_micros(250));
        assert!(sentinel.entry("r").is_err(), "slot {i} + 250 µs");
        clock.advance(Duration::from_micros(250));
    }
    let now = sentinel.now_ms();
    assert_eq!(stats(&sentinel, "r").total_pass(now), 100);
    assert_eq!(stats(&sentinel, "r").total_block(now), 200);
}

#[cfg(feature = "tokio")]
mod queue;

#[test]
fn warm_up_rate_limiter_paces_at_the_cold_rate_first() {
    // Cold, the bucket is full: the warm-up rate is count / cold_factor,
    // 33.3 QPS, so entries are paced 30 ms apart (a plain rate limiter at
    // the same count paces them 10 ms apart).
    let (clock, sentinel) = instance();
    load(
        &sentinel,
        [
            FlowRule {
                control_behavior: ControlBehavior::WarmUpRateLimiter,
                max_queueing_time_ms: 0,
                ..FlowRule::new("warm", 100.0)
            },
            FlowRule {
                control_behavior: ControlBehavior::RateLimiter,
                max_queueing_time_ms: 0,
                ..FlowRule::new("plain", 100.0)
            },
        ],
    );
    assert!(sentinel.entry("warm").is_ok());
    assert!(sentinel.entry("plain").is_ok());
    clock.advance_ms(10);
    assert!(sentinel.entry("plain").is_ok(), "10 ms is the plain pace");
    assert_eq!(
        sentinel.entry("warm").unwrap_err().kind(),
        BlockKind::Flow,
        "too early for the warm-up pace"
    );
    clock.advance_ms(19);
    assert!(sentinel.entry("warm").is_err(), "29 ms is still too early");
    clock.advance_ms(1);
    assert!(sentinel.entry("warm").is_ok(), "30 ms is the cold pace");
}
