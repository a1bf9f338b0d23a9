//! The hot-parameter script's semantics against a real server (its time
//! is the server's, so windows are crossed by sleeping past them).

use std::time::Duration;

use super::support;
use super::*;

/// A call's settings: window, samples, avg_local, cap.
#[derive(Clone, Copy)]
struct Settings {
    window_ms: u64,
    samples: u32,
    avg_local: bool,
    cap: u32,
}

const SECOND: Settings = Settings {
    window_ms: 1_000,
    samples: 10,
    avg_local: false,
    cap: 100,
};

/// `{verdict, instances, tracked, now}` for `values` (field, threshold,
/// permits).
fn count(
    conn: &mut redis::Connection,
    keys: &ParamKeys,
    settings: Settings,
    instance: &str,
    force: bool,
    values: &[(&str, u64, u64)],
) -> Vec<i64> {
    let scripts = Scripts::new();
    let mut invocation = scripts.param_acquire.prepare_invoke();
    invocation
        .key(&keys.counts)
        .key(&keys.recent)
        .key(&keys.instances)
        .arg(instance)
        .arg(3_000)
        .arg(settings.window_ms)
        .arg(settings.samples)
        .arg(u8::from(settings.avg_local))
        .arg(settings.cap)
        .arg(u8::from(force));
    for (field, threshold, permits) in values {
        invocation.arg(*field).arg(*threshold).arg(*permits);
    }
    invocation.invoke(conn).unwrap()
}

fn verdict(
    conn: &mut redis::Connection,
    keys: &ParamKeys,
    settings: Settings,
    values: &[(&str, u64, u64)],
) -> i64 {
    count(conn, keys, settings, "a", false, values)[0]
}

#[test]
fn each_value_is_counted_up_to_its_threshold_and_an_entry_all_or_none() {
    let server = support::RedisServer::start();
    let mut conn = server.connect();
    let keys = ParamKeys::new("sentinel", 5);
    for _ in 0..3 {
        assert_eq!(verdict(&mut conn, &keys, SECOND, &[("s:a", 3, 1)]), 1);
    }
    assert_eq!(verdict(&mut conn, &keys, SECOND, &[("s:a", 3, 1)]), 0);
    // Another value has its own count; a batch takes several permits.
    assert_eq!(verdict(&mut conn, &keys, SECOND, &[("s:b", 3, 3)]), 1);
    assert_eq!(verdict(&mut conn, &keys, SECOND, &[("s:b", 3, 1)]), 0);
    // A value with a higher threshold (an item) beside one at its own:
    // refused, and the first not counted.
    assert_eq!(
        verdict(&mut conn, &keys, SECOND, &[("s:vip", 50, 1), ("s:a", 3, 1)]),
        0
    );
    let [_, _, tracked, _] = count(&mut conn, &keys, SECOND, "a", false, &[])[..] else {
        panic!("four numbers");
    };
    assert_eq!(tracked, 2, "s:vip was not tracked");
    // A threshold of 0 refuses every entry.
    assert_eq!(verdict(&mut conn, &keys, SECOND, &[("s:z", 0, 1)]), 0);
}

#[test]
fn an_avg_local_threshold_is_per_live_instance() {
    let server = support::RedisServer::start();
    let mut conn = server.connect();
    let keys = ParamKeys::new("sentinel", 6);
    let avg = Settings {
        avg_local: true,
        ..SECOND
    };
    count(&mut conn, &keys, avg, "b", false, &[]);
    let admitted = (0..10)
        .filter(|_| count(&mut conn, &keys, avg, "a", false, &[("i:7", 2, 1)])[0] == 1)
        .count();
    assert_eq!(admitted, 4, "2 per instance, two instances");
}

#[test]
fn the_window_slides_and_values_it_no_longer_counts_are_forgotten() {
    let server = support::RedisServer::start();
    let mut conn = server.connect();
    let keys = ParamKeys::new("sentinel", 7);
    let short = Settings {
        window_ms: 300,
        samples: 3,
        avg_local: false,
        cap: 2,
    };
    assert_eq!(verdict(&mut conn, &keys, short, &[("s:a", 1, 1)]), 1);
    assert_eq!(verdict(&mut conn, &keys, short, &[("s:b", 1, 1)]), 1);
    // The cap: a third value is not tracked, nor counted.
    assert_eq!(verdict(&mut conn, &keys, short, &[("s:c", 1, 1)]), 2);
    // Force: counted where tracked, a new value past the cap still not.
    let forced = count(
        &mut conn,
        &keys,
        short,
        "a",
        true,
        &[("s:a", 1, 1), ("s:c", 1, 1)],
    );
    assert_eq!(forced[2], 2);
    let held: String = redis::cmd("HGET")
        .arg(&keys.counts)
        .arg("s:a")
        .query(&mut conn)
        .unwrap();
    let total: u64 = held
        .split(',')
        .map(|pair| pair.split(':').nth(1).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, 2, "{held}");
    // Keys live a window and a bucket past their last write.
    let pttl: i64 = redis::cmd("PTTL")
        .arg(&keys.recent)
        .query(&mut conn)
        .unwrap();
    assert!((1..=400).contains(&pttl), "{pttl}");
    // A window later, both are forgotten: room for new values.
    std::thread::sleep(Duration::from_millis(450));
    assert_eq!(verdict(&mut conn, &keys, short, &[("s:c", 1, 1)]), 1);
    assert_eq!(verdict(&mut conn, &keys, short, &[("s:a", 1, 1)]), 1);
    let [_, _, tracked, _] = count(&mut conn, &keys, short, "a", false, &[])[..] else {
        panic!("four numbers");
    };
    assert_eq!(tracked, 2);
    let fields: i64 = redis::cmd("HLEN")
        .arg(&keys.counts)
        .query(&mut conn)
        .unwrap();
    assert_eq!(fields, 2, "the hash forgets what the set forgets");
}

#[test]
fn the_param_keys_share_the_flow_id_s_slot_and_not_a_flow_rule_s_keys() {
    let keys = ParamKeys::new("sentinel", 42);
    let flow = FlowKeys::new("sentinel", 42);
    let named = [&keys.counts, &keys.recent, &keys.instances];
    for key in named {
        assert!(key.starts_with("{sentinel:flow:42}:param:"), "{key}");
    }
    assert_ne!(keys.instances, flow.instances);
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
    // The cluster takes a moment to see its slots.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let scripts = Scripts::new();
        let reply: redis::RedisResult<Vec<i64>> = scripts
            .param_acquire
            .key(&keys.counts)
            .key(&keys.recent)
            .key(&keys.instances)
            .arg("a")
            .arg(3_000)
            .arg(1_000)
            .arg(10)
            .arg(0)
            .arg(100)
            .arg(0)
            .arg("s:a")
            .arg(5)
            .arg(1)
            .invoke(&mut conn);
        match reply {
            Ok(reply) => {
                assert_eq!(reply[0], 1);
                break;
            }
            Err(_) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => panic!("{e}"),
        }
    }
}
