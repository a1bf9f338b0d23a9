//! Exactly `probe_num` probes to threads entering at once, probes
//! completing on their threads, and probes that never run (Sentinel issue
//! 1638): blocked by a later slot or a second breaker, or cancelled in a
//! rate limiter's queue.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};

use sentinel_flow_core::degrade::{BreakerState, DegradeGrade, DegradeRule};
use sentinel_flow_core::slot::{self, EntryContext, Slot};
use sentinel_flow_core::{BlockError, BlockKind, Entry};

use crate::support::{T0, enter, fail, instance, instance_with, load, stats};
use crate::{Changes, breaker, degrade_rule, opens_at_first_error, state};

use BreakerState::{Closed, HalfOpen, Open};

#[test]
fn exactly_probe_num_probes_are_let_through_to_threads_entering_at_once() {
    const THREADS: usize = 8;
    const PERIODS: u64 = 12;
    let (clock, sentinel) = instance();
    let rule = DegradeRule {
        probe_num: 3,
        ..opens_at_first_error("r", 1)
    };
    load(&sentinel, [rule.clone()]);
    let half_opened = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&half_opened);
    sentinel.degrade_rules().on_state_change(move |change| {
        if change.next == HalfOpen {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    });

    fail(&sentinel, "r");
    let mut blocked_total = 0;
    for period in 1..=PERIODS {
        let retry = breaker(&sentinel, &rule)
            .next_retry_ms
            .unwrap_or_else(|| panic!("open before period {period}"));
        clock.set(retry);
        let tried = Barrier::new(THREADS);
        let results: Vec<Result<Entry<'_>, BlockError>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|_| {
                    s.spawn(|| {
                        tried.wait();
                        let result = sentinel.entry("r");
                        // Hold the entry until every thread has tried.
                        tried.wait();
                        result
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let (mut probes, refused): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
        assert_eq!(probes.len(), 3, "period {period}");
        for err in refused {
            assert_eq!(degrade_rule(&err.unwrap_err()), &rule, "period {period}");
        }
        blocked_total += THREADS - 3;
        assert_eq!(half_opened.load(Ordering::Relaxed), period as usize);
        let snapshot = breaker(&sentinel, &rule);
        assert_eq!(
            (
                snapshot.state,
                snapshot.probes_admitted,
                snapshot.probes_passed
            ),
            (HalfOpen, 3, 0),
            "period {period}"
        );

        clock.advance_ms(10);
        if period % 3 == 0 {
            // The second probe fails: open again at once; the third decides
            // nothing.
            drop(probes.remove(0));
            let failing = probes.remove(0).unwrap();
            failing.set_error("boom");
            drop(failing);
            assert_eq!(state(&sentinel, &rule), Open, "period {period}");
            drop(probes);
            assert_eq!(state(&sentinel, &rule), Open, "period {period}");
        } else {
            drop(probes.pop());
            drop(probes.pop());
            let snapshot = breaker(&sentinel, &rule);
            assert_eq!(
                (snapshot.state, snapshot.probes_passed),
                (HalfOpen, 2),
                "period {period}"
            );
            drop(probes);
            assert_eq!(state(&sentinel, &rule), Closed, "period {period}");
            fail(&sentinel, "r");
            assert_eq!(state(&sentinel, &rule), Open, "period {period}");
        }
    }
    let now = sentinel.now_ms();
    assert_eq!(stats(&sentinel, "r").total_block(now), blocked_total as u64);
}

#[test]
fn probes_completing_on_their_threads_close_the_breaker() {
    const THREADS: usize = 8;
    let (clock, sentinel) = instance();
    let rule = DegradeRule {
        probe_num: 3,
        ..opens_at_first_error("r", 1)
    };
    load(&sentinel, [rule.clone()]);
    for period in 0..10 {
        fail(&sentinel, "r");
        assert_eq!(state(&sentinel, &rule), Open);
        clock.advance_ms(1_000);
        let tried = Barrier::new(THREADS);
        let admitted: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|_| {
                    s.spawn(|| {
                        tried.wait();
                        let result = sentinel.entry("r");
                        tried.wait();
                        // Each probe completes well on its own thread.
                        usize::from(result.is_ok())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        assert_eq!(admitted, 3, "period {period}");
        assert_eq!(state(&sentinel, &rule), Closed, "period {period}");
    }
}

/// Blocks every entry while `on`, after the circuit breakers.
#[derive(Debug)]
struct Veto(Arc<AtomicBool>);

impl Slot for Veto {
    fn order(&self) -> i32 {
        slot::order::DEGRADE + 1
    }

    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        if self.0.load(Ordering::Relaxed) {
            return Err(ctx.block(BlockKind::Custom("veto")));
        }
        Ok(())
    }
}

#[test]
fn issue_1638_a_probe_blocked_by_a_later_slot_opens_the_breaker_again() {
    let veto = Arc::new(AtomicBool::new(false));
    let (clock, sentinel) = instance_with(|builder| builder.slot(Veto(Arc::clone(&veto))));
    let rule = opens_at_first_error("r", 10);
    load(&sentinel, [rule.clone()]);
    let changes = Changes::listen(&sentinel);

    fail(&sentinel, "r");
    assert_eq!(changes.take(), vec![(Closed, Open, Some(1.0))]);

    // The breaker lets a probe through; the later slot refuses it.
    clock.advance_ms(10_000);
    veto.store(true, Ordering::Relaxed);
    let err = sentinel.entry("r").unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("veto"));
    assert_eq!(
        changes.take(),
        vec![(Open, HalfOpen, None), (HalfOpen, Open, None)]
    );
    let snapshot = breaker(&sentinel, &rule);
    assert_eq!(snapshot.state, Open, "not stuck half-open");
    assert_eq!(snapshot.next_retry_ms, Some(T0 + 20_000));
    assert_eq!(stats(&sentinel, "r").total_block(sentinel.now_ms()), 1);

    // Open again for a whole window: the breaker refuses before the slot.
    veto.store(false, Ordering::Relaxed);
    clock.advance_ms(9_999);
    assert_eq!(degrade_rule(&sentinel.entry("r").unwrap_err()), &rule);

    // Then it probes again, and the probe can close it.
    clock.advance_ms(1);
    let probe = enter(&sentinel, "r");
    assert_eq!(state(&sentinel, &rule), HalfOpen);
    drop(probe);
    assert_eq!(state(&sentinel, &rule), Closed);
    assert_eq!(
        changes.take(),
        vec![(Open, HalfOpen, None), (HalfOpen, Closed, None)]
    );
}

#[test]
fn a_probe_refused_by_a_second_breaker_gives_its_place_back() {
    let (clock, sentinel) = instance();
    // Two breakers on one resource: the first opens for 1 s, the second for
    // 10 s; both open at one failure.
    let short = opens_at_first_error("r", 1);
    let long = DegradeRule {
        grade: DegradeGrade::ErrorRatio,
        ..opens_at_first_error("r", 10)
    };
    load(&sentinel, [short.clone(), long.clone()]);
    let changes = Changes::listen(&sentinel);
    fail(&sentinel, "r");
    assert_eq!(state(&sentinel, &short), Open);
    assert_eq!(state(&sentinel, &long), Open);
    changes.take();

    // The first breaker lets a probe through; the second refuses the call.
    clock.advance_ms(1_000);
    let err = sentinel.entry("r").unwrap_err();
    assert_eq!(degrade_rule(&err), &long);
    assert_eq!(
        changes.take(),
        vec![(Open, HalfOpen, None), (HalfOpen, Open, None)]
    );
    assert_eq!(breaker(&sentinel, &short).next_retry_ms, Some(T0 + 2_000));
    assert_eq!(state(&sentinel, &long), Open);
}

#[cfg(feature = "tokio")]
#[tokio::test(start_paused = true)]
async fn a_probe_cancelled_in_a_rate_limiters_queue_opens_the_breaker_again() {
    use std::time::Duration;

    use sentinel_flow_core::flow::{ControlBehavior, FlowRule};

    let (clock, sentinel) = instance();
    let rule = opens_at_first_error("r", 1);
    load(&sentinel, [rule.clone()]);
    // One call per 10 s, queueing up to 20 s: the call after the first
    // waits.
    load(
        &sentinel,
        [FlowRule {
            control_behavior: ControlBehavior::RateLimiter,
            max_queueing_time_ms: 20_000,
            ..FlowRule::new("r", 0.1)
        }],
    );
    let changes = Changes::listen(&sentinel);

    let first = sentinel.entry_builder("r").enter_async().await.unwrap();
    first.set_error("boom");
    drop(first);
    assert_eq!(changes.take(), vec![(Closed, Open, Some(1.0))]);

    // Past the open time the call is a probe, queued by the rate limiter,
    // and dropped while it waits.
    clock.advance_ms(1_000);
    let cancelled = tokio::time::timeout(
        Duration::from_millis(1),
        sentinel.entry_builder("r").enter_async(),
    )
    .await;
    assert!(cancelled.is_err(), "still queued when the timeout fired");
    assert_eq!(
        changes.take(),
        vec![(Open, HalfOpen, None), (HalfOpen, Open, None)]
    );
    let snapshot = breaker(&sentinel, &rule);
    assert_eq!(snapshot.state, Open, "not stuck half-open");
    assert_eq!(snapshot.next_retry_ms, Some(T0 + 2_000));
    let now = sentinel.now_ms();
    assert_eq!(stats(&sentinel, "r").total_pass(now), 1, "nothing counted");
    assert_eq!(stats(&sentinel, "r").cur_concurrency(), 0);

    // After another open time, a probe that waits its turn and completes
    // well closes the breaker.
    clock.advance_ms(1_000);
    let probe = sentinel
        .entry_builder("r")
        .enter_async()
        .await
        .expect("queued, then let through");
    assert_eq!(state(&sentinel, &rule), HalfOpen);
    drop(probe);
    assert_eq!(state(&sentinel, &rule), Closed);
    assert_eq!(
        changes.take(),
        vec![(Open, HalfOpen, None), (HalfOpen, Closed, None)]
    );
}
