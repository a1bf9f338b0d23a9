//! One entry and its exit, with no rule: what the framework costs a call.
//!
//! Cases, in one run: a baseline that does no entry at all; a `Resource`
//! handle (node found once); `entry("res")` by name (registry lookup each
//! time); two threads on one resource; two threads on different resources.
//! Times are per entry+exit pair per thread; the throughput criterion prints
//! is the total over all threads.
//!
//! Run: `cargo bench -p benches --bench entry`

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sentinel_core::Sentinel;

/// Runs `op(thread)` `iters` times on each of `threads` threads, all
/// starting together; returns the slowest thread's time.
fn on_threads(threads: usize, iters: u64, op: impl Fn(usize) + Sync) -> Duration {
    let barrier = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let (barrier, op) = (&barrier, &op);
                s.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    for _ in 0..iters {
                        op(thread);
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

fn entry_exit(c: &mut Criterion) {
    let sentinel = Sentinel::builder().build();
    let names = ["bench:a", "bench:b"];
    let handles = names.map(|name| sentinel.resource(name));
    let mut group = c.benchmark_group("entry_exit");

    group.throughput(Throughput::Elements(1));
    group.bench_function("baseline_no_entry", |b| {
        b.iter_custom(|iters| on_threads(1, iters, |_| black_box(())))
    });
    group.bench_function("handle/1", |b| {
        b.iter_custom(|iters| {
            on_threads(1, iters, |_| {
                drop(black_box(handles[0].entry()));
            })
        })
    });
    group.bench_function("by_name/1", |b| {
        b.iter_custom(|iters| {
            on_threads(1, iters, |_| {
                drop(black_box(sentinel.entry(black_box(names[0]))));
            })
        })
    });
    group.throughput(Throughput::Elements(2));
    group.bench_with_input(BenchmarkId::new("handle_same_resource", 2), &2, |b, &t| {
        b.iter_custom(|iters| {
            on_threads(t, iters, |_| {
                drop(black_box(handles[0].entry()));
            })
        })
    });
    group.bench_with_input(
        BenchmarkId::new("handle_different_resources", 2),
        &2,
        |b, &t| {
            b.iter_custom(|iters| {
                on_threads(t, iters, |thread| {
                    drop(black_box(handles[thread].entry()));
                })
            })
        },
    );
    group.finish();
}

criterion_group!(benches, entry_exit);
criterion_main!(benches);
