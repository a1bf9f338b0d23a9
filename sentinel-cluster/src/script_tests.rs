//! The scripts' semantics against a real server (their time is the
//! server's, so windows are crossed by sleeping past them).

use std::time::Duration;

use super::support;
use super::*;

struct Call {
    count: f64,
    avg_local: bool,
    window_ms: u64,
    samples: u32,
    divisor: u32,
    max_lease: u32,
}

fn acquire(
    conn: &mut redis::Connection,
    keys: &FlowKeys,
    call: &Call,
    need: u32,
    instance: &str,
) -> Grant {
    acquire_charging(conn, keys, call, need, instance, &[])
}

/// An acquire call that also charges fallback admissions (age ms, count).
fn acquire_charging(
    conn: &mut redis::Connection,
    keys: &FlowKeys,
    call: &Call,
    need: u32,
    instance: &str,
    charges: &[(u64, u64)],
) -> Grant {
    let scripts = Scripts::new();
    let mut invocation = scripts.acquire.prepare_invoke();
    invocation
        .key(&keys.window)
        .key(&keys.instances)
        .key(&keys.counts)
        .arg(need)
        .arg(call.count)
        .arg(u8::from(call.avg_local))
        .arg(call.window_ms)
        .arg(call.samples)
        .arg(call.divisor)
        .arg(call.max_lease)
        .arg(instance)
        .arg(3_000);
    for (age, n) in charges {
        invocation.arg(*age).arg(*n);
    }
    let reply: Vec<i64> = invocation.invoke(conn).unwrap();
    Grant::from_reply(&reply).unwrap()
}

