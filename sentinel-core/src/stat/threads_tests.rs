//! The engine's counters under threads: an `Adder` is exact once writers
//! join, and a window's rotation under writers neither deadlocks nor
//! corrupts.

use std::sync::Barrier;

use super::{Adder, LeapArray, MetricBucket, MetricEvent};
use crate::{Clock, ManualClock};

const THREADS: usize = 4;
const T0: u64 = 1_700_000_000_000;

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
