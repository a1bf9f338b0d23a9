//! The lease and its sub-leases, on one thread and under racing threads
//! against a reference count of grants, spends and refunds.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::SeqCst;

use parking_lot::Mutex;
use sentinel_flow_core::{Clock, ManualClock};

use super::owner::{self, NO_OWNER};
use super::*;

const A: u64 = 1 << 40;
const B: u64 = 2 << 40;

fn taken(take: Take) -> bool {
    matches!(take, Take::Taken { .. })
}

fn fill(lease: &Lease, granted: u64, expiry: u64) -> Refunds {
    let mut refunds = Refunds::new();
    lease.fill(granted, expiry, &mut refunds);
    refunds
}

fn drain(lease: &Lease, now_ms: u64) -> Refunds {
    let mut refunds = Refunds::new();
    lease.drain_expired(now_ms, &mut refunds);
    refunds
}

#[test]
fn takes_only_unexpired_permits() {
    let lease = Lease::new();
    assert_eq!(lease.take_as(NO_OWNER, 1, 10), Take::Empty);
    assert_eq!(fill(&lease, 3, 100), vec![]);
    assert!(taken(lease.take_as(NO_OWNER, 2, 99)));
    assert_eq!(lease.take_as(NO_OWNER, 2, 99), Take::Empty, "one left");
    assert!(taken(lease.take_as(NO_OWNER, 1, 99)));
    assert_eq!(fill(&lease, 5, 100), vec![]);
    assert_eq!(lease.held(), (5, 100));
    assert_eq!(
        lease.take_as(NO_OWNER, 1, 100),
        Take::Empty,
        "expired at 100"
    );
    assert_eq!(fill(&lease, 2, 200), vec![(5, 100)], "left for a refund");
    assert_eq!(lease.held(), (2, 200));
    lease.mark_full(300);
    assert_eq!(lease.take_as(NO_OWNER, 5, 150), Take::Full);
    assert_eq!(drain(&lease, 150), vec![]);
    assert_eq!(drain(&lease, 200), vec![(2, 200)]);
    assert_eq!(lease.held(), (0, 200));
}

#[test]
fn a_thread_spends_a_chunk_from_its_sub_lease_without_the_shared_word() {
    let lease = Lease::new();
    fill(&lease, 4_000, 100);
    assert!(taken(lease.take_as(A, 1, 10)));
    // An eighth of 4 000, at most 256: one spent, 255 parked.
    assert_eq!((lease.held().0, lease.parked()), (3_744, 255));
    for _ in 0..255 {
        assert!(taken(lease.take_as(A, 1, 10)));
    }
    assert_eq!(
        (lease.held().0, lease.parked()),
        (3_744, 0),
        "spent in the slot"
    );
    assert!(taken(lease.take_as(A, 1, 10)));
    assert_eq!((lease.held().0, lease.parked()), (3_488, 255));
}

#[test]
fn chunks_shrink_to_the_entry_s_permits_near_the_limit() {
    let lease = Lease::new();
    fill(&lease, 15, 100);
    assert!(taken(lease.take_as(A, 1, 10)));
    assert_eq!(
        (lease.held().0, lease.parked()),
        (14, 0),
        "15 / 8 = 1: exact"
    );
    fill(&lease, 2, 100);
    assert!(taken(lease.take_as(B, 3, 10)));
    assert_eq!(
        (lease.held().0, lease.parked()),
        (13, 0),
        "never below the need"
    );
}

#[test]
fn an_entry_spends_permits_parked_in_another_thread_s_sub_lease_before_it_asks() {
    let lease = Lease::new();
    fill(&lease, 24, 100);
    assert!(taken(lease.take_as(A, 1, 10)));
    assert_eq!((lease.held().0, lease.parked()), (21, 2));
    for _ in 0..21 {
        assert!(taken(lease.take_as(NO_OWNER, 1, 10)));
    }
    assert_eq!(lease.held().0, 0);
    // The shared word is empty: the two parked permits still serve.
    assert_eq!(lease.take_as(NO_OWNER, 1, 10), Take::Taken { refill: true });
    assert!(taken(lease.take_as(B, 1, 10)));
    assert_eq!(lease.parked(), 0);
    assert_eq!(lease.take_as(NO_OWNER, 1, 10), Take::Empty);
    assert_eq!(lease.take_as(A, 1, 10), Take::Empty);
}

