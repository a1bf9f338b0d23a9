//! The statistics engine under threads: totals are exact once writers join,
//! rotation under writers neither deadlocks nor corrupts, and time read
//! through `MonotonicClock` never goes backwards for any thread.

use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};

use sentinel_flow_core::node::StatisticNode;
use sentinel_flow_core::stat::{Adder, LeapArray, MetricBucket, MetricEvent, StatConfig};
use sentinel_flow_core::{Clock, ManualClock, MonotonicClock};

const THREADS: usize = 4;
const T0: u64 = 1_700_000_000_000;

#[test]
fn node_totals_are_exact_after_threads_join() {
    let node = StatisticNode::new(&StatConfig::default());
    let now = T0 + 250;
    let per_thread = 50_000u64;
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                barrier.wait();
                for i in 0..per_thread {
                    node.add_pass(now, 1);
                    if i % 10 == 0 {
                        node.add_block(now, 2);
                    }
                    node.add_rt_and_success(now, i % 7, 1);
                }
            });
        }
    });
    let total = THREADS as u64 * per_thread;
    assert_eq!(node.total_pass(now), total);
    assert_eq!(node.total_success(now), total);
    assert_eq!(
        node.total_block(now),
        2 * THREADS as u64 * per_thread.div_ceil(10)
    );
    assert_eq!(node.pass_qps(now), total as f64);
    let rt_sum: u64 = (0..per_thread).map(|i| i % 7).sum::<u64>() * THREADS as u64;
    assert_eq!(node.sum(now, MetricEvent::Rt), rt_sum);
    assert_eq!(node.min_rt(now), 1, "0 ms is read as Sentinel's floor of 1");
    assert_eq!(node.cur_concurrency(), 0);
}

#[test]
fn concurrency_never_exceeds_the_threads_inside() {
    let node = StatisticNode::new(&StatConfig::default());
    let peak = AtomicU64::new(0);
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                barrier.wait();
                for _ in 0..20_000 {
                    node.add_pass(T0, 1);
                    peak.fetch_max(node.cur_concurrency(), Ordering::Relaxed);
                    node.add_rt_and_success(T0, 0, 1);
                }
            });
        }
    });
    assert_eq!(node.cur_concurrency(), 0);
    let peak = peak.load(Ordering::Relaxed);
    assert!((1..=THREADS as u64).contains(&peak), "peak {peak}");
}

#[test]
fn adder_is_exact_under_threads() {
    let adder = Adder::new();
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for t in 0..THREADS as u64 {
            let (adder, barrier) = (&adder, &barrier);
            s.spawn(move || {
                barrier.wait();
                for i in 0..100_000u64 {
                    adder.add(t + 1);
                    if i % 2 == 0 {
                        adder.decrement();
                    } else {
                        adder.increment();
                    }
                }
            });
        }
    });
    // Each thread adds (t + 1) * 100 000 and a net 0.
    assert_eq!(adder.sum(), (1..=THREADS as u64).sum::<u64>() * 100_000);
}

#[test]
fn rotation_under_writers_keeps_buckets_consistent() {
    let window = LeapArray::<MetricBucket>::new(1_000, 4).unwrap();
    let clock = ManualClock::new(T0);
    let steps = 400u64;
    let barrier = Barrier::new(THREADS + 1);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                barrier.wait();
                for _ in 0..20_000 {
                    window.add(clock.now_ms(), MetricEvent::Pass, 1);
                }
            });
        }
        s.spawn(|| {
            barrier.wait();
            for _ in 0..steps {
                clock.advance_ms(250);
                std::thread::yield_now();
            }
        });
    });
    // Whatever interleaving happened, the window now holds only slices
    // inside it, and a fixed time afterwards counts exactly what is added.
    let now = clock.now_ms();
    let current = window.bucket_start(now);
    for (start, _) in window.values(now) {
        assert!(start <= current && current - start < 1_000);
    }
    let later = now + 10_000;
    assert_eq!(window.sum(later, MetricEvent::Pass), 0);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..10_000 {
                    window.add(later, MetricEvent::Pass, 1);
                }
            });
        }
    });
    assert_eq!(
        window.sum(later, MetricEvent::Pass),
        THREADS as u64 * 10_000
    );
}

#[test]
fn monotonic_clock_never_goes_back_for_any_thread() {
    let manual = ManualClock::new(T0);
    let clock = MonotonicClock::new(manual.clone());
    let barrier = Barrier::new(THREADS + 1);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                barrier.wait();
                let mut last = 0;
                for _ in 0..50_000 {
                    let now = clock.now_ms();
                    assert!(now >= last, "{now} after {last}");
                    last = now;
                }
            });
        }
        s.spawn(|| {
            barrier.wait();
            for i in 0..2_000u64 {
                if i % 3 == 0 {
                    manual.set(T0 + i / 2);
                } else {
                    manual.advance_ms(2);
                }
            }
        });
    });
    // A reading set far back afterwards is the last time seen.
    let seen = clock.now_ms();
    assert!(seen > T0);
    manual.set(T0 - 60_000);
    assert_eq!(clock.now_ms(), seen);
}
