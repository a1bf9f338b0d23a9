//! What tracking response-time percentiles costs an entry and its exit.
//!
//! Cases, in one run, all through a `Resource` handle with no rule: a
//! resource whose percentiles were never tracked (`off`), the same with
//! tracking on (`on`), a resource turned on then off again (`on_then_off`:
//! its recorder exists, the exit checks one more flag), and two threads on
//! one resource, off and on (each thread records into its own recorder).
//! Times are per entry+exit pair per thread; the throughput criterion prints
//! is the total over all threads. Threads are persistent workers, as in a
//! service (see `benches::Pool`).
//!
//! Run: `cargo bench -p benches --bench percentiles`

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use benches::Pool;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sentinel_flow_core::{Resource, Sentinel};

fn percentiles(c: &mut Criterion) {
    // Leaked so that the workers' closures can be 'static.
    let sentinel: &'static Sentinel = Box::leak(Box::new(Sentinel::builder().build()));
    let off = sentinel.resource("bench:off");
    let on = sentinel.resource("bench:on");
    let on_then_off = sentinel.resource("bench:on_then_off");
    on.track_percentiles(true);
    on_then_off.track_percentiles(true);
    on_then_off.track_percentiles(false);
    let pool = Pool::new(2);
    let mut group = c.benchmark_group("percentiles");
    group.throughput(Throughput::Elements(1));
    for (name, handle) in [
        ("off", off),
        ("on", on.clone()),
        ("on_then_off", on_then_off),
    ] {
        let handle: Arc<Resource<'static>> = Arc::new(handle);
        let op = Arc::new(move |_: usize| drop(black_box(handle.entry())));
        group.bench_function(format!("handle/{name}/1"), |b| {
            b.iter_custom(|iters| pool.run(1, iters, Arc::clone(&op)))
        });
    }
    group.throughput(Throughput::Elements(2));
    for (name, handle) in [("off", sentinel.resource("bench:off")), ("on", on)] {
        let handle = Arc::new(handle);
        let op = Arc::new(move |_: usize| drop(black_box(handle.entry())));
        group.bench_function(format!("handle/{name}_same_resource/2"), |b| {
            b.iter_custom(|iters| pool.run(2, iters, Arc::clone(&op)))
        });
    }
    group.finish();
    let rt = sentinel.resources().into_iter().find_map(|r| r.percentiles);
    eprintln!("percentiles of bench:on over the last minute: {rt:?}");
}

criterion_group!(benches, percentiles);
criterion_main!(benches);
