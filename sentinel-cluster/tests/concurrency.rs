//! Cluster concurrency against a real Redis: instances sharing a thread
//! limit never hold more than it together; a token held past the rule's
//! `resource_timeout` is taken back; the tokens of an instance that
//! vanished come back after `client_offline_time`; with Redis paused or
//! down, each instance holds at most its share.
//!
//! Redis keeps its own time, so these tests wait in real time (bounded
//! polls), never on the instance's clock.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sentinel_flow_cluster::{ClusterConfig, RedisCluster};
use sentinel_flow_core::flow::{ClusterFlowConfig, FlowGrade, FlowRule};
use sentinel_flow_core::{Entry, Sentinel};
use support::RedisServer;

const RESOURCE: &str = "GET:/report";
const FLOW_ID: u64 = 21;

fn threads_rule(count: f64, config: ClusterFlowConfig) -> FlowRule {
    FlowRule {
        grade: FlowGrade::Concurrency,
        cluster_mode: true,
        cluster_config: ClusterFlowConfig {
            flow_id: Some(FLOW_ID),
            ..config
        },
        ..FlowRule::new(RESOURCE, count)
    }
}

fn instance(config: ClusterConfig, rule: FlowRule) -> (Sentinel, RedisCluster) {
    let sentinel = Sentinel::builder().build();
    let cluster = RedisCluster::start(config).unwrap();
    cluster.attach(&sentinel);
    sentinel.flow_rules().load(vec![rule]).unwrap();
    (sentinel, cluster)
}

/// A generous budget: every entry is answered by Redis, none by the
/// fallback, so the count is exact.
fn patient(server: &RedisServer, id: &str) -> ClusterConfig {
    ClusterConfig::new(server.url())
        .instance_id(id)
        .budget(Duration::from_secs(1))
        .response_timeout(Duration::from_secs(2))
}

/// Polls `done` every 10 ms until it holds or `within` passed; how long
/// it took, `None` if it never held.
fn wait_for(within: Duration, mut done: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < within {
        if done() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

fn tokens_in_redis(server: &RedisServer) -> u64 {
    let key = format!("{{sentinel:flow:{FLOW_ID}}}:tokens");
    server
        .command(&["ZCARD", &key])
        .and_then(|line| line.trim_start_matches(':').parse().ok())
        .unwrap_or(u64::MAX)
}

/// Enters until refused; the entries held.
fn hold_all(sentinel: &Sentinel, at_most: usize) -> Vec<Entry<'_>> {
    let mut held = Vec::new();
    while held.len() < at_most {
        match sentinel.entry(RESOURCE) {
            Ok(entry) => held.push(entry),
            Err(_) => break,
        }
    }
    held
}

fn both_see_two(clusters: [&RedisCluster; 2]) -> bool {
    clusters.iter().all(|c| {
        let snapshot = c.snapshot();
        !snapshot.fallback && snapshot.flows.iter().any(|f| f.instances == 2)
    })
}

#[test]
fn two_instances_never_hold_more_than_the_cluster_limit_together() {
    const LIMIT: usize = 4;
    let server = RedisServer::start();
    let rule = threads_rule(LIMIT as f64, ClusterFlowConfig::default());
    let (a, cluster_a) = instance(patient(&server, "a"), rule.clone());
    let (b, cluster_b) = instance(patient(&server, "b"), rule);
    assert!(
        wait_for(Duration::from_secs(5), || both_see_two([
            &cluster_a, &cluster_b
        ]))
        .is_some()
    );

    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let admitted = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    std::thread::scope(|scope| {
        for sentinel in [&a, &b] {
            for _ in 0..4 {
                let (inside, most, admitted, stop) =
                    (inside.clone(), most.clone(), admitted.clone(), stop.clone());
                scope.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let Ok(entry) = sentinel.entry(RESOURCE) else {
                            std::thread::yield_now();
                            continue;
                        };
                        let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        admitted.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(3));
                        // Out before the token goes back.
                        inside.fetch_sub(1, Ordering::SeqCst);
                        drop(entry);
                    }
                });
            }
        }
        std::thread::sleep(Duration::from_millis(1_500));
        stop.store(true, Ordering::Relaxed);
    });
    let most = most.load(Ordering::SeqCst);
    let admitted = admitted.load(Ordering::Relaxed);
    for cluster in [&cluster_a, &cluster_b] {
        let snapshot = cluster.snapshot();
        assert_eq!(snapshot.fallback_decisions, 0, "{snapshot:?}");
    }
    assert!(most <= LIMIT, "{most} held at once against {LIMIT}");
    assert!(
        most >= 2 && admitted > 50,
        "{most} at most, {admitted} admitted"
    );
    // Every token went back.
    let back = wait_for(Duration::from_secs(3), || tokens_in_redis(&server) == 0);
    assert!(
        back.is_some(),
        "{} tokens left in Redis",
        tokens_in_redis(&server)
    );
    for cluster in [&cluster_a, &cluster_b] {
        let snapshot = cluster.snapshot();
        assert_eq!(snapshot.flows[0].tokens_held, 0);
        assert_eq!(snapshot.pending_releases, 0);
    }
}

