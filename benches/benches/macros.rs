//! What `#[sentinel_resource]` costs over writing the entry by hand.
//!
//! Three functions doing the same small work, in one run: a baseline with no
//! entry; the work behind a hand-written `Resource` handle in a `static`,
//! entered with `?`; and the same function guarded by the attribute (which
//! also checks the result for an error to record, and records panics). All
//! on the global instance with no rule, so the numbers are the entry's cost;
//! the target is macro within 5% of hand-written.
//!
//! Run: `cargo bench -p benches --bench macros`

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use once_cell::sync::Lazy;
use sentinel_flow_core::{BlockError, Resource};
use sentinel_flow_macros::sentinel_resource;

/// The call's own work: a few cycles, so the entry dominates.
#[inline(always)]
fn work(x: u64) -> u64 {
    x.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17)
}

#[inline(never)]
fn baseline(x: u64) -> Result<u64, BlockError> {
    Ok(work(x))
}

static HAND: Lazy<Resource<'static>> = Lazy::new(|| Resource::new("bench:hand_written"));

#[inline(never)]
fn hand_written(x: u64) -> Result<u64, BlockError> {
    let _entry = HAND.entry()?;
    Ok(work(x))
}

#[inline(never)]
#[sentinel_resource("bench:macro")]
fn guarded(x: u64) -> Result<u64, BlockError> {
    Ok(work(x))
}

fn macro_vs_hand_written(c: &mut Criterion) {
    let mut group = c.benchmark_group("macro");
    group.throughput(Throughput::Elements(1));
    group.bench_function("baseline_no_entry", |b| b.iter(|| baseline(black_box(7))));
    group.bench_function("hand_written_resource", |b| {
        b.iter(|| hand_written(black_box(7)))
    });
    group.bench_function("sentinel_resource_macro", |b| {
        b.iter(|| guarded(black_box(7)))
    });
    group.finish();
}

criterion_group!(benches, macro_vs_hand_written);
criterion_main!(benches);
