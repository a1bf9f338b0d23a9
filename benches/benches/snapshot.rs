//! Reading every resource of a big instance, as an operator's page or an
//! exporter does once per second: 6000 resources (the default cap), each
//! with traffic in the last 30 seconds, one in ten with a flow and a degrade
//! rule.
//!
//! Cases, in one run, each reading all 6000 resources (throughput is
//! resources per second): the baseline, one `StatisticNode::snapshot` per
//! resource node (the figures alone, through the public node API);
//! `Sentinel::resources()` (figures, rule counts and breaker states, owned);
//! `Sentinel::tree()` (the invocation tree, owned).
//!
//! The clock is a `ManualClock` stopped after the traffic, so every
//! iteration reads the same windows.
//!
//! Run: `cargo bench -p benches --bench snapshot`

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::{DEFAULT_MAX_RESOURCES, ManualClock, Sentinel};

const RESOURCES: usize = DEFAULT_MAX_RESOURCES;
/// 2023-11-14 22:13:20 UTC.
const T0: u64 = 1_700_000_000_000;

fn instance() -> Sentinel {
    let clock = ManualClock::new(T0);
    let sentinel = Sentinel::builder().clock(clock.clone()).build();
    let names: Vec<String> = (0..RESOURCES)
        .map(|i| format!("GET:/api/v1/items/{i}"))
        .collect();
    let ruled = names.iter().step_by(10);
    sentinel
        .flow_rules()
        .load(
            ruled
                .clone()
                .map(|n| FlowRule::new(n.as_str(), 1e9))
                .collect(),
        )
        .expect("valid rules");
    sentinel
        .degrade_rules()
        .load(
            ruled
                .map(|n| DegradeRule::new(n.as_str(), DegradeGrade::ErrorRatio, 0.5))
                .collect(),
        )
        .expect("valid rules");
    for _second in 0..30 {
        for name in &names {
            let entry = sentinel.entry(name).expect("no rule refuses");
            clock.advance_ms(0);
            drop(entry);
        }
        clock.advance_ms(1_000);
    }
    // One call inside each resource, for a concurrency to read.
    for name in &names {
        std::mem::forget(sentinel.entry(name).expect("no rule refuses"));
    }
    assert_eq!(sentinel.resources().len(), RESOURCES);
    sentinel
}

fn snapshot(c: &mut Criterion) {
    let sentinel = instance();
    let mut group = c.benchmark_group("snapshot_6000_resources");
    group.throughput(Throughput::Elements(RESOURCES as u64));
    group.bench_function("baseline_node_snapshots", |b| {
        b.iter(|| {
            let now = sentinel.now_ms();
            let mut pass = 0;
            for node in sentinel.resource_nodes() {
                pass += black_box(node.stats().snapshot(now)).total_pass;
            }
            pass
        })
    });
    group.bench_function("resources", |b| b.iter(|| black_box(sentinel.resources())));
    group.bench_function("tree", |b| b.iter(|| black_box(sentinel.tree())));
    group.finish();
}

criterion_group!(benches, snapshot);
criterion_main!(benches);
