//! Unit tests of the live windows: ownership and takeover, the shared
//! parts, folds into the minute window and lifetime totals, late events,
//! and threads racing rotations. The loom models are in `loom_tests.rs`.

use crate::sync::atomic::Ordering::Relaxed;
use crate::sync::atomic::{AtomicBool, AtomicU64};

use super::LANES;
use super::LiveWindows;
use crate::stat::bucket::{LANE_PASS, LANE_SUCCESS};
use crate::stat::owner::{is_live, token};
use crate::stat::shape::WindowShape;

const T0: u64 = 1_700_000_000_000;

fn windows() -> LiveWindows {
    LiveWindows::new(WindowShape::SECOND, WindowShape::MINUTE)
}

fn pass(w: &LiveWindows, now: u64, n: u64) {
    w.add(now, LANE_PASS / 2, n, 0, None);
}

#[test]
fn a_node_whose_owner_exited_is_taken_over() {
    let w = std::sync::Arc::new(windows());
    let theirs = std::sync::Arc::clone(&w);
    // `join` waits for the OS thread, so its thread-locals are gone (a
    // scoped thread's end is signalled before they are).
    std::thread::spawn(move || pass(&theirs, T0, 2))
        .join()
        .unwrap();
    let first = w.first.owner.load(Relaxed);
    assert_ne!(first, 0);
    assert!(!is_live(first), "the thread has exited");
    pass(&w, T0 + 1, 3);
    assert_eq!(w.first.owner.load(Relaxed), token());
    assert_ne!(
        w.first.owner.load(Relaxed),
        first,
        "tokens are never reused"
    );
    assert_eq!(w.second_sum(T0 + 1, LANE_PASS), 5);
}

#[test]
fn owner_and_other_threads_add_up() {
    let w = windows();
    pass(&w, T0, 2);
    std::thread::scope(|s| {
        s.spawn(|| pass(&w, T0 + 1, 5));
    });
    assert_ne!(w.first.owner.load(Relaxed), 0);
    assert_eq!(w.second_sum(T0 + 2, LANE_PASS), 7);
    assert_eq!(w.minute_sums(T0 + 2)[LANE_PASS], 7);
    assert_eq!(w.pass_less_success(), 7);
}

#[test]
fn a_second_thread_owns_the_second_part_and_a_third_shares() {
    let w = windows();
    pass(&w, T0, 1);
    let barrier = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(|| {
            pass(&w, T0 + 1, 2);
            let second = w.second.get().expect("allocated by the second writer");
            assert_eq!(second.owner.load(Relaxed), token());
            // A third thread, while both owners live, shares.
            std::thread::scope(|s| {
                s.spawn(|| {
                    pass(&w, T0 + 2, 4);
                    barrier.wait();
                });
                barrier.wait();
            });
            pass(&w, T0 + 3, 8);
        });
    });
    assert_eq!(w.first.owner.load(Relaxed), token());
    assert!(w.shared.get().is_some(), "the third thread wrote shared");
    assert_eq!(w.second_sum(T0 + 3, LANE_PASS), 15);
    assert_eq!(w.minute_sums(T0 + 3)[LANE_PASS], 15);
    assert_eq!(w.pass_less_success(), 15);
    // Each part rotates on its own and folds exactly once.
    pass(&w, T0 + 1_000, 1);
    assert_eq!(w.second_sum(T0 + 1_000, LANE_PASS), 1, "a new second");
    assert_eq!(w.minute_sums(T0 + 1_000)[LANE_PASS], 16);
}

