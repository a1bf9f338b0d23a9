//! Loom models of the refill handshake (`RUSTFLAGS="--cfg sentinel_loom"
//! cargo test -p sentinel-flow-cluster --lib --release loom`). The worker's
//! `Notify` is a count of pending wakes: `notify_one` with no waiter keeps
//! one permit, which the worker's next wait takes.

use loom::sync::Arc;
use loom::sync::atomic::Ordering::SeqCst;
use loom::sync::atomic::{AtomicBool, AtomicUsize};
use loom::thread;

use super::{Handshake, IN_FLIGHT, WANTED};

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
        // The wake a retake asks for is the retake model's to count.
        let _ = Handshake::finish(self);
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

/// A reload asks for a retake while a refill is in flight, between the
/// refill's look for one and its finish or around them; the worker, woken,
/// serves. Afterwards a retake still asked for has a refill in flight or
/// is wanted with a wake pending: it is never left until some entry runs
/// short (the lease's old permits spendable meanwhile). `finish` is the
/// refill's end, as `Handshake::finish` or a variant.
fn a_retake_racing_a_refill(finish: fn(&Handshake) -> bool) {
    loom::model(move || {
        let h = Arc::new(Handshake::new());
        // An earlier ask, and its refill in flight.
        assert!(h.ask());
        assert!(h.start());
        let wakes = Arc::new(AtomicUsize::new(0));
        let refill = {
            let (h, w) = (h.clone(), wakes.clone());
            thread::spawn(move || {
                let _took = h.take_retake();
                if finish(&h) {
                    w.fetch_add(1, SeqCst);
                }
            })
        };
        let reload = {
            let (h, w) = (h.clone(), wakes.clone());
            thread::spawn(move || {
                if h.ask_retake() {
                    w.fetch_add(1, SeqCst);
                }
            })
        };
        for t in [refill, reload] {
            t.join().unwrap();
        }
        // The worker, woken, starts a refill, which takes the retake.
        if wakes.load(SeqCst) > 0 && h.start() {
            let _took = h.take_retake();
        }
        let state = h.state.load(SeqCst);
        let pending = h.retake.load(SeqCst);
        assert!(
            !pending || state & IN_FLIGHT != 0,
            "a retake is left with no refill to take it (state {state})"
        );
    });
}

#[test]
fn loom_a_retake_asked_during_a_refill_is_taken_by_a_refill() {
    a_retake_racing_a_refill(Handshake::finish);
}

#[test]
#[should_panic(expected = "a retake is left with no refill to take it")]
fn loom_a_finish_that_did_not_ask_again_left_a_retake() {
    a_retake_racing_a_refill(|h| {
        h.state.swap(0, SeqCst);
        false
    });
}