#[test]
fn a_new_bucket_and_a_drain_take_the_sub_leases_back_for_their_own_bucket() {
    let lease = Lease::new();
    fill(&lease, 800, 100);
    assert!(taken(lease.take_as(A, 1, 10)));
    assert!(taken(lease.take_as(B, 1, 10)));
    let (held, parked) = (lease.held().0, lease.parked());
    assert_eq!(held + parked + 2, 800);
    // The next bucket's grant refunds all of the old one, slots included.
    assert_eq!(fill(&lease, 100, 200), vec![(held + parked, 100)]);
    assert_eq!(lease.parked(), 0);
    assert!(taken(lease.take_as(A, 1, 150)));
    assert_eq!(lease.parked(), 11, "100 / 8 - 1");
    // An ended lease is drained with its slots.
    assert_eq!(drain(&lease, 199), vec![]);
    assert_eq!(drain(&lease, 200), vec![(99, 200)]);
    assert_eq!((lease.held().0, lease.parked()), (0, 0));
}

#[test]
fn a_changed_rule_takes_back_every_permit_of_the_lease_and_its_slots() {
    let lease = Lease::new();
    fill(&lease, 800, 100);
    assert!(taken(lease.take_as(A, 1, 10)));
    let mut refunds = Refunds::new();
    lease.take_all(&mut refunds);
    assert_eq!(refunds, vec![(799, 100)], "unexpired, in one refund");
    assert_eq!((lease.held().0, lease.parked()), (0, 0));
    assert_eq!(lease.take_as(A, 1, 10), Take::Empty);
}

#[test]
fn a_slot_holding_another_bucket_s_permits_takes_no_chunk() {
    let lease = Lease::new();
    fill(&lease, 16, 100);
    assert!(taken(lease.take_as(A, 1, 10)));
    assert_eq!(lease.parked(), 1);
    // A same-bucket grant leaves the slot; an entry needing 2 finds 1 in
    // it, and takes exactly 2 from the shared word.
    fill(&lease, 800, 100);
    assert!(taken(lease.take_as(A, 2, 10)));
    assert_eq!(
        lease.parked(),
        1 + 814 / 8 - 2,
        "same bucket: added to the slot"
    );
    // A slot whose permits ended takes none while they wait for the
    // worker: they keep their own bucket.
    let lease = Lease::new();
    fill(&lease, 16, 100);
    assert!(taken(lease.take_as(A, 1, 10)));
    lease.word.store((300 << PERMIT_BITS) | 800, SeqCst);
    assert!(taken(lease.take_as(A, 1, 150)));
    assert_eq!((lease.held().0, lease.parked()), (799, 1));
    assert_eq!(drain(&lease, 150), vec![(1, 100)]);
}

#[test]
fn a_slot_whose_owner_exited_is_taken_over() {
    let lease = Arc::new(Lease::new());
    fill(&lease, 8_000, 100);
    let barrier = std::sync::Barrier::new(5);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                assert!(taken(lease.take(1, 10)));
                barrier.wait();
                barrier.wait();
            });
        }
        barrier.wait();
        // Every slot has a live owner: this thread spends from the shared
        // word.
        let parked = lease.parked();
        assert!(taken(lease.take(1, 10)));
        assert_eq!(lease.parked(), parked);
        barrier.wait();
    });
    let parked = lease.parked();
    assert!(taken(lease.take(1, 10)));
    assert_eq!(lease.parked(), parked + 255, "a slot of an exited thread");
    assert!(owner::is_live(owner::token()));
}

