//! Response-time percentiles through the public API, on a `ManualClock`:
//! exact quantiles of a scripted distribution, the minute window, several
//! threads (running, idle and exited), off costing nothing visible, the
//! sources (code and rule file), and the Prometheus summary.

use std::sync::{Barrier, mpsc};

use sentinel_flow_core::stat::RtPercentiles;
use sentinel_flow_core::{ManualClock, Sentinel};

use crate::support::{T0, call_taking, instance, instance_with};

/// `n` calls of `rt` ms each to `resource`.
fn calls(clock: &ManualClock, sentinel: &Sentinel, resource: &str, rt: u64, n: usize) {
    for _ in 0..n {
        call_taking(clock, sentinel, resource, rt);
    }
}

/// The percentiles of `resource` now, read from its node and from the
/// snapshot (which must agree).
fn percentiles(sentinel: &Sentinel, resource: &str) -> Option<RtPercentiles> {
    let node = sentinel.resource_node(resource)?;
    let from_node = node.rt_percentiles(sentinel.now_ms());
    let from_snapshot = sentinel
        .resources()
        .into_iter()
        .find(|r| &*r.name == resource)
        .and_then(|r| r.percentiles);
    assert_eq!(from_node, from_snapshot, "the node and the snapshot agree");
    from_snapshot
}

/// p50, p90, p99, max, count.
fn figures(p: RtPercentiles) -> (u64, u64, u64, u64, u64) {
    (p.p50, p.p90, p.p99, p.max, p.count)
}

#[test]
fn quantiles_of_a_scripted_distribution_are_exact() {
    let (clock, sentinel) = instance();
    let orders = sentinel.resource("GET:/orders");
    assert!(orders.track_percentiles(true));
    // 100 calls: 50 of 2 ms, 40 of 10 ms, 9 of 40 ms, 1 of 1 000 ms.
    for (rt, n) in [(10, 40), (2, 50), (1_000, 1), (40, 9)] {
        for _ in 0..n {
            let entry = orders.entry().unwrap();
            clock.advance_ms(rt);
            drop(entry);
        }
    }
    let p = percentiles(&sentinel, "GET:/orders").unwrap();
    assert_eq!(figures(p), (2, 10, 40, 1_000, 100));
    assert_eq!(p.sum_ms, 50 * 2 + 40 * 10 + 9 * 40 + 1_000);
    assert_eq!((p.total_count, p.total_sum_ms), (p.count, p.sum_ms));

    // Above 64 ms a quantile is the highest time of its bucket (100 and
    // 101 share one), never above the largest time seen.
    let (clock, sentinel) = instance();
    sentinel.track_percentiles("slow", true);
    calls(&clock, &sentinel, "slow", 100, 10);
    let p = percentiles(&sentinel, "slow").unwrap();
    assert_eq!(figures(p), (100, 100, 100, 100, 10), "capped at the max");
    calls(&clock, &sentinel, "slow", 200, 1);
    let p = percentiles(&sentinel, "slow").unwrap();
    assert_eq!(figures(p), (101, 101, 200, 200, 11));
}

#[test]
fn the_minute_forgets_what_is_older_than_60_seconds() {
    let (clock, sentinel) = instance();
    sentinel.track_percentiles("a", true);
    calls(&clock, &sentinel, "a", 5, 1); // completes in second 0
    clock.set(T0 + 30_000);
    calls(&clock, &sentinel, "a", 7, 2); // second 30

    clock.set(T0 + 59_999);
    assert_eq!(
        figures(percentiles(&sentinel, "a").unwrap()),
        (7, 7, 7, 7, 3)
    );
    clock.set(T0 + 60_000);
    let p = percentiles(&sentinel, "a").unwrap();
    assert_eq!(figures(p), (7, 7, 7, 7, 2), "second 0 has left the minute");
    clock.set(T0 + 90_100);
    let p = percentiles(&sentinel, "a").unwrap();
    assert_eq!(
        figures(p),
        (0, 0, 0, 0, 0),
        "tracked, nothing in the minute"
    );
    assert_eq!((p.total_count, p.total_sum_ms), (3, 19), "totals stay");

    // A thread back after minutes hands over what it held and starts anew.
    clock.set(T0 + 300_000);
    calls(&clock, &sentinel, "a", 3, 1);
    let p = percentiles(&sentinel, "a").unwrap();
    assert_eq!(figures(p), (3, 3, 3, 3, 1));
    assert_eq!(p.total_count, 4);
}

