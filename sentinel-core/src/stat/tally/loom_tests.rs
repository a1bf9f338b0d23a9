//! Loom model of the block tally: per-thread counts written with plain
//! loads and stores, taken by a harvester under the shard's lock.

use std::collections::BTreeMap;

use loom::thread;

use super::*;
use crate::sync::check;

const INSTANCE: u64 = 0xF100;

fn key() -> BlockKey {
    BlockKey::new(INSTANCE, 1, BlockKind::Flow, None, 0)
}

fn block(now_ms: u64) {
    let key = key();
    count(&key, now_ms, 1, || BlockSource {
        key,
        resource: "r".into(),
        kind: BlockKind::Flow,
        rule: None,
        origin: None,
    });
}

fn harvest_into(seen: &mut BTreeMap<u64, u64>) {
    harvest(INSTANCE, |_, second, count| {
        *seen.entry(second).or_default() += count
    });
}

/// Every block is harvested exactly once, under its second, while its thread
/// moves to a new second, exits, and a new thread reuses its token slot.
#[test]
fn loom_tally_harvest_takes_every_block_once() {
    check(2, || {
        let seen = loom::sync::Arc::new(loom::sync::Mutex::new(BTreeMap::new()));
        let harvester = || {
            let seen = loom::sync::Arc::clone(&seen);
            thread::spawn(move || harvest_into(&mut seen.lock().unwrap()))
        };
        // T counts in second 10, then turns its slot to second 11 (under a
        // try-lock of the books that the harvest may hold) and exits.
        let t = thread::spawn(|| {
            block(10_100);
            block(11_000);
        });
        let h = harvester();
        t.join().unwrap();
        // U may take T's token slot and shard (if T's exit has freed it),
        // and goes on counting in T's slot of the key.
        let u = thread::spawn(|| block(11_500));
        let h2 = harvester();
        for thread in [h, u, h2] {
            thread.join().unwrap();
        }
        let mut seen = seen.lock().unwrap();
        harvest_into(&mut seen);
        assert_eq!(*seen, BTreeMap::from([(10, 1), (11, 2)]));
    });
}