#[test]
fn the_script_runs_on_a_redis_cluster() {
    let keys = FlowKeys::new("sentinel", 42);
    assert_eq!(keys.window, "{sentinel:flow:42}:window");
    assert_eq!(keys.instances, "{sentinel:flow:42}:instances");
    assert_eq!(keys.counts, "{sentinel:flow:42}:counts");
    // A one-node Redis Cluster holding every slot: it refuses a script
    // whose keys are in different slots (CROSSSLOT).
    let server = support::RedisServer::start_with(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
    ]);
    let mut conn = server.connect();
    let _: () = redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16_383)
        .query(&mut conn)
        .unwrap();
    let slot = |conn: &mut redis::Connection, key: &str| -> i64 {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(key)
            .query(conn)
            .unwrap()
    };
    assert_eq!(
        slot(&mut conn, &keys.window),
        slot(&mut conn, &keys.instances)
    );
    assert_eq!(slot(&mut conn, &keys.window), slot(&mut conn, &keys.counts));
    for key in [&keys.tokens, &keys.held, &keys.seen] {
        assert_eq!(slot(&mut conn, &keys.window), slot(&mut conn, key));
    }
    assert_ne!(
        slot(&mut conn, &keys.window),
        slot(&mut conn, "{sentinel:flow:43}:window")
    );
    // The cluster takes a moment to see its slots.
    let call = Call {
        count: 10.0,
        avg_local: false,
        window_ms: 1_000,
        samples: 10,
        divisor: 1,
        max_lease: 4,
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let grant = loop {
        let scripts = Scripts::new();
        let reply: redis::RedisResult<Vec<i64>> = scripts
            .acquire
            .key(&keys.window)
            .key(&keys.instances)
            .key(&keys.counts)
            .arg(1)
            .arg(call.count)
            .arg(0)
            .arg(call.window_ms)
            .arg(call.samples)
            .arg(call.divisor)
            .arg(call.max_lease)
            .arg("a")
            .arg(3_000)
            .invoke(&mut conn);
        match reply {
            Ok(reply) => break Grant::from_reply(&reply).unwrap(),
            Err(e) if std::time::Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(grant.granted, 4);
    // Keys of two flow ids in one call are refused by the cluster.
    let crossed: redis::RedisResult<Vec<i64>> = Scripts::new()
        .acquire
        .key(&keys.window)
        .key("{sentinel:flow:43}:instances")
        .key(&keys.counts)
        .arg(1)
        .arg(10)
        .arg(0)
        .arg(1_000)
        .arg(10)
        .arg(1)
        .arg(4)
        .arg("a")
        .arg(3_000)
        .invoke(&mut conn);
    assert!(crossed.is_err());
}

#[test]
fn grants_leases_up_to_the_threshold_then_nothing() {
    let server = support::RedisServer::start();
    let mut conn = server.connect();
    let keys = FlowKeys::new("t", 1);
    let call = Call {
        count: 10.0,
        avg_local: false,
        window_ms: 60_000,
        samples: 1,
        divisor: 1,
        max_lease: 4,
    };
    let grants: Vec<u64> = (0..5)
        .map(|_| acquire(&mut conn, &keys, &call, 1, "a").granted)
        .collect();
    assert_eq!(grants, [4, 4, 2, 0, 0]);
    let last = acquire(&mut conn, &keys, &call, 1, "a");
    assert_eq!((last.total, last.threshold, last.instances), (10, 10, 1));
    assert!(last.bucket_end_ms > last.server_now_ms);
    // An entry needing more than remains gets nothing, not a part.
    let keys = FlowKeys::new("t", 2);
    let call = Call {
        max_lease: 100,
        ..call
    };
    assert_eq!(acquire(&mut conn, &keys, &call, 7, "a").granted, 10);
    let keys = FlowKeys::new("t", 3);
    let call = Call { divisor: 4, ..call };
    // 10 / 4 = 2, but the entry needs 3; then 10 - 3 = 7 left, 7 / 4 = 1.
    assert_eq!(acquire(&mut conn, &keys, &call, 3, "a").granted, 3);
    assert_eq!(acquire(&mut conn, &keys, &call, 1, "a").granted, 1);
    assert_eq!(acquire(&mut conn, &keys, &call, 7, "a").granted, 0);
    assert_eq!(acquire(&mut conn, &keys, &call, 6, "a").granted, 6);
}

#[test]
fn the_window_slides_bucket_by_bucket() {
    let server = support::RedisServer::start();
    let mut conn = server.connect();
    let keys = FlowKeys::new("t", 1);
    // 400 ms of 2 buckets of 200 ms.
    let call = Call {
        count: 6.0,
        avg_local: false,
        window_ms: 400,
        samples: 2,
        divisor: 1,
        max_lease: 3,
    };
    // Start just after a bucket edge so the steps below stay in their buckets.
    let first = acquire(&mut conn, &keys, &call, 1, "a");
    let wait = first.bucket_end_ms - first.server_now_ms;
    std::thread::sleep(Duration::from_millis(wait + 5));
    let keys = FlowKeys::new("t", 2);
    let a = acquire(&mut conn, &keys, &call, 1, "a");
    assert_eq!(a.granted, 3);
    std::thread::sleep(Duration::from_millis(200));
    // The next bucket: the first still counts (window of two).
    let b = acquire(&mut conn, &keys, &call, 1, "a");
    assert_eq!((b.granted, b.total), (3, 6), "{a:?} {b:?}");
    assert_eq!(acquire(&mut conn, &keys, &call, 1, "a").granted, 0, "full");
    std::thread::sleep(Duration::from_millis(200));
    // The first bucket left the window: its 3 permits are free again.
    let c = acquire(&mut conn, &keys, &call, 1, "a");
    assert_eq!((c.granted, c.total), (3, 6), "{c:?}");
    let fields: u64 = redis::cmd("HLEN")
        .arg(&keys.window)
        .query(&mut conn)
        .unwrap();
    assert_eq!(fields, 2, "the bucket out of the window was deleted");
}

#[test]
fn refunds_free_permits_of_their_bucket() {
    let server = support::RedisServer::start();
    let mut conn = server.connect();
    let keys = FlowKeys::new("t", 1);
    let call = Call {
        count: 5.0,
        avg_local: false,
        window_ms: 60_000,
        samples: 1,
        divisor: 1,
        max_lease: 5,
    };
    let grant = acquire(&mut conn, &keys, &call, 1, "a");
    assert_eq!(grant.granted, 5);
    let bucket = grant.bucket_start_ms(60_000, 1);
    let refund = |conn: &mut redis::Connection, bucket: u64, n: u64| -> u64 {
        Scripts::new()
            .refund
            .key(&keys.window)
            .arg(bucket)
            .arg(n)
            .invoke(conn)
            .unwrap()
    };
    assert_eq!(refund(&mut conn, bucket, 3), 3);
    assert_eq!(acquire(&mut conn, &keys, &call, 1, "a").granted, 3);
    assert_eq!(
        refund(&mut conn, bucket, 99),
        5,
        "never more than the bucket holds"
    );
    assert_eq!(
        refund(&mut conn, bucket + 1, 2),
        0,
        "a bucket that is not there"
    );
    assert_eq!(refund(&mut conn, bucket, 1), 0);
}

#[test]
fn keys_expire_and_instances_are_counted() {
    let server = support::RedisServer::start();
    let mut conn = server.connect();
    let keys = FlowKeys::new("t", 1);
    let call = Call {
        count: 10.0,
        avg_local: true,
        window_ms: 1_000,
        samples: 10,
        divisor: 1,
        max_lease: 1_000,
    };
    let a = acquire(&mut conn, &keys, &call, 1, "a");
    assert_eq!((a.threshold, a.instances, a.granted), (10, 1, 10));
    let live: u64 = Scripts::new()
        .register
        .key(&keys.instances)
        .arg("b")
        .arg(3_000)
        .invoke(&mut conn)
        .unwrap();
    assert_eq!(live, 2);
    let c = acquire(&mut conn, &keys, &call, 1, "c");
    assert_eq!(
        (c.threshold, c.instances),
        (30, 3),
        "avg_local: count x live instances"
    );
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&keys.window)
        .query(&mut conn)
        .unwrap();
    assert!(
        (1..=2_000).contains(&ttl),
        "the window lives two windows: {ttl}"
    );
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&keys.instances)
        .query(&mut conn)
        .unwrap();
    assert!((1..=3_000).contains(&ttl), "{ttl}");
    // An instance that stops beating drops out after its ttl.
    let short: u64 = Scripts::new()
        .register
        .key(&keys.instances)
        .arg("d")
        .arg(50)
        .invoke(&mut conn)
        .unwrap();
    assert_eq!(short, 4);
    std::thread::sleep(Duration::from_millis(80));
    let live: u64 = Scripts::new()
        .register
        .key(&keys.instances)
        .arg("a")
        .arg(3_000)
        .invoke(&mut conn)
        .unwrap();
    assert_eq!(live, 3);
}

