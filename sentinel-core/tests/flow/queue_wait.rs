//! A synchronous entry that a rate limiter queues waits on the instance's
//! clock (`Clock::sleep`): on a `ManualClock` it returns at once, with the
//! clock moved forward by exactly the time it was queued for, and is counted
//! at the end of its wait.

use std::time::{Duration, Instant};

use sentinel_flow_core::Clock;
use sentinel_flow_core::flow::{ControlBehavior, FlowRule};

use crate::support::{T0, instance, load, stats};

fn queued(resource: &str, behavior: ControlBehavior, count: f64) -> FlowRule {
    FlowRule {
        control_behavior: behavior,
        max_queueing_time_ms: 2_000,
        warm_up_period_sec: 10,
        warm_up_cold_factor: 3,
        ..FlowRule::new(resource, count)
    }
}

#[test]
fn a_queued_sync_entry_on_a_manual_clock_advances_it_by_its_wait_instead_of_sleeping() {
    let (clock, sentinel) = instance();
    // One a second: the second entry waits 1 s, the third 1 s more.
    load(&sentinel, [queued("r", ControlBehavior::RateLimiter, 1.0)]);
    let started = Instant::now();

    let first = sentinel.entry("r").expect("the first passes at once");
    assert_eq!(clock.now_nanos(), T0 * 1_000_000);
    let second = sentinel.entry("r").expect("queued, then admitted");
    assert_eq!(clock.now_ms(), T0 + 1_000);
    let third = sentinel.entry("r").expect("queued, then admitted");
    assert_eq!(clock.now_ms(), T0 + 2_000);

    // Two seconds of waits passed on the clock, not on the wall.
    assert!(started.elapsed() < Duration::from_millis(1_500));
    drop((first, second, third));
    let node = stats(&sentinel, "r");
    let now = sentinel.now_ms();
    assert_eq!(node.total_pass(now), 3);
    // Each was counted at the end of its wait, in a second of its own.
    assert_eq!(node.pass_qps(now), 1.0);
}

/// The same entries on twin instances: one waits synchronously on its
/// `ManualClock`, the other is handed each wait (`enter_or_queue`), moves
/// its clock by it and admits. Both clocks, and every count, agree.
#[cfg(feature = "tokio")]
#[test]
fn a_queued_sync_entry_waits_exactly_the_time_its_queue_gave_it() {
    use sentinel_flow_core::Entering;

    for behavior in [
        ControlBehavior::RateLimiter,
        ControlBehavior::WarmUpRateLimiter,
    ] {
        let (sync_clock, sync) = instance();
        let (twin_clock, twin) = instance();
        for sentinel in [&sync, &twin] {
            load(sentinel, [queued("r", behavior, 20.0)]);
        }
        let mut waited = Duration::ZERO;
        for i in 0..40 {
            let wait = match twin.entry_builder("r").enter_or_queue() {
                Ok(Entering::Entered(entry)) => {
                    drop(entry);
                    Duration::ZERO
                }
                Ok(Entering::Queued(queued)) => {
                    let wait = queued.wait();
                    twin_clock.advance(wait);
                    drop(queued.admit());
                    wait
                }
                Err(err) => panic!("{behavior:?} entry {i} refused by its twin: {err}"),
            };
            waited += wait;
            let before = sync_clock.now_nanos();
            let entry = sync.entry("r");
            assert!(entry.is_ok(), "{behavior:?} entry {i} refused");
            drop(entry);
            assert_eq!(
                Duration::from_nanos(sync_clock.now_nanos() - before),
                wait,
                "{behavior:?} entry {i}"
            );
            assert_eq!(sync_clock.now_nanos(), twin_clock.now_nanos());
        }
        assert!(waited > Duration::ZERO, "{behavior:?} never queued");
        let now = sync.now_ms();
        assert_eq!(stats(&sync, "r").total_pass(now), 40);
        assert_eq!(stats(&twin, "r").total_pass(now), 40);
    }
}