#[test]
fn threads_never_spend_more_than_granted() {
    let lease = Arc::new(Lease::new());
    fill(&lease, 10_000, u64::MAX >> PERMIT_BITS);
    let spent: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..6)
            .map(|_| {
                let lease = &lease;
                s.spawn(move || (0..5_000).filter(|_| taken(lease.take(1, 1))).count() as u64)
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(spent, 10_000);
    assert_eq!((lease.held().0, lease.parked()), (0, 0));
}

/// What the reference model counts, per bucket of 100 ms (bucket `k` ends,
/// and its permits expire, at `(k + 1) * 100`).
#[derive(Debug, Default)]
struct Reference {
    granted: Vec<u64>,
    refunded: Vec<u64>,
    /// Spent by entries whose take began and ended in the bucket.
    spent: Vec<u64>,
    /// Spent by entries whose take straddled a bucket's edge.
    straddling: u64,
}

impl Reference {
    fn at(counts: &mut Vec<u64>, bucket: usize) -> &mut u64 {
        if counts.len() <= bucket {
            counts.resize(bucket + 1, 0);
        }
        &mut counts[bucket]
    }

    fn refund(&mut self, refunds: Refunds) {
        for (permits, expiry) in refunds {
            *Self::at(&mut self.refunded, (expiry / 100 - 1) as usize) += permits;
        }
    }
}

/// Six threads (four with sub-leases, two without) spend 1 to 3 permits
/// at a time while a worker moves the clock bucket by bucket, drains the
/// ended lease, grants each bucket's permits in two fills, and marks some
/// buckets full. A mutex-protected reference counts every grant, spend and
/// refund: each bucket's spends never exceed its grants, and once drained
/// every permit granted was spent or refunded, exactly.
#[test]
fn sub_leases_keep_every_bucket_within_its_grants_against_a_reference() {
    let lease = Arc::new(Lease::new());
    let clock = ManualClock::new(0);
    let reference = Mutex::new(Reference::default());
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        for t in 0..6u64 {
            let (lease, clock, reference, stop) = (&lease, &clock, &reference, &stop);
            s.spawn(move || {
                let mut i = t;
                while !stop.load(SeqCst) {
                    i += 1;
                    let n = (i % 3 + 1) as u32;
                    let before = clock.now_ms();
                    let take = match t {
                        0 | 1 => lease.take_as(NO_OWNER, n, before),
                        _ => lease.take(n, before),
                    };
                    let after = clock.now_ms();
                    if taken(take) {
                        let mut reference = reference.lock();
                        if before / 100 == after / 100 {
                            let bucket = (before / 100) as usize;
                            *Reference::at(&mut reference.spent, bucket) += u64::from(n);
                        } else {
                            reference.straddling += u64::from(n);
                        }
                    }
                }
            });
        }
        for bucket in 0..300u64 {
            let start = bucket * 100;
            clock.set(start);
            // Entries at the bucket's first instant, before the drain, find
            // the ended bucket's permits still parked: none may be spent.
            for _ in 0..20 {
                std::thread::yield_now();
            }
            let mut refunds = Refunds::new();
            lease.drain_expired(start, &mut refunds);
            let expiry = start + 100;
            let granted = [40 + bucket * 37 % 400, bucket * 13 % 90];
            lease.fill(granted[0], expiry, &mut refunds);
            reference.lock().refund(refunds);
            *Reference::at(&mut reference.lock().granted, bucket as usize) += granted[0];
            for step in 1..10 {
                std::thread::yield_now();
                clock.set(start + step * 10);
                if step == 5 {
                    let mut refunds = Refunds::new();
                    lease.fill(granted[1], expiry, &mut refunds);
                    reference.lock().refund(refunds);
                    *Reference::at(&mut reference.lock().granted, bucket as usize) += granted[1];
                } else if step == 7 && bucket % 5 == 0 {
                    lease.mark_full(expiry);
                }
            }
        }
        stop.store(true, SeqCst);
    });
    let mut refunds = Refunds::new();
    lease.drain_expired(u64::MAX >> PERMIT_BITS, &mut refunds);
    let mut reference = reference.into_inner();
    reference.refund(refunds);
    assert_eq!((lease.held().0, lease.parked()), (0, 0));
    let total = |v: &Vec<u64>| v.iter().sum::<u64>();
    let spent = total(&reference.spent) + reference.straddling;
    assert_eq!(
        spent + total(&reference.refunded),
        total(&reference.granted),
        "every permit spent or refunded once: {reference:?}"
    );
    assert!(spent > 0);
    for (bucket, &granted) in reference.granted.iter().enumerate() {
        let spent = reference.spent.get(bucket).copied().unwrap_or(0);
        let refunded = reference.refunded.get(bucket).copied().unwrap_or(0);
        assert!(
            spent + refunded <= granted,
            "bucket {bucket}: spent {spent} + refunded {refunded} > granted {granted}"
        );
    }
}
