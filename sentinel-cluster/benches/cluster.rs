//! Entry + exit through a `Resource` handle: a cluster rule whose lease is
//! full against the same rule local, and no rule, in one group (so the
//! result is a ratio). Starts its own `redis-server` on a free loopback
//! port. Run: `cargo bench -p sentinel-flow-cluster --bench cluster`.

#![allow(missing_docs)] // criterion_group! makes an undocumented function.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sentinel_flow_cluster::{ClusterConfig, RedisCluster};
use sentinel_flow_core::Sentinel;
use sentinel_flow_core::flow::{ClusterFlowConfig, FlowRule};

/// Far above what a bench reaches: nothing is ever refused.
const COUNT: f64 = 1e9;

fn entry_exit(c: &mut Criterion) {
    let server = support::RedisServer::start();
    let mut group = c.benchmark_group("entry_exit");
    group.throughput(Throughput::Elements(1));

    let none = Sentinel::builder().build();
    let handle = none.resource("r");
    group.bench_function("no_rule", |b| b.iter(|| drop(handle.entry())));

    let local = Sentinel::builder().build();
    local
        .flow_rules()
        .load(vec![FlowRule::new("r", COUNT)])
        .unwrap();
    let handle = local.resource("r");
    group.bench_function("local_rule", |b| b.iter(|| drop(handle.entry())));

    let clustered = Sentinel::builder().build();
    let cluster = RedisCluster::start(
        ClusterConfig::new(server.url()).max_lease(sentinel_flow_cluster::MAX_LEASE_LIMIT),
    )
    .unwrap();
    cluster.attach(&clustered);
    let rule = FlowRule {
        cluster_mode: true,
        cluster_config: ClusterFlowConfig {
            flow_id: Some(1),
            ..ClusterFlowConfig::default()
        },
        ..FlowRule::new("r", COUNT)
    };
    clustered.flow_rules().load(vec![rule]).unwrap();
    while cluster.is_fallback() {
        std::thread::sleep(Duration::from_millis(5));
    }
    let handle = clustered.resource("r");
    // Fill the lease before measuring.
    for _ in 0..1_000 {
        drop(handle.entry());
    }
    group.bench_function("cluster_rule_lease_full", |b| {
        b.iter(|| drop(handle.entry()))
    });
    // Two threads on one resource: the local rule's per-thread leases
    // against the cluster's one lease word per flow id.
    let local_handle = local.resource("r");
    group.bench_function("local_rule_2_threads", |b| {
        b.iter_custom(|iters| two_threads(iters, || drop(local_handle.entry())))
    });
    group.bench_function("cluster_rule_lease_full_2_threads", |b| {
        b.iter_custom(|iters| two_threads(iters, || drop(handle.entry())))
    });
    group.finish();
    let snapshot = cluster.snapshot();
    println!(
        "cluster: {} fallback decisions, {} acquire calls",
        snapshot.fallback_decisions, snapshot.flows[0].round_trips
    );
}

/// Runs `f` `iters` times on two threads together (half each); the wall
/// time, so the figure is per entry of the pair.
fn two_threads(iters: u64, f: impl Fn() + Sync) -> Duration {
    let start = std::time::Instant::now();
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..iters / 2 {
                    f();
                }
            });
        }
    });
    start.elapsed()
}

criterion_group!(benches, entry_exit);
criterion_main!(benches);