#[test]
fn a_token_held_past_resource_timeout_is_taken_back() {
    let server = RedisServer::start();
    let rule = threads_rule(
        1.0,
        ClusterFlowConfig {
            resource_timeout: 300,
            // Taken back at the timeout itself (0: at twice it).
            resource_timeout_strategy: 1,
            ..ClusterFlowConfig::default()
        },
    );
    let (a, cluster_a) = instance(patient(&server, "a"), rule.clone());
    let (b, cluster_b) = instance(patient(&server, "b"), rule);
    assert!(
        wait_for(Duration::from_secs(5), || both_see_two([
            &cluster_a, &cluster_b
        ]))
        .is_some()
    );
    let stuck = a.entry(RESOURCE).expect("the one token");
    let start = Instant::now();
    assert!(b.entry(RESOURCE).is_err(), "held by a");
    let taken_back = wait_for(Duration::from_secs(3), || b.entry(RESOURCE).is_ok())
        .expect("a's token taken back");
    assert!(
        start.elapsed() >= Duration::from_millis(250),
        "not before the timeout: {taken_back:?}"
    );
    assert!(
        start.elapsed() < Duration::from_millis(1_300),
        "{:?}",
        start.elapsed()
    );
    // The late exit gives back nothing that is not held.
    drop(stuck);
    assert!(wait_for(Duration::from_secs(2), || tokens_in_redis(&server) == 0).is_some());
}

#[test]
fn a_vanished_instance_s_tokens_come_back_after_client_offline_time() {
    let server = RedisServer::start();
    let rule = threads_rule(
        2.0,
        ClusterFlowConfig {
            resource_timeout: 60_000,
            client_offline_time: 400,
            ..ClusterFlowConfig::default()
        },
    );
    let quick = |id| patient(&server, id).instance_ttl(Duration::from_millis(300));
    let (a, cluster_a) = instance(quick("a"), rule.clone());
    let (b, cluster_b) = instance(quick("b"), rule);
    assert!(
        wait_for(Duration::from_secs(5), || both_see_two([
            &cluster_a, &cluster_b
        ]))
        .is_some()
    );
    let held = hold_all(&a, 2);
    assert_eq!(held.len(), 2);
    assert!(b.entry(RESOURCE).is_err(), "a holds both");
    // a dies holding them: its exits never run, its heartbeats stop.
    std::mem::forget(held);
    drop(cluster_a);
    let died = Instant::now();
    let back = wait_for(Duration::from_secs(5), || {
        let held = hold_all(&b, 2);
        held.len() == 2
    });
    let back = back.expect("a's tokens came back");
    assert!(
        died.elapsed() < Duration::from_millis(400 + 1_000),
        "{back:?} after a vanished"
    );
}

#[test]
fn with_redis_paused_or_down_each_instance_holds_at_most_its_share() {
    let mut server = RedisServer::start();
    let rule = threads_rule(4.0, ClusterFlowConfig::default());
    let quick = |id| {
        ClusterConfig::new(server.url())
            .instance_id(id)
            .budget(Duration::from_millis(20))
            .response_timeout(Duration::from_millis(100))
            .backoff(Duration::from_millis(50), Duration::from_millis(200))
    };
    let (a, cluster_a) = instance(quick("a"), rule.clone());
    let (b, cluster_b) = instance(quick("b"), rule);
    assert!(
        wait_for(Duration::from_secs(5), || both_see_two([
            &cluster_a, &cluster_b
        ]))
        .is_some()
    );

    // Paused: the calls hang past the budget, the fallback decides.
    assert_eq!(
        server
            .command(&["CLIENT", "PAUSE", "1500", "ALL"])
            .as_deref(),
        Some("+OK")
    );
    for (sentinel, cluster) in [(&a, &cluster_a), (&b, &cluster_b)] {
        let held = hold_all(sentinel, 10);
        assert_eq!(
            held.len(),
            2,
            "the share of 4 between 2: {:?}",
            cluster.snapshot()
        );
    }
    std::thread::sleep(Duration::from_millis(1_600));

    // Down: the same share.
    server.kill();
    for (sentinel, cluster) in [(&a, &cluster_a), (&b, &cluster_b)] {
        assert!(
            wait_for(Duration::from_secs(3), || cluster.is_fallback()).is_some(),
            "in fallback"
        );
        let held = hold_all(sentinel, 10);
        assert_eq!(held.len(), 2, "{:?}", cluster.snapshot());
        drop(held);
        assert_eq!(cluster.snapshot().flows[0].tokens_held, 0);
    }
}
