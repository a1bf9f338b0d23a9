//! Loom models of the lease word (`--cfg sentinel_loom`: under `--cfg
//! loom` tokio, which redis needs, compiles its network types out):
//!
//! ```sh
//! RUSTFLAGS="--cfg sentinel_loom" CARGO_TARGET_DIR=target/loom-cluster cargo test -p sentinel-flow-cluster --lib --release loom
//! ```
//!
//! The property every model states: a permit Redis granted is spent by
//! exactly one entry, or handed back for a refund exactly once, or still
//! held; never two of these, never lost, and never spent once its bucket
//! has ended.

use loom::sync::Arc;
use loom::thread;

use super::{Lease, Take};

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

/// Two entries spend while the worker puts the next bucket's permits in
/// place: what the old lease still held comes back for a refund, and
/// granted = spent + refunded + held.
#[test]
fn loom_entries_racing_a_refill_spend_or_refund_each_permit_once() {
    model(|| {
        let lease = Arc::new(Lease::new());
        assert_eq!(lease.fill(2, 100), None);
        let entries: Vec<_> = (0..2)
            .map(|_| {
                let lease = Arc::clone(&lease);
                thread::spawn(move || taken(lease.take(1, 50)))
            })
            .collect();
        let worker = {
            let lease = Arc::clone(&lease);
            thread::spawn(move || lease.fill(3, 200))
        };
        let spent: u64 = entries.into_iter().map(|e| e.join().unwrap()).sum();
        let refunded = worker.join().unwrap();
        let (held, expiry) = lease.held();
        assert_eq!(expiry, 200);
        // Both entries always find a permit: 2 old or 3 new.
        assert_eq!(spent, 2);
        let refunded_permits = refunded.map_or(0, |(left, old_expiry)| {
            assert_eq!(old_expiry, 100, "a refund names the old bucket");
            left
        });
        assert_eq!(spent + refunded_permits + held, 2 + 3);
    });
}

/// A refill of the same bucket adds to what is left, racing entries:
/// nothing is refunded and nothing is spent twice.
#[test]
fn loom_a_refill_of_the_same_bucket_adds_to_what_is_left() {
    model(|| {
        let lease = Arc::new(Lease::new());
        lease.fill(1, 100);
        let entries: Vec<_> = (0..2)
            .map(|_| {
                let lease = Arc::clone(&lease);
                thread::spawn(move || taken(lease.take(1, 50)))
            })
            .collect();
        let worker = {
            let lease = Arc::clone(&lease);
            thread::spawn(move || lease.fill(1, 100))
        };
        let spent: u64 = entries.into_iter().map(|e| e.join().unwrap()).sum();
        assert_eq!(worker.join().unwrap(), None);
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
        lease.fill(2, 100);
        let last_instant = {
            let lease = Arc::clone(&lease);
            thread::spawn(move || taken(lease.take(1, 99)))
        };
        let late = {
            let lease = Arc::clone(&lease);
            thread::spawn(move || lease.take(1, 100))
        };
        let drained = lease.drain_expired(100);
        let spent = last_instant.join().unwrap();
        assert_eq!(late.join().unwrap(), Take::Empty, "past its bucket");
        let (held, expiry) = lease.held();
        assert_eq!(expiry, 100);
        let drained = drained.map_or(0, |(left, _)| left);
        assert_eq!(spent + drained + held, 2);
        // The worker drains again on its next round: nothing is left then.
        let again = lease.drain_expired(100).map_or(0, |(left, _)| left);
        assert_eq!(spent + drained + again, 2);
        assert_eq!(lease.held().0, 0);
    });
}