#[test]
fn rotation_folds_into_the_minute_and_keeps_lifetime_totals() {
    let w = std::sync::Arc::new(windows());
    // In a thread joined to its end (thread-locals gone, unlike a scoped
    // thread's), so that the next thread can take its part over.
    let in_thread = |now, n| {
        let w = std::sync::Arc::clone(&w);
        std::thread::spawn(move || pass(&w, now, n)).join().unwrap();
    };
    pass(&w, T0, 3);
    in_thread(T0 + 10, 4);
    // Both parts of the slot rotate one second later.
    pass(&w, T0 + 1_000, 1);
    in_thread(T0 + 1_010, 1);
    assert!(w.shared.get().is_none(), "two owned parts, no shared one");
    assert_eq!(w.second_sum(T0 + 1_010, LANE_PASS), 2);
    let bucket = w.keep_minute().bucket_at(T0).expect("folded");
    assert_eq!(bucket.lane(LANE_PASS), 7);
    assert_eq!(w.minute_sums(T0 + 1_010)[LANE_PASS], 9);
    assert_eq!(w.minute_slice(T0).map(|(l, _)| l[LANE_PASS]), Some(7));
    assert_eq!(
        w.minute_slice(T0 + 1_000).map(|(l, _)| l[LANE_PASS]),
        Some(2)
    );
    assert_eq!(w.pass_less_success(), 9);
    assert_eq!(w.folded[LANE_PASS].load(Relaxed), 7, "folded once");
    assert_eq!(w.lifetime_sums()[LANE_PASS], 9);
    // Two minutes on, the minute window has forgotten; lifetime has not.
    pass(&w, T0 + 121_000, 1);
    assert_eq!(w.minute_sums(T0 + 121_000)[LANE_PASS], 1);
    assert_eq!(w.lifetime_sums()[LANE_PASS], 10);
}

#[test]
fn lifetime_totals_fold_every_lane_once() {
    let w = windows();
    let mut expected = [0u64; LANES];
    // Each slice of both slots, for three minutes, rotated by the owner.
    for i in 0..360u64 {
        let now = T0 + i * 500 + i % 7;
        pass(&w, now, 1);
        w.add(now, LANE_PASS / 2, 0, 2, None); // block
        w.add(now, 1, i % 3, 1, None); // exception, occupied pass
        w.add(now, LANE_SUCCESS / 2, 1, i % 11, Some(1));
        for (lane, v) in [1, 2, i % 3, 1, 1, i % 11].into_iter().enumerate() {
            expected[lane] += v;
        }
        assert_eq!(w.lifetime_sums(), expected, "at slice {i}");
    }
    let folded: Vec<u64> = w.folded.iter().map(|f| f.load(Relaxed)).collect();
    assert!(folded.iter().zip(expected).all(|(&f, e)| f < e && f > 0));
}

#[test]
fn late_events_count_only_in_lifetime_totals() {
    let w = windows();
    pass(&w, T0 + 1_000, 1);
    // Same slot, one second earlier: older than the slot's slice.
    pass(&w, T0, 5);
    w.add(T0, LANE_PASS / 2, 0, 3, None); // blocks
    w.add(T0 + 1, LANE_SUCCESS / 2, 2, 40, Some(20));
    assert_eq!(w.second_sum(T0 + 1_000, LANE_PASS), 1);
    assert_eq!(w.minute_sums(T0 + 1_000)[LANE_PASS], 1);
    assert_eq!(w.pass_less_success(), 4);
    assert_eq!(w.lifetime_sums(), [6, 3, 0, 0, 2, 40]);
    // The same through the shared part (another thread).
    std::thread::scope(|s| {
        s.spawn(|| {
            pass(&w, T0 + 1_001, 1);
            w.add(T0 + 2, LANE_PASS / 2, 4, 5, None);
        });
    });
    assert_eq!(w.lifetime_sums(), [11, 8, 0, 0, 2, 40]);
}

#[test]
fn overflowing_owner_lane_moves_to_the_shared_part() {
    let w = windows();
    pass(&w, T0, u64::from(u32::MAX));
    pass(&w, T0, 10);
    assert_eq!(w.second_sum(T0, LANE_PASS), u64::from(u32::MAX) + 10);
}

