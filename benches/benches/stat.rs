//! The statistics engine under one and two threads.
//!
//! Every case runs its operation on `threads` persistent worker threads at
//! once (each started behind a barrier) and reports the time one thread takes per operation; the
//! throughput criterion prints is the total over all threads. Baselines in the
//! same run: a shared `AtomicU64::fetch_add` beside the `Adder`. The engine's
//! counters come through `sentinel_flow_core::__bench` (the
//! `bench-internals` feature): they are not public API.
//!
//! Run: `cargo bench -p benches --bench stat`

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use benches::Pool;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use once_cell::sync::Lazy;
use sentinel_flow_core::__bench::{Adder, Node};
use sentinel_flow_core::stat::StatConfig;
use sentinel_flow_core::{Clock, SystemClock};

/// The workers every case runs on (persistent, as a service's threads are).
static POOL: Lazy<Pool> = Lazy::new(|| Pool::new(2));

/// Runs `op` `iters` times on each of `threads` workers, all starting
/// together; returns the slowest worker's time.
fn on_threads(threads: usize, iters: u64, op: impl Fn() + Send + Sync + 'static) -> Duration {
    POOL.run(threads, iters, Arc::new(move |_| op()))
}

fn counter(c: &mut Criterion) {
    let mut group = c.benchmark_group("counter_add");
    for threads in [1usize, 2] {
        group.throughput(Throughput::Elements(threads as u64));
        group.bench_with_input(
            BenchmarkId::new("atomic_fetch_add", threads),
            &threads,
            |b, &threads| {
                let atomic = Arc::new(AtomicU64::new(0));
                b.iter_custom(|iters| {
                    let atomic = Arc::clone(&atomic);
                    on_threads(threads, iters, move || {
                        black_box(&*atomic).fetch_add(1, Ordering::Relaxed);
                    })
                });
            },
        );
        group.bench_with_input(
            BenchmarkId::new("adder", threads),
            &threads,
            |b, &threads| {
                let adder = Arc::new(Adder::new());
                b.iter_custom(|iters| {
                    let adder = Arc::clone(&adder);
                    on_threads(threads, iters, move || black_box(&*adder).increment())
                });
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
                let node = Arc::new(Node::new(&config));
                b.iter_custom(|iters| {
                    let node = Arc::clone(&node);
                    on_threads(threads, iters, move || {
                        black_box(&*node).add_pass(clock.now_ms(), 1);
                    })
                });
            },
        );
        group.bench_with_input(
            BenchmarkId::new("pass_qps", threads),
            &threads,
            |b, &threads| {
                let node = Arc::new(Node::new(&config));
                node.add_pass(clock.now_ms(), 1);
                b.iter_custom(|iters| {
                    let node = Arc::clone(&node);
                    on_threads(threads, iters, move || {
                        black_box(black_box(&*node).stats().pass_qps(clock.now_ms()));
                    })
                });
            },
        );
        group.bench_with_input(
            BenchmarkId::new("add_pass+pass_qps", threads),
            &threads,
            |b, &threads| {
                let node = Arc::new(Node::new(&config));
                b.iter_custom(|iters| {
                    let node = Arc::clone(&node);
                    on_threads(threads, iters, move || {
                        let now = clock.now_ms();
                        let node = black_box(&*node);
                        black_box(node.stats().pass_qps(now));
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
