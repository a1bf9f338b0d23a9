//! Redis round trips per second of one instance at 1 000 and 100 000
//! entries a second, at the default lease settings: the figures of the
//! README's sizing section. Ignored by default (real time, 12 s); run:
//! `cargo test -p sentinel-flow-cluster --release --test sizing -- --ignored --nocapture`

mod support;

use std::time::{Duration, Instant};

use sentinel_flow_cluster::{ClusterConfig, RedisCluster};
use sentinel_flow_core::Sentinel;
use sentinel_flow_core::flow::{ClusterFlowConfig, FlowRule};
use support::RedisServer;

/// Offers `rate` entries a second for `seconds`, in batches each ms.
fn run(rate: u64, count: f64, seconds: u64) -> (f64, f64, u64) {
    let server = RedisServer::start();
    let sentinel = Sentinel::builder().build();
    let cluster = RedisCluster::start(ClusterConfig::new(server.url())).unwrap();
    cluster.attach(&sentinel);
    let rule = FlowRule {
        cluster_mode: true,
        cluster_config: ClusterFlowConfig {
            flow_id: Some(1),
            ..ClusterFlowConfig::default()
        },
        ..FlowRule::new("r", count)
    };
    sentinel.flow_rules().load(vec![rule]).unwrap();
    while cluster.is_fallback() {
        std::thread::sleep(Duration::from_millis(5));
    }
    let per_ms = rate / 1_000;
    let start = Instant::now();
    let mut admitted = 0u64;
    for ms in 0..seconds * 1_000 {
        let due = start + Duration::from_millis(ms);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        for _ in 0..per_ms {
            admitted += u64::from(sentinel.entry("r").is_ok());
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let snapshot = cluster.snapshot();
    let flow = &snapshot.flows[0];
    (
        flow.round_trips as f64 / elapsed,
        admitted as f64 / elapsed,
        snapshot.fallback_decisions,
    )
}

#[test]
#[ignore = "real-time measurement for the README; run with --ignored --nocapture"]
fn round_trips_per_second() {
    for (rate, count) in [
        (1_000, 2_000.0),
        (1_000, 1_000.0),
        (100_000, 200_000.0),
        (100_000, 100_000.0),
    ] {
        let (trips, admitted, fallbacks) = run(rate, count, 3);
        println!(
            "offered {rate}/s, count {count}: {trips:.1} acquire calls/s, {admitted:.0} admitted/s, {fallbacks} fallbacks"
        );
        assert!(trips > 0.0);
    }
}
