//! The statistics engine under one and two threads.
//!
//! Every case runs its operation on `threads` threads at once (each started
//! behind a barrier) and reports the time one thread takes per operation; the
//! throughput criterion prints is the total over all threads. Baselines in the
//! same run: a shared `AtomicU64::fetch_add` beside the `Adder`.
//!
//! Run: `cargo bench -p benches --bench stat`

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sentinel_core::node::StatisticNode;
use sentinel_core::stat::{Adder, StatConfig};
use sentinel_core::{Clock, SystemClock};

/// Runs `op` `iters` times on each of `threads` threads, all starting
/// together; returns the slowest thread's time.
fn on_threads(threads: usize, iters: u64, op: impl Fn() + Sync) -> Duration {
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        op();
                    }
                    start.elapsed()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread panicked"))
            .max()
            .unwrap_or_default()
    })
}

fn counter(c: &mut Criterion) {
    let mut group = c.benchmark_group("counter_add");
    for threads in [1usize, 2] {
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_with_input(
            BenchmarkId::new("atomic_fetch_add", threads),
            &threads,
            |b, &threads| {
                let atomic = AtomicU64::new(0);
                b.iter_custom(|iters| {
                    on_threads(threads, iters, || {
                        black_box(&atomic).fetch_add(1, Ordering::Relaxed);
                    })
                });
            },
        );
        group.bench_with_input(
            BenchmarkId::new("adder", threads),
            &threads,
            |b, &threads| {
                let adder = Adder::new();
                b.iter_custom(|iters| on_threads(threads, iters, || black_box(&adder).increment()));
            },
        );
    }
    group.finish();
}

fn node(c: &mut Criterion) {
    let clock = SystemClock;
    let config = StatConfig::default();
    let mut group = c.benchmark_group("node");
    for threads in [1usize, 2] {
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_with_input(
            BenchmarkId::new("add_pass", threads),
            &threads,
            |b, &threads| {
                let node = StatisticNode::new(&config);
                b.iter_custom(|iters| {
                    on_threads(threads, iters, || {
                        black_box(&node).add_pass(clock.now_ms(), 1);
                    })
                });
            },
        );
        group.bench_with_input(
            BenchmarkId::new("pass_qps", threads),
            &threads,
            |b, &threads| {
                let node = StatisticNode::new(&config);
                node.add_pass(clock.now_ms(), 1);
                b.iter_custom(|iters| {
                    on_threads(threads, iters, || {
                        black_box(black_box(&node).pass_qps(clock.now_ms()));
                    })
                });
            },
        );
        group.bench_with_input(
            BenchmarkId::new("add_pass+pass_qps", threads),
            &threads,
            |b, &threads| {
                let node = StatisticNode::new(&config);
                b.iter_custom(|iters| {
                    on_threads(threads, iters, || {
                        let now = clock.now_ms();
                        let node = black_box(&node);
                        black_box(node.pass_qps(now));
                        node.add_pass(now, 1);
                    })
                });
            },
        );
    }
    group.finish();
}

criterion_group!(benches, counter, node);
criterion_main!(benches);
