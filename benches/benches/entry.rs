//! One entry and its exit, with no rule: what the framework costs a call.
//!
//! Cases, in one run: a baseline that does no entry at all; a `Resource`
//! handle (node found once); `entry("res")` by name (registry lookup each
//! time); two threads on one resource; two threads on different resources;
//! and the machine's ceiling for two threads (a loop that shares nothing).
//! Times are per entry+exit pair per thread; the throughput criterion prints
//! is the total over all threads. Threads are persistent workers, as in a
//! service (see `benches::Pool`).
//!
//! Run: `cargo bench -p benches --bench entry`

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use benches::Pool;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sentinel_flow_core::{Resource, Sentinel};

fn entry_exit(c: &mut Criterion) {
    // Leaked so that the workers' closures can be 'static.
    let sentinel: &'static Sentinel = Box::leak(Box::new(Sentinel::builder().build()));
    let names = ["bench:a", "bench:b"];
    let handles: Arc<[Resource<'static>; 2]> = Arc::new(names.map(|name| sentinel.resource(name)));
    let pool = Pool::new(2);
    let mut group = c.benchmark_group("entry_exit");

    group.throughput(Throughput::Elements(1));
    group.bench_function("baseline_no_entry", |b| {
        b.iter_custom(|iters| pool.run(1, iters, Arc::new(|_: usize| black_box(()))))
    });
    let h = Arc::clone(&handles);
    let handle_op = Arc::new(move |_: usize| {
        drop(black_box(h[0].entry()));
    });
    group.bench_function("handle/1", |b| {
        b.iter_custom(|iters| pool.run(1, iters, Arc::clone(&handle_op)))
    });
    group.bench_function("by_name/1", |b| {
        b.iter_custom(|iters| {
            pool.run(
                1,
                iters,
                Arc::new(move |_: usize| {
                    drop(black_box(sentinel.entry(black_box(names[0]))));
                }),
            )
        })
    });
    group.throughput(Throughput::Elements(2));
    group.bench_with_input(BenchmarkId::new("handle_same_resource", 2), &2, |b, &t| {
        b.iter_custom(|iters| pool.run(t, iters, Arc::clone(&handle_op)))
    });
    let h = Arc::clone(&handles);
    let different = Arc::new(move |worker: usize| {
        drop(black_box(h[worker].entry()));
    });
    group.bench_with_input(
        BenchmarkId::new("handle_different_resources", 2),
        &2,
        |b, &t| b.iter_custom(|iters| pool.run(t, iters, Arc::clone(&different))),
    );
    // The machine's own ceiling for two threads: a register-only loop that
    // shares nothing. Whatever it loses (SMT siblings, clock boost with one
    // core idle) no code path can win back.
    let alu = Arc::new(|worker: usize| {
        let mut x = black_box(worker as u64 + 1);
        for i in 0..16u64 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(i);
            x ^= x >> 7;
        }
        black_box(x);
    });
    group.throughput(Throughput::Elements(1));
    group.bench_with_input(BenchmarkId::new("alu_ceiling", 1), &1, |b, &t| {
        b.iter_custom(|iters| pool.run(t, iters, Arc::clone(&alu)))
    });
    group.throughput(Throughput::Elements(2));
    group.bench_with_input(BenchmarkId::new("alu_ceiling", 2), &2, |b, &t| {
        b.iter_custom(|iters| pool.run(t, iters, Arc::clone(&alu)))
    });
    group.finish();
}

criterion_group!(benches, entry_exit);
criterion_main!(benches);
