//! Loom models of a pending call (`--cfg sentinel_loom`, as the lease's
//! models):
//!
//! ```sh
//! RUSTFLAGS="--cfg sentinel_loom" CARGO_TARGET_DIR=target/loom-cluster cargo test -p sentinel-flow-cluster --lib --release loom_pending
//! ```
//!
//! The entry waits for the worker's answer; its deadline is a thread of
//! the model (`expire`), so the scheduler decides whether the entry gives
//! up before, while or after the worker answers; a third thread may answer
//! too (the connection lost). The property every model states: a token
//! Redis gave is taken by the entry (and released at its exit) or given
//! back by the late answer, exactly once, never both and never neither;
//! the entry never takes an answer after it gave up; nothing waits
//! forever (loom fails a model in which every thread is blocked).

use std::time::{Duration, Instant};

use loom::sync::Arc;
use loom::thread;

use crate::concurrency::{Pending, State};
use crate::param::{ParamPending, State as ParamState};
use sentinel_flow_core::flow::TokenAnswer;

/// A deadline the models never reach in real time: under loom only
/// `expire` ends the wait.
fn far() -> Instant {
    Instant::now() + Duration::from_secs(3_600)
}

/// Every interleaving with at most three preemptions (`LOOM_MAX_PREEMPTIONS`
/// sets another bound), as the lease's models: four threads around one
/// condvar are too many for an unbounded search in CI's time.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(3);
    }
    builder.check(f);
}

/// What the entry of a concurrency acquire did: took a Redis token
/// (released at its exit), got no token, or gave up at its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Entry {
    Took,
    NoToken,
    GaveUp,
}

/// One concurrency acquire: the entry, its deadline, the worker answering
/// `verdict`, and (with `lost`) a second answer `Failed` racing it.
/// Checks the ledger of the token; `expire`: whether the deadline fires.
fn concurrency_model(verdict: State, lost: bool, expire: bool) {
    model(move || {
        let pending = Arc::new(Pending::new(1));
        let timer = expire.then(|| {
            let pending = Arc::clone(&pending);
            thread::spawn(move || pending.expire())
        });
        let worker = {
            let pending = Arc::clone(&pending);
            // As `calls::acquire`: no call for an entry that gave up; a
            // token taken for no one goes back.
            thread::spawn(move || {
                if pending.is_abandoned() {
                    return (false, false);
                }
                (verdict == State::Taken, pending.answer(verdict))
            })
        };
        let connection = lost.then(|| {
            let pending = Arc::clone(&pending);
            thread::spawn(move || pending.answer(State::Failed))
        });
        let entry = match pending.wait(far()) {
            Some(State::Taken) => Entry::Took,
            Some(State::Refused | State::Failed) => Entry::NoToken,
            None => Entry::GaveUp,
        };
        let (granted, released_late) = worker.join().unwrap();
        if let Some(connection) = connection {
            assert!(!connection.join().unwrap(), "a failure gives nothing back");
        }
        if let Some(timer) = timer {
            timer.join().unwrap();
        }
        let taken = entry == Entry::Took;
        assert_eq!(
            u8::from(granted),
            u8::from(taken) + u8::from(released_late),
            "granted {granted}: taken {taken}, released late {released_late}"
        );
        assert_eq!(
            pending.is_abandoned(),
            entry == Entry::GaveUp,
            "abandoned exactly when the entry gave up ({entry:?})"
        );
        if entry == Entry::GaveUp {
            assert!(
                !pending.answer(State::Refused),
                "after the give-up, still abandoned"
            );
        }
    });
}

#[test]
fn loom_pending_a_late_grant_goes_back_once_and_a_taken_one_stays() {
    concurrency_model(State::Taken, false, true);
}

#[test]
fn loom_pending_a_refusal_racing_the_deadline_gives_nothing_back() {
    concurrency_model(State::Refused, false, true);
}

#[test]
fn loom_pending_a_grant_racing_a_lost_connection_and_the_deadline() {
    concurrency_model(State::Taken, true, true);
}

#[test]
fn loom_pending_an_entry_without_a_deadline_is_always_answered() {
    concurrency_model(State::Taken, false, false);
    concurrency_model(State::Refused, true, false);
}

/// One hot-parameter entry: the entry (whose fallback admits it or not at
/// its deadline), its deadline, and the worker as `param::calls::acquire`
/// with Redis answering `verdict` (`force`: Redis counts the entry
/// whatever its verdict). Returns nothing; checks that an admitted entry
/// is counted in the cluster's window exactly once and a refused one is
/// never charged.
fn param_model(verdict: ParamState, fallback_admits: bool) {
    model(move || {
        let pending = Arc::new(ParamPending::new(Vec::new()));
        let timer = {
            let pending = Arc::clone(&pending);
            thread::spawn(move || pending.expire())
        };
        let worker = {
            let pending = Arc::clone(&pending);
            // (counted by the first call, charged by a forced one)
            thread::spawn(move || match pending.abandoned() {
                Some(false) => (0, 0),
                Some(true) => (0, 1),
                None => {
                    let counted = u8::from(verdict == ParamState::Granted);
                    let late = pending.answer(verdict);
                    let charged = u8::from(late == Some(true) && verdict != ParamState::Granted);
                    (counted, charged)
                }
            })
        };
        let decided = pending.wait(far(), || {
            if fallback_admits {
                TokenAnswer::Unavailable
            } else {
                TokenAnswer::Refused
            }
        });
        let (counted, charged) = worker.join().unwrap();
        timer.join().unwrap();
        let admitted = match decided {
            Ok(state) => {
                assert_eq!(state, verdict, "the entry takes Redis' verdict");
                assert_eq!(charged, 0, "an answered entry is never charged");
                state == ParamState::Granted
            }
            Err(answer) => {
                assert_eq!(pending.abandoned(), Some(answer != TokenAnswer::Refused));
                assert_eq!(pending.answer(ParamState::Granted), pending.abandoned());
                answer != TokenAnswer::Refused
            }
        };
        if admitted {
            assert_eq!(counted + charged, 1, "an admitted entry is counted once");
        } else {
            assert_eq!(charged, 0, "a refused entry is never charged");
        }
    });
}

#[test]
fn loom_pending_param_a_fallback_admission_is_charged_once() {
    param_model(ParamState::Refused, true);
    param_model(ParamState::Granted, true);
}

#[test]
fn loom_pending_param_a_fallback_refusal_is_never_charged() {
    param_model(ParamState::Refused, false);
    param_model(ParamState::Granted, false);
}

/// No answer comes (the worker has not got to the call): the deadline
/// alone ends the wait, whenever it fires against the entry's wait.
#[test]
fn loom_pending_an_unanswered_entry_gives_up_at_its_deadline() {
    model(|| {
        let pending = Arc::new(Pending::new(1));
        let timer = {
            let pending = Arc::clone(&pending);
            thread::spawn(move || pending.expire())
        };
        assert_eq!(pending.wait(far()), None, "gave up");
        timer.join().unwrap();
        assert!(pending.answer(State::Taken), "a grant after it goes back");
    });
}