#[test]
fn fallback_admissions_were_never_charged_to_the_cluster_window() {
    let server = support::RedisServer::start();
    let mut conn = server.connect();
    let keys = FlowKeys::new("t", 1);
    let call = Call {
        count: 10.0,
        avg_local: false,
        window_ms: 60_000,
        samples: 1,
        divisor: 1,
        max_lease: 100,
    };
    // 6 admitted by the fallback: only 4 left for the grant.
    let grant = acquire_charging(&mut conn, &keys, &call, 1, "a", &[(5, 6)]);
    assert_eq!((grant.granted, grant.total), (4, 10), "{grant:?}");
    // Charged even with the window full: the admissions happened.
    let full = acquire_charging(&mut conn, &keys, &call, 1, "a", &[(5, 2)]);
    assert_eq!((full.granted, full.total), (0, 12), "{full:?}");
    // An admission older than the window is not charged.
    let keys = FlowKeys::new("t", 2);
    let old = acquire_charging(&mut conn, &keys, &call, 1, "a", &[(120_000, 7)]);
    assert_eq!((old.granted, old.total), (10, 10), "{old:?}");
}

#[test]
fn a_rolling_change_of_the_count_starved_the_instances_with_the_lower_one() {
    let server = support::RedisServer::start();
    let mut conn = server.connect();
    let keys = FlowKeys::new("t", 1);
    let high = Call {
        count: 300.0,
        avg_local: false,
        window_ms: 60_000,
        samples: 1,
        divisor: 1,
        max_lease: 10,
    };
    let low = Call {
        count: 100.0,
        ..high
    };
    // "a" still has the old count (300), "b" the new one (100): both are
    // held to the lowest, and share it (each counting against its own
    // count, "b" got nothing once the window held 100 and "a" took 200
    // more).
    let a = acquire(&mut conn, &keys, &high, 1, "a");
    let b = acquire(&mut conn, &keys, &low, 1, "b");
    assert_eq!((a.threshold, b.threshold), (300, 100));
    let mut got = [a.granted, b.granted];
    for _ in 0..10 {
        got[0] += acquire(&mut conn, &keys, &high, 1, "a").granted;
        got[1] += acquire(&mut conn, &keys, &low, 1, "b").granted;
    }
    assert_eq!(got[0] + got[1], 100, "{got:?}");
    assert!(got[1] >= 40, "the lower count's instance got {got:?}");
    // Once "b" is gone, "a"'s own count applies again.
    let _: () = redis::cmd("ZREM")
        .arg(&keys.instances)
        .arg("b")
        .query(&mut conn)
        .unwrap();
    let alone = acquire(&mut conn, &keys, &high, 1, "a");
    assert_eq!(alone.threshold, 300);
    let counts: u64 = redis::cmd("HLEN")
        .arg(&keys.counts)
        .query(&mut conn)
        .unwrap();
    assert_eq!(counts, 1, "the departed instance's count was dropped");
}

