//! A Redis that stalls (paused 100 ms of every 120 ms) under three
//! instances offering three times a global 300: entries past the budget
//! fall back, and instances switch to fallback and back; in every aligned
//! second the instances together admit at most the cluster's 300 plus one
//! instance's fallback allowance (its share, 300 / 3), the seconds an
//! instance leaves fallback included. Real time (the window is Redis'
//! clock); each admission is counted in the second its instance's clock
//! read ([`StampClock`]).

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sentinel_flow_cluster::{ClusterConfig, RedisCluster};
use sentinel_flow_core::Sentinel;
use sentinel_flow_core::flow::{ClusterFlowConfig, FlowRule};
use support::{RedisServer, StampClock, offer, per_second, unix_ms};

const RESOURCE: &str = "POST:/pay";
const LIMIT: usize = 300;
/// One instance's fallback allowance: its share of the limit.
const ALLOWANCE: usize = LIMIT / 3;

/// The runs take turns: each is a dozen threads pacing real traffic.
static ONE_RUN_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn rule() -> FlowRule {
    FlowRule {
        cluster_mode: true,
        cluster_config: ClusterFlowConfig {
            flow_id: Some(5),
            ..ClusterFlowConfig::default()
        },
        ..FlowRule::new(RESOURCE, LIMIT as f64)
    }
}

fn instance(url: &str, response_timeout: Duration) -> (Sentinel, RedisCluster) {
    let sentinel = Sentinel::builder().clock(StampClock).build();
    let config = ClusterConfig::new(url)
        .response_timeout(response_timeout)
        .backoff(Duration::from_millis(20), Duration::from_millis(200));
    let cluster = RedisCluster::start(config).unwrap();
    cluster.attach(&sentinel);
    sentinel.flow_rules().load(vec![rule()]).unwrap();
    (sentinel, cluster)
}

/// Three instances, 300 a second each for `secs`, Redis paused 100 ms of
/// every 120 ms from the second second to three seconds before the end;
/// the admitted per aligned second (whole seconds only), and the
/// instances' snapshots.
fn stalled_run(response_timeout: Duration, secs: u64) -> Vec<(u64, usize)> {
    let _turn = ONE_RUN_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let server = RedisServer::start();
    let instances: Vec<_> = (0..3)
        .map(|_| instance(&server.url(), response_timeout))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(5);
    while instances.iter().any(|(_, c)| c.is_fallback()) {
        assert!(Instant::now() < deadline, "not connected");
        std::thread::sleep(Duration::from_millis(10));
    }
    let stalling = AtomicBool::new(true);
    let loads: Vec<_> = std::thread::scope(|s| {
        let runs: Vec<_> = instances
            .iter()
            .map(|(sentinel, _)| {
                s.spawn(move || offer(sentinel, RESOURCE, 300, Duration::from_secs(secs)))
            })
            .collect();
        let (server, stalling) = (&server, &stalling);
        s.spawn(move || {
            std::thread::sleep(Duration::from_secs(1));
            let until = Instant::now() + Duration::from_secs(secs - 4);
            while Instant::now() < until && stalling.load(Ordering::Relaxed) {
                let _ = server.command(&["CLIENT", "PAUSE", "100", "ALL"]);
                std::thread::sleep(Duration::from_millis(120));
            }
        });
        let loads = runs.into_iter().map(|r| r.join().unwrap()).collect();
        stalling.store(false, Ordering::Relaxed);
        loads
    });
    let (mut switches, mut charged) = (0, 0);
    for (_, cluster) in &instances {
        let snapshot = cluster.snapshot();
        println!("{snapshot:?}");
        switches += snapshot.fallback_switches;
        charged += snapshot.flows[0].fallback_charged;
        assert!(snapshot.fallback_decisions > 0, "{snapshot:?}");
        assert_eq!(
            snapshot.flows[0].fallback_allowance, ALLOWANCE as u64,
            "{snapshot:?}"
        );
    }
    assert!(charged > 0, "the fallback's admissions reached redis");
    let seconds = per_second(loads.iter().flat_map(|l| l.admitted.iter().copied()));
    let whole: Vec<(u64, usize)> = seconds
        .iter()
        .skip(1)
        .take(seconds.len().saturating_sub(2))
        .map(|(s, n)| (*s, *n))
        .collect();
    println!(
        "admitted per second: {whole:?}; {switches} switches, {charged} charged; now {}",
        unix_ms()
    );
    assert!(whole.len() as u64 >= secs - 2, "{seconds:?}");
    whole
}

fn assert_within_limit_and_allowance(whole: &[(u64, usize)]) {
    for (second, admitted) in whole {
        assert!(
            *admitted <= LIMIT + ALLOWANCE,
            "second {second}: {admitted} admitted; all: {whole:?}"
        );
    }
}

/// Calls slower than the budget but within the response timeout: entries
/// that wait out the budget fall back while the client stays connected.
#[test]
fn entries_past_the_budget_admitted_by_the_local_count_beside_the_cluster_grants() {
    let whole = stalled_run(Duration::from_millis(250), 10);
    assert_within_limit_and_allowance(&whole);
}

/// Calls slower than the response timeout: the client switches to
/// fallback and back again and again; the seconds it comes back in hold
/// the bound too (the fallback's admissions are charged to the cluster's
/// window by the next acquire call).
#[test]
fn the_second_an_instance_left_fallback_admitted_its_fallback_count_and_a_cluster_share() {
    let whole = stalled_run(Duration::from_millis(60), 10);
    assert_within_limit_and_allowance(&whole);
}