#[test]
fn four_threads_in_one_slice_lose_nothing() {
    let w = windows();
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let w = &w;
            s.spawn(move || {
                for i in 0..20_000u64 {
                    let now = T0 + (i + t) % 400;
                    pass(w, now, 1);
                    w.add(now, LANE_SUCCESS / 2, 1, 3, Some(3));
                }
            });
        }
    });
    assert_eq!(w.pass_less_success(), 0);
    let sums = w.minute_sums(T0 + 999);
    assert_eq!(sums[LANE_PASS], 80_000);
    assert_eq!(sums[LANE_SUCCESS], 80_000);
    assert_eq!(sums[LANE_SUCCESS + 1], 240_000);
    assert_eq!(w.second_min_rt(T0 + 999), Some(3));
}

#[test]
fn four_threads_across_rotations_keep_concurrency_exact() {
    // Threads read a shared clock that moves 1 ms every 20 events, so
    // slices rotate under them (both parts, by owner and by others) while
    // a reader sums across folds; every pass is matched by a completion,
    // so concurrency must end at exactly 0.
    let w = windows();
    let clock = AtomicU64::new(T0);
    let done = AtomicBool::new(false);
    // The reader is running before any writer starts (on a busy machine
    // it could otherwise be scheduled only after they end).
    let start = std::sync::Barrier::new(5);
    std::thread::scope(|s| {
        let reader = s.spawn(|| {
            start.wait();
            while !done.load(Relaxed) {
                std::hint::black_box(w.pass_less_success());
                std::hint::black_box(w.minute_sums(clock.load(Relaxed)));
            }
        });
        let writers: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    for i in 0..20_000u64 {
                        let now = if i % 20 == 0 {
                            clock.fetch_add(1, Relaxed) + 1
                        } else {
                            clock.load(Relaxed)
                        };
                        pass(&w, now, 1);
                        w.add(clock.load(Relaxed), LANE_SUCCESS / 2, 1, 3, Some(3));
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        done.store(true, Relaxed);
        reader.join().unwrap();
    });
    assert_eq!(w.pass_less_success(), 0);
}

#[test]
fn four_threads_across_rotations_keep_lifetime_totals_exact_and_monotonic() {
    // As above, with the clock moving 20 ms every 20 events (80 s in all,
    // 160 slices, past the minute window) and one event in seven
    // stamped a second early (late once its slot has rotated). Readers
    // race the folds: no lane may ever go down between two reads, and
    // the end totals are exact.
    const PER_THREAD: u64 = 20_000;
    let w = windows();
    let clock = AtomicU64::new(T0 + 1_000);
    let done = AtomicBool::new(false);
    let start = std::sync::Barrier::new(6);
    let check_monotonic = || {
        start.wait();
        let mut last = [0u64; LANES];
        while !done.load(Relaxed) {
            let sums = w.lifetime_sums();
            for lane in 0..LANES {
                assert!(
                    sums[lane] >= last[lane],
                    "lane {lane} went down: {} -> {}",
                    last[lane],
                    sums[lane]
                );
            }
            last = sums;
        }
    };
    std::thread::scope(|s| {
        let readers: Vec<_> = (0..2).map(|_| s.spawn(check_monotonic)).collect();
        let writers: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    for i in 0..PER_THREAD {
                        let mut now = if i % 20 == 0 {
                            clock.fetch_add(20, Relaxed) + 20
                        } else {
                            clock.load(Relaxed)
                        };
                        if i % 7 == 0 {
                            now -= 1_000;
                        }
                        pass(&w, now, 1);
                        w.add(now, LANE_PASS / 2, 0, 2, None);
                        w.add(clock.load(Relaxed), LANE_SUCCESS / 2, 1, 3, Some(3));
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        done.store(true, Relaxed);
        for reader in readers {
            reader.join().unwrap();
        }
    });
    let n = 4 * PER_THREAD;
    assert_eq!(w.lifetime_sums(), [n, 2 * n, 0, 0, n, 3 * n]);
    assert_eq!(w.pass_less_success(), 0);
}
