//! Loom model of the recycled rule references: parked per thread (loom's
//! thread-locals, dropped when a model thread ends), taken back by the
//! thread's next block, released by an eviction or the thread's exit. The
//! rule's `Arc` is `std`'s (its counts are exact under loom, which runs the
//! model on one OS thread); the model checks who takes and releases it.

use std::sync::Arc;

use loom::sync::mpsc;
use loom::thread;

use super::*;
use crate::flow::FlowRule;
use crate::sync::check;

/// A parked reference is taken back at most once and every reference is
/// released exactly once, across threads and thread exits (no double drop,
/// no leak).
#[test]
fn loom_spare_references_are_taken_once_and_released_once() {
    check(3, || {
        let rule = Arc::new(FlowRule::new("r", 1.0));
        let (ours, theirs) = (Arc::clone(&rule), Arc::clone(&rule));
        let (send, receive) = mpsc::channel();
        // Between two channel operations a model thread runs alone, so the
        // counts below are exact.
        let count = |rule: &Arc<FlowRule>| Arc::strong_count(rule);
        let a = thread::spawn(move || {
            let before = count(&ours);
            let first = share(&ours);
            assert_eq!(count(&ours), before + 1, "nothing parked: a new reference");
            park(first);
            assert_eq!(count(&ours), before + 1, "parked, not released");
            let taken = share(&ours);
            assert_eq!(count(&ours), before + 1, "taken back, no new reference");
            let second = share(&ours);
            assert_eq!(count(&ours), before + 2, "taken once: a new reference");
            // To B's thread, as an error dropped there.
            send.send(second).unwrap();
            // Parked again; released when A exits.
            park(taken);
        });
        let b = thread::spawn(move || {
            let error = receive.recv().unwrap();
            let before = count(&theirs);
            park(error);
            assert_eq!(count(&theirs), before, "parked in B, not released");
            let again = share(&theirs);
            assert_eq!(count(&theirs), before, "taken back by B");
            assert!(same(&again, &theirs));
            // Parked again; released when B exits.
            park(again);
        });
        a.join().unwrap();
        b.join().unwrap();
        // Loom's join returns before a thread's locals are dropped (std's
        // waits for them): wait for the parked references to be released.
        // A leak spins here until loom gives up on the model.
        while Arc::strong_count(&rule) > 1 {
            thread::yield_now();
        }
        assert!(Arc::try_unwrap(rule).is_ok(), "the last reference, once");
    });
}