/// One call of the concurrent acquire script: (taken, in use, threshold).
#[allow(clippy::too_many_arguments)]
fn take_token(
    conn: &mut redis::Connection,
    keys: &FlowKeys,
    instance: &str,
    token: &str,
    count: f64,
    hold_ms: u64,
    offline_ms: u64,
    fallback: u64,
) -> (bool, u64, u64) {
    let reply: Vec<i64> = Scripts::new()
        .concurrent_acquire
        .key(&keys.tokens)
        .key(&keys.held)
        .key(&keys.seen)
        .key(&keys.instances)
        .key(&keys.counts)
        .arg(instance)
        .arg(token)
        .arg(1)
        .arg(count)
        .arg(0)
        .arg(hold_ms)
        .arg(offline_ms)
        .arg(3_000)
        .arg(fallback)
        .invoke(conn)
        .unwrap();
    let (grant, taken) = Grant::from_concurrent_reply(&reply, 1).unwrap();
    (taken, grant.total, grant.threshold)
}

fn give_back(conn: &mut redis::Connection, keys: &FlowKeys, instance: &str, token: &str) -> i64 {
    Scripts::new()
        .concurrent_release
        .key(&keys.tokens)
        .key(&keys.held)
        .key(&keys.seen)
        .arg(token)
        .arg(instance)
        .arg(1)
        .arg(10_000)
        .invoke(conn)
        .unwrap()
}

#[test]
fn concurrency_tokens_are_taken_up_to_the_threshold_and_given_back_once() {
    let server = support::RedisServer::start();
    let mut conn = server.connect();
    let keys = FlowKeys::new("sentinel", 9);
    let take = |conn: &mut redis::Connection, who: &str, id: u32| {
        take_token(
            conn,
            &keys,
            who,
            &format!("{who}|{id}|1"),
            3.0,
            60_000,
            60_000,
            0,
        )
    };
    assert_eq!(take(&mut conn, "a", 1), (true, 1, 3));
    assert_eq!(take(&mut conn, "b", 1), (true, 2, 3));
    assert_eq!(take(&mut conn, "a", 2), (true, 3, 3));
    assert_eq!(
        take(&mut conn, "b", 2),
        (false, 3, 3),
        "the threshold is held"
    );
    assert_eq!(give_back(&mut conn, &keys, "a", "a|1|1"), 1);
    assert_eq!(give_back(&mut conn, &keys, "a", "a|1|1"), 0, "once");
    assert_eq!(take(&mut conn, "b", 2), (true, 3, 3));
    let in_set: u64 = redis::cmd("ZCARD")
        .arg(&keys.tokens)
        .query(&mut conn)
        .unwrap();
    assert_eq!(in_set, 3, "the set holds at most the threshold");
    let ttl: i64 = redis::cmd("PTTL")
        .arg(&keys.tokens)
        .query(&mut conn)
        .unwrap();
    assert!(ttl > 0, "the keys expire");
}

#[test]
fn a_token_held_past_its_deadline_is_taken_back() {
    let server = support::RedisServer::start();
    let mut conn = server.connect();
    let keys = FlowKeys::new("sentinel", 10);
    assert!(take_token(&mut conn, &keys, "a", "a|1|1", 1.0, 100, 60_000, 0).0);
    assert!(!take_token(&mut conn, &keys, "b", "b|1|1", 1.0, 100, 60_000, 0).0);
    // The server's time: the deadline passes on its clock.
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(
        take_token(&mut conn, &keys, "b", "b|1|1", 1.0, 100, 60_000, 0),
        (true, 1, 1)
    );
    assert_eq!(give_back(&mut conn, &keys, "a", "a|1|1"), 0, "gone already");
}

#[test]
fn the_tokens_of_an_instance_unheard_for_the_offline_time_are_taken_back() {
    let server = support::RedisServer::start();
    let mut conn = server.connect();
    let keys = FlowKeys::new("sentinel", 11);
    assert!(take_token(&mut conn, &keys, "dead", "dead|1|1", 4.0, 60_000, 200, 0).0);
    assert!(take_token(&mut conn, &keys, "dead", "dead|2|1", 4.0, 60_000, 200, 0).0);
    // "live" keeps calling; "dead" is heard from no more, with a
    // fallback of one it told Redis of before.
    assert!(take_token(&mut conn, &keys, "live", "live|1|1", 4.0, 60_000, 200, 1).0);
    assert!(!take_token(&mut conn, &keys, "live", "live|2|1", 4.0, 60_000, 200, 1).0);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        take_token(&mut conn, &keys, "live", "live|2|1", 4.0, 60_000, 200, 1),
        (true, 3, 4),
        "dead's two are back: live holds two and its fallback one"
    );
    let members: Vec<String> = redis::cmd("ZRANGE")
        .arg(&keys.tokens)
        .arg(0)
        .arg(-1)
        .query(&mut conn)
        .unwrap();
    assert_eq!(members, vec!["live|1|1", "live|2|1"]);
}
