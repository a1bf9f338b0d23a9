//! What a millisecond reading costs: the cached ticker atomic that
//! `SystemClock` uses, the kernel's coarse clock, and `Instant::now`.
//!
//! Run: `cargo bench -p benches --bench clock`

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rustix::time::{ClockId, clock_gettime};
use sentinel_flow_core::{Clock, ManualClock, MonotonicClock, SystemClock};

fn clocks(c: &mut Criterion) {
    let mut group = c.benchmark_group("clock");
    group.throughput(Throughput::Elements(1));
    let system = SystemClock;
    group.bench_function("system_clock_now_ms (ticker atomic)", |b| {
        b.iter(|| black_box(system.now_ms()))
    });
    let monotonic = MonotonicClock::new(SystemClock);
    group.bench_function("monotonic_system_now_ms", |b| {
        b.iter(|| black_box(monotonic.now_ms()))
    });
    group.bench_function("clock_gettime(MONOTONIC_COARSE)", |b| {
        b.iter(|| black_box(clock_gettime(ClockId::MonotonicCoarse)))
    });
    group.bench_function("clock_gettime(REALTIME_COARSE)", |b| {
        b.iter(|| black_box(clock_gettime(ClockId::RealtimeCoarse)))
    });
    group.bench_function("system_clock_now_nanos (Instant)", |b| {
        b.iter(|| black_box(system.now_nanos()))
    });
    group.bench_function("Instant::now", |b| b.iter(|| black_box(Instant::now())));
    let manual = ManualClock::new(0);
    group.bench_function("manual_clock_now_ms", |b| {
        b.iter(|| black_box(manual.now_ms()))
    });
    group.finish();
}

criterion_group!(benches, clocks);
criterion_main!(benches);
