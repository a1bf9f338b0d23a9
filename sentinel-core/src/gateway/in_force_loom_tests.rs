//! Loom model of the memo behind [`GatewayInForce::is_current`]
//! (`RUSTFLAGS="--cfg loom" cargo test -p sentinel-flow-core --lib
//! --release loom_gateway_memo`).
//!
//! The instance's rule set is one atomic holding which gateway rules it
//! has (the `Arc` a set's gateway part points to), and its version
//! another, stored as a load stores them (`update_rules`: the set, then
//! the version with `Release`). A loader loads another kind (the gateway
//! part unchanged, a new version) and then the gateway kind, while two
//! readers ask [`current_at`] about a plan made from the first gateway
//! rules, as a layer does per request.
//!
//! [`GatewayInForce::is_current`]: super::GatewayInForce::is_current

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use super::current_at;

/// The gateway rules the plan was made from, and those that replace them.
const OLD: usize = 1;
const NEW: usize = 2;

/// Every interleaving with at most three preemptions
/// (`LOOM_MAX_PREEMPTIONS` sets another bound).
fn model(f: impl Fn() + Sync + Send + 'static) {
    crate::sync::check(3, f);
}

/// The instance: its set's gateway part and its version.
struct Instance {
    gateway: AtomicUsize,
    version: AtomicU32,
}

impl Instance {
    /// A load: the set, then its version (`version_first` swaps them, the
    /// order the memo is not sound under).
    fn load(&self, gateway: usize, version: u32, version_first: bool) {
        if version_first {
            self.version.store(version, Ordering::Release);
            self.gateway.store(gateway, Ordering::SeqCst);
        } else {
            self.gateway.store(gateway, Ordering::SeqCst);
            self.version.store(version, Ordering::Release);
        }
    }

    /// A request's question: the version it read, and whether the plan of
    /// `OLD` is current.
    fn ask(&self, checked: &AtomicU32) -> (u32, bool) {
        let now = self.version.load(Ordering::Acquire);
        let current = current_at(checked, now, || self.gateway.load(Ordering::SeqCst) == OLD);
        (now, current)
    }
}

fn loads_racing_two_readers(version_first: bool) {
    model(move || {
        let instance = Arc::new(Instance {
            gateway: AtomicUsize::new(OLD),
            version: AtomicU32::new(1),
        });
        // The plan was made at version 1.
        let checked = Arc::new(AtomicU32::new(1));

        let loader = {
            let instance = Arc::clone(&instance);
            loom::thread::spawn(move || {
                // Another kind: the gateway part stays.
                instance.load(OLD, 2, version_first);
                // The gateway kind.
                instance.load(NEW, 3, version_first);
            })
        };
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (instance, checked) = (Arc::clone(&instance), Arc::clone(&checked));
                loom::thread::spawn(move || {
                    for _ in 0..2 {
                        let (now, current) = instance.ask(&checked);
                        // Once a reader has seen the gateway load's
                        // version, the plan is never current. (Before it,
                        // either answer may be right: the set read may
                        // already be the new one.) A load that stores its
                        // version first fails this at once; what it leaves
                        // behind is checked below.
                        assert!(
                            version_first || !(now >= 3 && current),
                            "current at version {now}"
                        );
                    }
                })
            })
            .collect();
        loader.join().unwrap();
        for reader in readers {
            reader.join().unwrap();
        }
        // After everything: the replaced plan is not current, however the
        // readers left the memo.
        let (now, current) = instance.ask(&checked);
        assert_eq!(now, 3);
        assert!(!current, "the replaced plan was taken as current");
        // And a plan of the rules in force, made at the version read, is
        // current at once.
        let fresh = AtomicU32::new(now);
        assert!(current_at(&fresh, now, || false));
    });
}

#[test]
fn loom_gateway_memo_never_answers_current_for_rules_a_seen_load_replaced() {
    loads_racing_two_readers(false);
}

/// The memo relies on the set being stored before its version: a load
/// that stores the version first lets a reader remember the new version
/// against the old set, and the replaced plan stays current after the
/// load is over.
#[test]
#[should_panic(expected = "the replaced plan was taken as current")]
fn loom_gateway_memo_is_unsound_if_a_load_stores_its_version_first() {
    loads_racing_two_readers(true);
}
