//! Loom models of the second window's parts, the folds into the minute
//! window and lifetime totals, the readers' sequence check, and the token
//! slots (`RUSTFLAGS="--cfg loom" cargo test -p sentinel-flow-core --lib --release loom`).
//!
//! A reader's value must be *explained*: the sum of one prefix of each
//! writer's adds (an add seen twice or lost gives a sum no prefixes make),
//! each prefix at least what the writer had published as completed before
//! the read began (release/acquire on a progress word of the test).
//!
//! The models by protocol file (they share this file's scenarios and
//! checks): `owned.rs`, `loom_owner_rotation_*`; `shared.rs`,
//! `loom_shared_rotation_*`; `fold.rs`, every `loom_*_reads_*`;
//! `../owner.rs` (and the takeover in `owned.rs`),
//! `loom_token_reuse_and_takeover_see_the_exited_owners_writes`.

use loom::sync::Arc;
use loom::sync::atomic::AtomicU64;
use loom::sync::atomic::Ordering::{Acquire, Release};
use loom::thread;

use super::*;
use crate::stat::bucket::LANE_PASS;
use crate::stat::owner::{is_live, returned_slots, token, token_slot};
use crate::sync::check;

/// A second window of one 1 ms slice and a minute window of 4 ms in two
/// 2 ms buckets: slices 0 and 2 share the second window's one slot, and at
/// time 2 both lie in the minute window.
fn windows() -> LiveWindows {
    let shape = |interval, samples| WindowShape::new(interval, samples).expect("valid shape");
    LiveWindows::new(shape(1, 1), shape(4, 2))
}

fn pass(w: &LiveWindows, now: u64, n: u64) {
    w.add(now, LANE_PASS / 2, n, 0, None);
}

/// Whether `value` is the sum of one prefix total per writer, each at least
/// the writer's floor.
fn explained(value: u64, writers: &[(&[u64], u64)]) -> bool {
    match writers.split_first() {
        None => value == 0,
        Some(((prefixes, floor), rest)) => prefixes
            .iter()
            .any(|&p| p >= *floor && p <= value && explained(value - p, rest)),
    }
}

/// What a writer has completed, published after each add.
#[derive(Default)]
struct Progress(AtomicU64);

impl Progress {
    fn done(&self, prefix: u64) {
        self.0.store(prefix, Release);
    }

    fn floor(&self) -> u64 {
        self.0.load(Acquire)
    }
}

/// The prefix totals of the owner-rotation writers: main (owner of the
/// first part, rotating) and B (owner of the second part).
const MAIN: &[u64] = &[1, 5];
const B_OWNER: &[u64] = &[0, 2];

