//! Loom models of the refill handshake (`RUSTFLAGS="--cfg sentinel_loom"
//! cargo test -p sentinel-flow-cluster --lib --release loom`). The worker's
//! `Notify` is a count of pending wakes: `notify_one` with no waiter keeps
//! one permit, which the worker's next wait takes.

use loom::sync::Arc;
use loom::sync::atomic::Ordering::SeqCst;
use loom::sync::atomic::{AtomicBool, AtomicUsize};
use loom::thread;

use super::{Handshake, WANTED};

/// The three steps, as the entry, the worker and the refill take them.
trait Steps: Send + Sync + 'static {
    fn ask(&self) -> bool;
    fn start(&self) -> bool;
    fn finish(&self);
    /// Asked for, with no refill in flight.
    fn waiting(&self) -> bool;
}

impl Steps for Handshake {
    fn ask(&self) -> bool {
        Handshake::ask(self)
    }
    fn start(&self) -> bool {
        Handshake::start(self)
    }
    fn finish(&self) {
        Handshake::finish(self)
    }
    fn waiting(&self) -> bool {
        self.state.load(SeqCst) == WANTED
    }
}

/// The protocol before `handshake.rs`: two flags, cleared one after the
/// other. Kept to show that the first model catches its gap.
struct TwoFlags {
    wanted: AtomicBool,
    in_flight: AtomicBool,
}

impl Steps for TwoFlags {
    fn ask(&self) -> bool {
        !self.wanted.swap(true, SeqCst)
    }
    fn start(&self) -> bool {
        self.wanted.load(SeqCst)
            && self
                .in_flight
                .compare_exchange(false, true, SeqCst, SeqCst)
                .is_ok()
    }
    fn finish(&self) {
        self.wanted.store(false, SeqCst);
        self.in_flight.store(false, SeqCst);
    }
    fn waiting(&self) -> bool {
        self.wanted.load(SeqCst) && !self.in_flight.load(SeqCst)
    }
}

/// A refill in flight finishes while an entry asks and the worker, woken,
/// serves: afterwards the flow is not asked for with no refill in flight
/// and no wake pending (the ask would wait for the worker's timer).
fn an_ask_racing_a_finish<S: Steps>(make: fn() -> S) {
    loom::model(move || {
        let steps = Arc::new(make());
        // An earlier ask, and its refill in flight.
        assert!(steps.ask());
        assert!(steps.start());
        let wakes = Arc::new(AtomicUsize::new(0));
        let refill = {
            let s = steps.clone();
            thread::spawn(move || s.finish())
        };
        let entry = {
            let (s, w) = (steps.clone(), wakes.clone());
            thread::spawn(move || {
                if s.ask() {
                    w.fetch_add(1, SeqCst);
                }
            })
        };
        // The worker takes a wake if there is one, and serves.
        let worker = {
            let (s, w) = (steps.clone(), wakes.clone());
            thread::spawn(move || {
                if w.load(SeqCst) > 0 {
                    w.fetch_sub(1, SeqCst);
                    s.start();
                }
            })
        };
        for t in [refill, entry, worker] {
            t.join().unwrap();
        }
        assert!(
            !(steps.waiting() && wakes.load(SeqCst) == 0),
            "an ask is left for the worker's timer"
        );
    });
}

#[test]
fn loom_an_ask_racing_a_finish_is_never_left_to_the_timer() {
    an_ask_racing_a_finish(Handshake::new);
}

#[test]
#[should_panic(expected = "left for the worker's timer")]
fn loom_the_two_flag_handshake_left_an_ask_to_the_timer() {
    an_ask_racing_a_finish(|| TwoFlags {
        wanted: AtomicBool::new(false),
        in_flight: AtomicBool::new(false),
    });
}