#[test]
fn four_threads_are_all_counted_across_seconds() {
    const PER_THREAD: usize = 1_000;
    let (clock, sentinel) = instance();
    let resource = sentinel.resource("shared");
    resource.track_percentiles(true);
    // Every entry starts at T0; half complete at T0 + 3 ms, half at
    // T0 + 2 003 ms, two seconds later, on four threads.
    let entries: Vec<Vec<_>> = (0..4)
        .map(|_| (0..PER_THREAD).map(|_| resource.entry().unwrap()).collect())
        .collect();
    clock.advance_ms(3);
    let barrier = Barrier::new(5);
    std::thread::scope(|scope| {
        for mut mine in entries {
            let barrier = &barrier;
            scope.spawn(move || {
                let late = mine.split_off(PER_THREAD / 2);
                drop(mine);
                barrier.wait();
                barrier.wait();
                drop(late);
            });
        }
        barrier.wait();
        clock.advance_ms(2_000);
        barrier.wait();
    });
    let p = percentiles(&sentinel, "shared").unwrap();
    assert_eq!(p.count, 4 * PER_THREAD as u64);
    assert_eq!(p.sum_ms, 2_000 * 3 + 2_000 * 2_003);
    // 2 003 ms is in the bucket up to 2 015 ms; capped at the max.
    assert_eq!((p.p50, p.p90, p.p99, p.max), (3, 2_003, 2_003, 2_003));
}

#[test]
fn idle_and_exited_threads_still_count() {
    let (clock, sentinel) = instance();
    sentinel.track_percentiles("a", true);
    // A thread records, then exits.
    std::thread::scope(|scope| {
        scope.spawn(|| calls(&clock, &sentinel, "a", 4, 10));
    });
    assert_eq!(percentiles(&sentinel, "a").unwrap().count, 10);

    // Another records and stays alive, idle, while the minute is read.
    let (resume, wait) = mpsc::channel::<()>();
    let (recorded, done) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let (clock, sentinel) = (&clock, &sentinel);
        scope.spawn(move || {
            calls(clock, sentinel, "a", 6, 5);
            recorded.send(()).unwrap();
            wait.recv().unwrap();
        });
        done.recv().unwrap();
        clock.set(T0 + 30_000);
        let p = percentiles(sentinel, "a").unwrap();
        assert_eq!(figures(p), (4, 6, 6, 6, 15));
        resume.send(()).unwrap();
    });

    // New threads, likely on an exited thread's recorder, in a later
    // second; one at a time, so that each call's time is its own.
    clock.set(T0 + 45_000);
    for _ in 0..3 {
        std::thread::scope(|scope| {
            scope.spawn(|| calls(&clock, &sentinel, "a", 8, 5));
        });
    }
    let p = percentiles(&sentinel, "a").unwrap();
    assert_eq!(figures(p), (6, 8, 8, 8, 30));
    assert_eq!(p.sum_ms, 10 * 4 + 5 * 6 + 15 * 8);
}

#[test]
fn off_is_none_and_records_nothing() {
    let (clock, sentinel) = instance();
    calls(&clock, &sentinel, "a", 5, 3);
    assert_eq!(percentiles(&sentinel, "a"), None, "off by default");
    let node = sentinel.resource_node("a").unwrap();
    assert!(!node.tracks_percentiles());

    assert!(sentinel.track_percentiles("a", true));
    assert!(node.tracks_percentiles());
    calls(&clock, &sentinel, "a", 7, 2);
    assert_eq!(
        percentiles(&sentinel, "a").unwrap().count,
        2,
        "only since on"
    );

    assert!(!sentinel.track_percentiles("a", false));
    assert!(!node.tracks_percentiles());
    calls(&clock, &sentinel, "a", 9, 4);
    assert_eq!(percentiles(&sentinel, "a"), None);
    assert!(sentinel.track_percentiles("a", true));
    let p = percentiles(&sentinel, "a").unwrap();
    assert_eq!(figures(p), (7, 7, 7, 7, 2), "nothing recorded while off");

    // Turning off a resource never entered makes nothing.
    assert!(!sentinel.track_percentiles("never", false));
    assert!(sentinel.resource_node("never").is_none());
}

