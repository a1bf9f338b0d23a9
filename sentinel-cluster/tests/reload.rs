//! A reloaded rule takes effect on the permits this instance already
//! holds: what the lease and its threads' sub-leases hold under the old
//! settings is taken back and refunded, not spent under the new ones.

mod support;

use std::time::{Duration, Instant};

use sentinel_flow_cluster::{ClusterConfig, RedisCluster};
use sentinel_flow_core::flow::{ClusterFlowConfig, FlowRule};
use sentinel_flow_core::{ManualClock, Sentinel};
use support::RedisServer;

const RESOURCE: &str = "GET:/reload";

fn rule(count: f64) -> FlowRule {
    FlowRule {
        cluster_mode: true,
        cluster_config: ClusterFlowConfig {
            flow_id: Some(21),
            ..ClusterFlowConfig::default()
        },
        ..FlowRule::new(RESOURCE, count)
    }
}

fn wait_until(what: &str, limit: Duration, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The instance's clock stands still, so the lease's permits never expire
/// on it: only the reload can take them back.
#[test]
fn a_lowered_count_took_effect_only_after_the_lease_granted_under_the_old_one_was_spent() {
    let server = RedisServer::start();
    let clock = ManualClock::new(1_000_000);
    let sentinel = Sentinel::builder().clock(clock.clone()).build();
    let cluster = RedisCluster::start(
        ClusterConfig::new(server.url())
            .clock(clock.clone())
            .budget(Duration::from_millis(200)),
    )
    .unwrap();
    cluster.attach(&sentinel);
    sentinel.flow_rules().load(vec![rule(100_000.0)]).unwrap();
    wait_until("connected", Duration::from_secs(5), || {
        !cluster.is_fallback()
    });
    let admitted = |n: usize| {
        (0..n)
            .map(|_| std::thread::scope(|s| s.spawn(|| sentinel.entry(RESOURCE).is_ok()).join()))
            .filter(|ok| matches!(ok, Ok(true)))
            .count()
    };
    // Entries on a few threads: the lease and their sub-leases hold permits.
    assert_eq!(admitted(200), 200);
    let held = || cluster.snapshot().flows[0].lease_permits;
    assert!(held() > 0, "permits held before the reload");
    sentinel.flow_rules().load(vec![rule(10.0)]).unwrap();
    // The worker takes it back on its wake-up, with a refund to Redis: a
    // deadline for a background thread on a loaded machine, not a window.
    wait_until("the lease taken back", Duration::from_secs(10), || {
        held() == 0
    });
    // The window (1 s on Redis' clock) holds 200 admissions: over 10.
    let after = admitted(100);
    assert!(after <= 10, "{after} admitted past a count of 10");
    let flow = &cluster.snapshot().flows[0];
    assert!(flow.refunded > 0, "{flow:?}");
}
