//! Loom models of the lease word (`--cfg sentinel_loom`: under `--cfg
//! loom` tokio, which redis needs, compiles its network types out):
//!
//! ```sh
//! RUSTFLAGS="--cfg sentinel_loom" CARGO_TARGET_DIR=target/loom-cluster cargo test -p sentinel-flow-cluster --lib --release loom
//! ```
//!
//! The property every model states: a permit Redis granted is spent by
//! exactly one entry, or handed back for a refund exactly once, or still
//! held (in the shared word or a thread's sub-lease); never two of these,
//! never lost, and never spent once its bucket has ended. The models name
//! their threads' tokens (`take_as`); the ones of the shared word alone
//! take as a thread without a slot.

use loom::sync::Arc;
use loom::thread;

use super::owner::NO_OWNER;
use super::{Lease, Refunds, Take};

/// Every interleaving with at most three preemptions (`LOOM_MAX_PREEMPTIONS`
/// sets another bound): three threads in compare-and-swap loops are too
/// many for an unbounded search.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}

fn taken(take: Take) -> u64 {
    u64::from(matches!(take, Take::Taken { .. }))
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

/// The permits of `refunds`, each checked to name one of `expiries`.
fn refunded(refunds: &Refunds, expiries: &[u64]) -> u64 {
    refunds
        .iter()
        .map(|&(permits, expiry)| {
            assert!(expiries.contains(&expiry), "a refund names its bucket");
            permits
        })
        .sum()
}

/// Two entries spend while the worker puts the next bucket's permits in
/// place: what the old lease still held comes back for a refund, and
/// granted = spent + refunded + held.
#[test]
fn loom_entries_racing_a_refill_spend_or_refund_each_permit_once() {
    model(|| {
        let lease = Arc::new(Lease::new());
        assert_eq!(fill(&lease, 2, 100), vec![]);
        let entries: Vec<_> = (0..2)
            .map(|_| {
                let lease = Arc::clone(&lease);
                thread::spawn(move || taken(lease.take_as(NO_OWNER, 1, 50)))
            })
            .collect();
        let worker = {
            let lease = Arc::clone(&lease);
            thread::spawn(move || fill(&lease, 3, 200))
        };
        let spent: u64 = entries.into_iter().map(|e| e.join().unwrap()).sum();
        let refunds = worker.join().unwrap();
        let (held, expiry) = lease.held();
        assert_eq!(expiry, 200);
        // Both entries always find a permit: 2 old or 3 new.
        assert_eq!(spent, 2);
        let refunded_permits = refunded(&refunds, &[100]);
        assert_eq!(spent + refunded_permits + held, 2 + 3);
    });
}

/// A refill of the same bucket adds to what is left, racing entries:
/// nothing is refunded and nothing is spent twice.
#[test]
fn loom_a_refill_of_the_same_bucket_adds_to_what_is_left() {
    model(|| {
        let lease = Arc::new(Lease::new());
        fill(&lease, 1, 100);
        let entries: Vec<_> = (0..2)
            .map(|_| {
                let lease = Arc::clone(&lease);
                thread::spawn(move || taken(lease.take_as(NO_OWNER, 1, 50)))
            })
            .collect();
        let worker = {
            let lease = Arc::clone(&lease);
            thread::spawn(move || fill(&lease, 1, 100))
        };
        let spent: u64 = entries.into_iter().map(|e| e.join().unwrap()).sum();
        assert_eq!(worker.join().unwrap(), vec![]);
        let (held, _) = lease.held();
        assert_eq!(spent + held, 2);
    });
}

/// An entry at the bucket's last instant races the worker draining the
/// ended lease: each permit is spent or drained, once; an entry whose
/// clock is past the bucket never spends from it.
#[test]
fn loom_draining_an_ended_lease_races_late_and_last_instant_entries() {
    model(|| {
        let lease = Arc::new(Lease::new());
        fill(&lease, 2, 100);
        let last_instant = {
            let lease = Arc::clone(&lease);
            thread::spawn(move || taken(lease.take_as(NO_OWNER, 1, 99)))
        };
        let late = {
            let lease = Arc::clone(&lease);
            thread::spawn(move || lease.take_as(NO_OWNER, 1, 100))
        };
        let drained = drain(&lease, 100);
        let spent = last_instant.join().unwrap();
        assert_eq!(late.join().unwrap(), Take::Empty, "past its bucket");
        let (held, expiry) = lease.held();
        assert_eq!(expiry, 100);
        let drained = refunded(&drained, &[100]);
        assert_eq!(spent + drained + held, 2);
        // The worker drains again on its next round: nothing is left then.
        let again = refunded(&drain(&lease, 100), &[100]);
        assert_eq!(spent + drained + again, 2);
        assert_eq!(lease.held().0, 0);
    });
}

/// Two threads with sub-leases each spend twice (the first take claims a
/// slot and parks a chunk of an eighth of 16) while the worker puts the
/// next bucket's 4 permits in place, taking back what the slots hold of
/// the old one: every entry finds a permit (of the old bucket or the new),
/// each refund names its bucket, and granted = spent + refunded + held in
/// the word and the slots.
#[test]
fn loom_sub_leases_racing_a_new_bucket_spend_or_refund_each_permit_once() {
    model(|| {
        let lease = Arc::new(Lease::new());
        fill(&lease, 16, 100);
        let entries: Vec<_> = (1..=2u64)
            .map(|me| {
                let lease = Arc::clone(&lease);
                thread::spawn(move || (0..2).map(|_| taken(lease.take_as(me, 1, 50))).sum::<u64>())
            })
            .collect();
        let worker = {
            let lease = Arc::clone(&lease);
            thread::spawn(move || fill(&lease, 4, 200))
        };
        let spent: u64 = entries.into_iter().map(|e| e.join().unwrap()).sum();
        let refunds = worker.join().unwrap();
        assert_eq!(spent, 4);
        let refunded = refunded(&refunds, &[100]);
        let held = lease.held().0 + lease.parked();
        assert_eq!(spent + refunded + held, 16 + 4);
        // Past both buckets the worker drains everything, each to its own.
        let drained = refunded_of(&drain(&lease, 200));
        assert_eq!(spent + refunded + drained, 16 + 4);
        assert_eq!((lease.held().0, lease.parked()), (0, 0));
    });
}

fn refunded_of(refunds: &Refunds) -> u64 {
    refunded(refunds, &[100, 200])
}

/// A thread with a sub-lease spends at the bucket's last instant (taking a
/// chunk into its slot) while a thread without one finds the shared word
/// empty and spends from the slot, and the worker drains the ended lease:
/// no permit is spent twice or lost, the drain takes what a late chunk
/// parked on its next round, and no entry spends past the bucket's end.
#[test]
fn loom_a_parked_chunk_races_a_thief_and_the_drain_of_its_ended_bucket() {
    model(|| {
        let lease = Arc::new(Lease::new());
        fill(&lease, 16, 100);
        let owner = {
            let lease = Arc::clone(&lease);
            thread::spawn(move || taken(lease.take_as(1, 1, 99)))
        };
        let thief = {
            let lease = Arc::clone(&lease);
            thread::spawn(move || {
                // Leaves the shared word empty (16 - 2 for the owner's
                // chunk, or all 16), then spends wherever a permit is left.
                let mut spent = 0;
                for n in [14, 1] {
                    spent += u64::from(n) * taken(lease.take_as(NO_OWNER, n, 99));
                }
                spent
            })
        };
        let late = {
            let lease = Arc::clone(&lease);
            thread::spawn(move || lease.take_as(2, 1, 100))
        };
        let drained = refunded(&drain(&lease, 100), &[100]);
        let spent = owner.join().unwrap() + thief.join().unwrap();
        assert!(
            !matches!(late.join().unwrap(), Take::Taken { .. }),
            "past its bucket"
        );
        let held = lease.held().0 + lease.parked();
        assert_eq!(spent + drained + held, 16);
        let again = refunded(&drain(&lease, 100), &[100]);
        assert_eq!(spent + drained + again, 16);
        assert_eq!((lease.held().0, lease.parked()), (0, 0));
    });
}