#[test]
fn a_resource_past_the_cap_cannot_be_tracked() {
    let (_clock, sentinel) = instance_with(|builder| builder.max_resources(1));
    assert!(sentinel.track_percentiles("first", true));
    assert!(!sentinel.track_percentiles("second", true));
    assert!(!sentinel.resource("third").track_percentiles(true));
    assert_eq!(
        sentinel.track_percentiles_from_rules(&["first", "fourth"]),
        ["fourth"]
    );
    assert_eq!(sentinel.resources().len(), 1);
}

#[test]
fn the_rule_file_turns_off_only_what_it_turned_on() {
    let (_clock, sentinel) = instance();
    let tracked = |name: &str| {
        sentinel
            .resource_node(name)
            .is_some_and(|n| n.tracks_percentiles())
    };
    sentinel.track_percentiles("by_code", true);
    assert!(
        sentinel
            .track_percentiles_from_rules(&["by_code", "a", "b"])
            .is_empty()
    );
    assert!(tracked("by_code") && tracked("a") && tracked("b"));

    // The next file drops a and by_code: a goes off, by_code stays on.
    sentinel.track_percentiles_from_rules(&["b", "c"]);
    assert!(tracked("by_code") && !tracked("a") && tracked("b") && tracked("c"));

    // Code turning off what the file lists leaves it on until the file
    // drops it too.
    assert!(
        sentinel.track_percentiles("b", false),
        "the file still lists b"
    );
    sentinel.track_percentiles("c", true);
    sentinel.track_percentiles_from_rules::<&str>(&[]);
    assert!(tracked("by_code") && !tracked("b") && tracked("c"));
}

#[cfg(feature = "prometheus")]
#[test]
fn prometheus_shows_a_summary_for_tracked_resources_only() {
    use crate::support::prometheus::{key, parse};
    use sentinel_flow_core::prometheus::render_prometheus;

    let (clock, sentinel) = instance();
    calls(&clock, &sentinel, "untracked", 5, 1);
    let text = render_prometheus(&sentinel);
    assert!(
        !text.contains("sentinel_rt_ms"),
        "no block while none is tracked"
    );

    sentinel.track_percentiles("GET:/a", true);
    for rt in 1..=50 {
        calls(&clock, &sentinel, "GET:/a", rt, 1);
    }
    sentinel.track_percentiles("idle", true);
    let (samples, types) = parse(&render_prometheus(&sentinel));
    assert_eq!(types["sentinel_rt_ms"], "summary");
    assert_eq!(types["sentinel_rt_max_ms"], "gauge");
    let get = |name: &str, labels: &[(&str, &str)]| samples[&key(name, labels)];
    let a = ("resource", "GET:/a");
    assert_eq!(get("sentinel_rt_ms", &[a, ("quantile", "0.5")]), 25.0);
    assert_eq!(get("sentinel_rt_ms", &[a, ("quantile", "0.9")]), 45.0);
    assert_eq!(get("sentinel_rt_ms", &[a, ("quantile", "0.99")]), 50.0);
    assert_eq!(get("sentinel_rt_ms_sum", &[a]), 1_275.0);
    assert_eq!(get("sentinel_rt_ms_count", &[a]), 50.0);
    assert_eq!(get("sentinel_rt_max_ms", &[a]), 50.0);
    let idle = ("resource", "idle");
    assert!(get("sentinel_rt_ms", &[idle, ("quantile", "0.5")]).is_nan());
    assert_eq!(get("sentinel_rt_ms_count", &[idle]), 0.0);
    assert!(
        !samples
            .keys()
            .any(|(name, labels)| name.starts_with("sentinel_rt_")
                && labels.iter().any(|(_, value)| value.contains("untracked"))),
        "only tracked resources"
    );

    // A minute later the quantiles are gone; the count stays.
    clock.advance_ms(60_000);
    let (samples, _) = parse(&render_prometheus(&sentinel));
    let a = ("resource", "GET:/a");
    assert!(samples[&key("sentinel_rt_ms", &[a, ("quantile", "0.99")])].is_nan());
    assert_eq!(samples[&key("sentinel_rt_ms_count", &[a])], 50.0);
}
