//! Model checks of the probe protocol (`--cfg loom`; see `crate::sync`).
//!
//! The property: however entries and exits of one half-open period
//! interleave, no more than `probe_num` probes are admitted in it, and
//! once every admitted probe is settled (completed well or badly, its
//! call panicked, or it was dropped unsettled) the breaker has left
//! half-open: closed when every probe completed well, open otherwise. It
//! is never left refusing for good: a call after the open time passes or
//! probes.

use super::*;

/// The time every model thread enters and exits at: the open time of the
/// breaker tripped at [`T0`] is over.
const T0: u64 = 10_000;
const NOW: u64 = T0 + 1_000;

/// How a thread's call ends, if it was let through as a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome {
    Good,
    Bad,
    /// The call unwound: completed, then settled as a failed probe (as
    /// the degrade slot's exit does).
    Panicked,
    /// The probe was dropped before its call ran.
    Abandoned,
}

const OUTCOMES: [Outcome; 4] = [
    Outcome::Good,
    Outcome::Bad,
    Outcome::Panicked,
    Outcome::Abandoned,
];

fn quiet(_: &StateChange<'_>) {}

/// An error-count breaker of `probe_num` probes and a 1 s open time,
/// tripped open at [`T0`].
fn open_breaker(probe_num: u32) -> CircuitBreaker {
    let rule = DegradeRule {
        min_request_amount: 1,
        time_window_sec: 1,
        probe_num,
        ..DegradeRule::new("res", DegradeGrade::ErrorCount, 1.0)
    };
    let breaker = CircuitBreaker::new(Arc::new(rule));
    while breaker.snapshot(T0).state != BreakerState::Open {
        breaker.on_complete(T0, 1, true, None, &quiet);
    }
    breaker
}

/// One call at [`NOW`] ending with `outcome`: the probe it was let
/// through as, if any.
fn call(breaker: &CircuitBreaker, outcome: Outcome) -> Option<Probe> {
    let probe = match breaker.try_pass(NOW, &quiet) {
        Admission::Probe(probe) => probe,
        Admission::Pass => {
            breaker.on_complete(NOW, 1, outcome != Outcome::Good, None, &quiet);
            return None;
        }
        Admission::Block => return None,
    };
    match outcome {
        Outcome::Good => breaker.on_complete(NOW, 1, false, Some(probe), &quiet),
        Outcome::Bad => breaker.on_complete(NOW, 1, true, Some(probe), &quiet),
        Outcome::Panicked => {
            breaker.on_complete(NOW, 1, false, None, &quiet);
            breaker.on_probe_panicked(NOW, probe, &quiet);
        }
        Outcome::Abandoned => breaker.on_abandon(NOW, probe, &quiet),
    }
    Some(probe)
}

/// Two calls race on a breaker of `probe_num` probes whose open time is
/// over, ending with `outcomes`; checks the property above.
fn race(probe_num: u32, outcomes: [Outcome; 2]) {
    crate::sync::check(3, move || {
        let breaker = std::sync::Arc::new(open_breaker(probe_num));
        let other = std::sync::Arc::clone(&breaker);
        let second = loom::thread::spawn(move || call(&other, outcomes[1]));
        let first = call(&breaker, outcomes[0]);
        let second = second.join().unwrap();

        let admitted: Vec<(Probe, Outcome)> = [(first, outcomes[0]), (second, outcomes[1])]
            .into_iter()
            .filter_map(|(probe, outcome)| Some((probe?, outcome)))
            .collect();
        assert!(
            !admitted.is_empty(),
            "the first call after the open time probes"
        );
        for (probe, _) in &admitted {
            let same = admitted.iter().filter(|(p, _)| p == probe).count();
            assert!(
                same as u32 <= probe_num,
                "{same} probes admitted in one half-open period of {probe_num}"
            );
        }
        let all_good = admitted.iter().all(|(_, o)| *o == Outcome::Good);
        let expected = if all_good {
            BreakerState::Closed
        } else {
            BreakerState::Open
        };
        let state = breaker.snapshot(NOW).state;
        assert_eq!(state, expected, "admitted {admitted:?}");
        // Never stuck: once the open time is over, a call is let through.
        let later = breaker.try_pass(NOW + 1_000, &quiet);
        assert_ne!(later, Admission::Block, "refusing after {admitted:?}");
    });
}

#[test]
fn loom_one_probe_per_half_open_period_whatever_its_end() {
    for first in OUTCOMES {
        for second in OUTCOMES {
            race(1, [first, second]);
        }
    }
}

#[test]
fn loom_probe_num_probes_then_closed_or_open() {
    for first in OUTCOMES {
        for second in OUTCOMES {
            race(2, [first, second]);
        }
    }
}