/// Runs the owner-rotation scenario with `read` on a third thread: main
/// owns the first part (1 at slice 0, then 4 at slice 2, folding the 1),
/// B claims the second part (allocated then) and adds 2 at slice 0.
fn owner_rotation(read: fn(&LiveWindows, &dyn Fn() -> [(&'static [u64], u64); 2])) {
    let w = Arc::new(windows());
    let (main_done, b_done) = (Arc::new(Progress::default()), Arc::new(Progress::default()));
    pass(&w, 0, 1);
    main_done.done(1);
    let b = {
        let (w, done) = (Arc::clone(&w), Arc::clone(&b_done));
        thread::spawn(move || {
            pass(&w, 0, 2);
            done.done(2);
        })
    };
    let reader = {
        let (w, main_done, b_done) = (Arc::clone(&w), Arc::clone(&main_done), Arc::clone(&b_done));
        thread::spawn(move || {
            read(&w, &|| {
                [(MAIN, main_done.floor()), (B_OWNER, b_done.floor())]
            });
        })
    };
    // Slot 0 moves from slice 0 to slice 2: main folds its 1.
    pass(&w, 2, 4);
    main_done.done(5);
    b.join().unwrap();
    reader.join().unwrap();

    assert_eq!(w.lifetime_sums()[LANE_PASS], 7);
    assert_eq!(w.pass_less_success(), 7);
    assert_eq!(w.minute_sums(2)[LANE_PASS], 7);
    assert_eq!(
        w.folded[LANE_PASS].load(Relaxed),
        1,
        "main's slice 0 folded once"
    );
    let bucket = w.keep_minute().bucket_at(0).expect("slice 0 folded");
    assert_eq!(bucket.lane(LANE_PASS), 1);
    assert_eq!(
        w.minute_slice(0).map(|(lanes, _)| lanes[LANE_PASS]),
        Some(3)
    );
    assert_eq!(w.second_sum(2, LANE_PASS), 4);
}

/// Owner parts, lifetime totals: two reads racing an owner's rotation and
/// fold each count every pass once (none twice, none lost) and never go down.
#[test]
fn loom_owner_rotation_lifetime_reads_are_exact_and_monotonic() {
    check(1, || {
        owner_rotation(|w, floors| {
            let mut last = 0;
            for _ in 0..2 {
                let floors = floors();
                let lifetime = w.lifetime_sums()[LANE_PASS];
                assert!(
                    explained(lifetime, &floors),
                    "lifetime {lifetime} at {floors:?}"
                );
                assert!(lifetime >= last, "lifetime went down: {last} -> {lifetime}");
                last = lifetime;
            }
        });
    });
}

/// Owner parts, concurrency and minute reads: a read racing an owner's
/// rotation and fold counts every pass once, none twice, none lost.
#[test]
fn loom_owner_rotation_concurrency_and_minute_reads_are_exact() {
    check(1, || {
        owner_rotation(|w, floors| {
            let before = floors();
            let diff = w.pass_less_success() as u64;
            assert!(explained(diff, &before), "concurrency {diff} at {before:?}");
            let before = floors();
            let minute = w.minute_sums(2)[LANE_PASS];
            assert!(explained(minute, &before), "minute {minute} at {before:?}");
        });
    });
}

/// The prefix totals of the shared-part writers B (rotating) and C.
const B_SHARED: &[u64] = &[0, 1, 5];
const C_SHARED: &[u64] = &[0, 2];

/// Runs the shared-part scenario, with `read` on a last thread: both parts
/// are owned by the (live) main thread, so that B and C add through the
/// shared part; B adds 1 at slice 0 then 4 at slice 2 (rotating the shared
/// part under its try-lock), C (if `with_c`) adds 2 at slice 0.
fn shared_rotation(
    with_c: bool,
    read: Option<fn(&LiveWindows, &dyn Fn() -> [(&'static [u64], u64); 2])>,
) {
    let w = Arc::new(windows());
    let me = token();
    w.first.owner.store(me, Relaxed);
    w.second
        .get_or_init(|| Box::new(Owned::new(w.slot_count)))
        .owner
        .store(me, Relaxed);
    let (b_done, c_done) = (Arc::new(Progress::default()), Arc::new(Progress::default()));
    let b = {
        let (w, done) = (Arc::clone(&w), Arc::clone(&b_done));
        thread::spawn(move || {
            pass(&w, 0, 1);
            done.done(1);
            pass(&w, 2, 4);
            done.done(5);
        })
    };
    let c = with_c.then(|| {
        let (w, done) = (Arc::clone(&w), Arc::clone(&c_done));
        thread::spawn(move || {
            pass(&w, 0, 2);
            done.done(2);
        })
    });
    // Read last (loom runs the writers first, then explores the reads at
    // each of their stores).
    let reader = read.map(|read| {
        let (w, b_done, c_done) = (Arc::clone(&w), Arc::clone(&b_done), Arc::clone(&c_done));
        thread::spawn(move || {
            read(&w, &|| {
                [(B_SHARED, b_done.floor()), (C_SHARED, c_done.floor())]
            });
        })
    });
    b.join().unwrap();
    if let Some(c) = c {
        c.join().unwrap();
    }
    if let Some(reader) = reader {
        reader.join().unwrap();
    }
    if !with_c {
        assert_eq!(w.lifetime_sums()[LANE_PASS], 5);
        assert_eq!(w.minute_sums(2)[LANE_PASS], 5);
        assert_eq!(w.second_sum(2, LANE_PASS), 4);
        return;
    }

    assert_eq!(w.lifetime_sums()[LANE_PASS], 7);
    assert_eq!(w.pass_less_success(), 7);
    let minute = w.minute_sums(2)[LANE_PASS];
    let second = w.second_sum(2, LANE_PASS);
    let folded = w
        .keep_minute()
        .bucket_at(0)
        .map_or(0, |b| b.lane(LANE_PASS));
    // C's 2 is in slice 0 (folded), in slice 2 (added after B's check of
    // the slice and before its swap), or late (lifetime totals only).
    assert!(
        matches!((folded, second, minute), (3, 4, 7) | (1, 6, 7) | (1, 4, 5)),
        "folded {folded}, second {second}, minute {minute}"
    );
}

/// Shared part: an add racing the try-locked rotation (each word swapped
/// with zero) is counted exactly once: in the old slice, the new one or as late.
#[test]
fn loom_shared_rotation_counts_a_racing_add_once() {
    check(3, || shared_rotation(true, None));
}

/// Shared part, lifetime totals: two reads racing the shared rotation (swap
/// with zero) and its fold each count every pass once and never go down.
#[test]
fn loom_shared_rotation_lifetime_reads_are_exact_and_monotonic() {
    check(1, || {
        shared_rotation(
            false,
            Some(|w, floors| {
                let mut last = 0;
                for _ in 0..2 {
                    let floors = floors();
                    let lifetime = w.lifetime_sums()[LANE_PASS];
                    assert!(
                        explained(lifetime, &floors),
                        "lifetime {lifetime} at {floors:?}"
                    );
                    assert!(lifetime >= last, "lifetime went down: {last} -> {lifetime}");
                    last = lifetime;
                }
            }),
        );
    });
}

/// Token slots: an exited thread's token is not live and never reused, and
/// a thread that takes over its node part sees every write it made.
#[test]
fn loom_token_reuse_and_takeover_see_the_exited_owners_writes() {
    check(3, || {
        let w = Arc::new(windows());
        let a = {
            let w = Arc::clone(&w);
            thread::spawn(move || {
                let me = token();
                assert!(is_live(me));
                pass(&w, 0, 1);
                pass(&w, 0, 2);
                me
            })
        };
        let b = {
            let w = Arc::clone(&w);
            // Owns the first part if A has exited (its writes must be
            // seen: the owner's adds are a load and a store), else the
            // second.
            thread::spawn(move || {
                pass(&w, 0, 4);
                token()
            })
        };
        let (ta, tb) = (a.join().unwrap(), b.join().unwrap());
        // Loom's join returns before the thread's locals are dropped (std's
        // waits for them): wait until both slots are freed (one slot, if B
        // took A's after A exited).
        let freed = if token_slot(ta) == token_slot(tb) {
            1
        } else {
            2
        };
        while returned_slots() < freed {
            thread::yield_now();
        }
        assert_ne!(ta, tb);
        assert!(!is_live(ta) && !is_live(tb), "exited threads are not live");
        assert_eq!(w.second_sum(0, LANE_PASS), 7);
        assert_eq!(w.lifetime_sums()[LANE_PASS], 7);

        // A later thread reuses a freed slot with a new token, and takes over.
        let c = {
            let w = Arc::clone(&w);
            thread::spawn(move || {
                pass(&w, 1, 8);
                let me = token();
                assert!(is_live(me));
                assert_eq!(w.first.owner.load(Relaxed), me, "took the first part over");
                me
            })
        };
        let tc = c.join().unwrap();
        assert!(tc != ta && tc != tb, "a new token");
        assert!(
            token_slot(tc) == token_slot(ta) || token_slot(tc) == token_slot(tb),
            "a freed slot is reused"
        );
        assert!(!is_live(ta) && !is_live(tb), "old tokens stay dead");
        // C moved the slot it took over to slice 1, folding what it held.
        assert_eq!(w.second_sum(1, LANE_PASS), 8);
        assert_eq!(w.lifetime_sums()[LANE_PASS], 15);
    });
}

/// A minute window made while the owner folds (`fold.rs`, origin nodes'
/// windows made without one): the fold lands in the minute window or in
/// the lifetime totals only, never twice; lifetime totals count every pass
/// once, and the minute never holds more than was passed.
#[test]
fn loom_minute_made_during_a_fold_never_counts_a_slice_twice() {
    check(1, || {
        let shape = |interval, samples| WindowShape::new(interval, samples).expect("valid shape");
        let w = Arc::new(LiveWindows::without_minute(shape(1, 1), shape(4, 2)));
        pass(&w, 0, 1);
        let asker = {
            let w = Arc::clone(&w);
            thread::spawn(move || {
                w.keep_minute();
                let minute = w.minute_sums(2)[LANE_PASS];
                assert!(minute <= 3, "minute {minute}");
            })
        };
        // Slot 0 moves from slice 0 to slice 2: the fold of slice 0 races
        // the minute window's making.
        pass(&w, 2, 2);
        asker.join().unwrap();
        assert_eq!(w.lifetime_sums()[LANE_PASS], 3);
        let minute = w.minute_sums(2)[LANE_PASS];
        assert!(minute == 2 || minute == 3, "minute {minute}");
    });
}
