//! Each algorithm, with Netflix's defaults, on the simulated service
//! (`service.rs`: capacity 100 calls, 50 ms each, offered three times what
//! it completes): the limit settles within 10% of the knee in 30 s from
//! below (the default initial limit, 20) and from above (200); after the
//! capacity is halved it is within 10% of the new knee in 10 s; after
//! recovery it climbs back within 10% of the knee in 30 s.
//!
//! The bounds an algorithm does not meet with its defaults are ignored
//! tests, each with the figures it measures in its reason; `fitted` meets
//! every bound with one set of parameters per algorithm chosen for the
//! service. Run them with `cargo test -p sentinel-flow-core --test adaptive
//! convergence -- --include-ignored --nocapture` to see every trace.

use sentinel_flow_core::adaptive::{AdaptiveAlgorithm, AdaptiveRule};

use crate::service::{RESOURCE, Simulation, Trace, between, per_second, settles_within};

pub(crate) const CAPACITY: u64 = 100;
pub(crate) const BASE_MS: u64 = 50;
/// The phases: 30 s at capacity, 10 s at half, 30 s recovered.
pub(crate) const KNEE_END: u64 = 30_000;
pub(crate) const HALF_END: u64 = 40_000;
pub(crate) const BACK_END: u64 = 70_000;

/// The scenario's limit trace for `algorithm` (its defaults) from `initial`.
fn scenario(algorithm: AdaptiveAlgorithm, initial: u32) -> Trace {
    let rule = AdaptiveRule {
        initial_limit: initial,
        ..AdaptiveRule::new(RESOURCE, algorithm)
    };
    let mut sim = Simulation::new(rule, CAPACITY, BASE_MS);
    let trace = sim.run_phases(&[
        (KNEE_END, CAPACITY),
        (HALF_END - KNEE_END, CAPACITY / 2),
        (BACK_END - HALF_END, CAPACITY),
    ]);
    eprintln!("limit every second: {:?}", per_second(&trace));
    trace
}

/// The limit settles within 10% of the knee in the first 30 s.
fn settles_at_the_knee(trace: &Trace) {
    let settled = settles_within(&between(trace, 0, KNEE_END), CAPACITY);
    eprintln!("settled at the knee after {settled:?} ms");
    assert!(settled.is_some(), "not within 10% of {CAPACITY} at 30 s");
}

/// Settled at the knee, the limit is within 10% of half of it 10 s after
/// the capacity halves, and back within 10% of the knee 30 s after it
/// recovers.
fn follows_a_halving_and_the_recovery(trace: &Trace) {
    settles_at_the_knee(trace);
    let half = settles_within(&between(trace, KNEE_END, HALF_END), CAPACITY / 2);
    eprintln!("within 10% of the halved knee after {half:?} ms");
    assert!(
        half.is_some(),
        "not within 10% of {} 10 s after the halving",
        CAPACITY / 2
    );
    let back = settles_within(&between(trace, HALF_END, BACK_END), CAPACITY);
    eprintln!("back at the knee after {back:?} ms");
    assert!(
        back.is_some(),
        "not back within 10% of {CAPACITY} 30 s after recovery"
    );
}

mod gradient2 {
    use super::*;

    #[test]
    #[ignore = "Gradient2's defaults grow 0.8 a 1 s window (smoothing 0.2 of a queue of 4): 20 to 44 in 30 s"]
    fn settles_at_the_knee_from_below() {
        settles_at_the_knee(&scenario(AdaptiveAlgorithm::gradient2(), 20));
    }

    #[test]
    #[ignore = "from 200 its 1.5 RTT tolerance holds the limit where calls take up to 1.5 times the first ones: 200 to 162 in 30 s"]
    fn settles_at_the_knee_from_above() {
        settles_at_the_knee(&scenario(AdaptiveAlgorithm::gradient2(), 200));
    }

    #[test]
    #[ignore = "never at the knee first (see above); from 200 it falls to 95 at half capacity (knee 50)"]
    fn follows_a_halving_and_the_recovery() {
        super::follows_a_halving_and_the_recovery(&scenario(AdaptiveAlgorithm::gradient2(), 200));
    }
}

mod vegas {
    use super::*;

    #[test]
    fn settles_at_the_knee_from_below() {
        settles_at_the_knee(&scenario(AdaptiveAlgorithm::vegas(), 20));
    }

    #[test]
    #[ignore = "down by log10(limit) (2) a 1 s window: 200 to 140 in 30 s"]
    fn settles_at_the_knee_from_above() {
        settles_at_the_knee(&scenario(AdaptiveAlgorithm::vegas(), 200));
    }

    #[test]
    #[ignore = "down by log10(limit) (1 or 2) a window: 106 to 92 in the 10 s at half capacity (knee 50)"]
    fn follows_a_halving_and_the_recovery() {
        super::follows_a_halving_and_the_recovery(&scenario(AdaptiveAlgorithm::vegas(), 20));
    }
}

mod aimd {
    use super::*;

    #[test]
    #[ignore = "AIMD grows 1 a window: 20 to 50 in 30 s"]
    fn settles_at_the_knee_from_below() {
        settles_at_the_knee(&scenario(AdaptiveAlgorithm::aimd(), 20));
    }

    #[test]
    #[ignore = "AIMD backs off on errors or an RTT over its 5 s timeout only: the queueing service (100 ms RTT at 200) keeps it at 200"]
    fn settles_at_the_knee_from_above() {
        settles_at_the_knee(&scenario(AdaptiveAlgorithm::aimd(), 200));
    }

    #[test]
    #[ignore = "never at the knee first (see above)"]
    fn follows_a_halving_and_the_recovery() {
        super::follows_a_halving_and_the_recovery(&scenario(AdaptiveAlgorithm::aimd(), 20));
    }
}

/// The same scenarios with one set of parameters per algorithm chosen for
/// this service (`docs/adaptive.md`, "Choosing parameters"): a 100 ms
/// window, two RTTs of the service; AIMD's timeout just above its 50 ms
/// no-load RTT; Vegas's queue thresholds at 2 and 4 calls; Gradient2 with
/// no RTT tolerance and a queue allowance of 2 calls. Each set meets every
/// bound from below and from above.
pub(crate) mod fitted {
    use super::*;

    pub(crate) fn fitted(algorithm: AdaptiveAlgorithm, initial: u32) -> Trace {
        let rule = AdaptiveRule {
            initial_limit: initial,
            window_ms: 100,
            ..AdaptiveRule::new(RESOURCE, algorithm)
        };
        let mut sim = Simulation::new(rule, CAPACITY, BASE_MS);
        let trace = sim.run_phases(&[
            (KNEE_END, CAPACITY),
            (HALF_END - KNEE_END, CAPACITY / 2),
            (BACK_END - HALF_END, CAPACITY),
        ]);
        eprintln!("limit every second: {:?}", per_second(&trace));
        trace
    }

    pub(crate) fn aimd() -> AdaptiveAlgorithm {
        AdaptiveAlgorithm::Aimd {
            backoff_ratio: 0.9,
            timeout_ms: 52,
        }
    }

    pub(crate) fn vegas() -> AdaptiveAlgorithm {
        AdaptiveAlgorithm::Vegas {
            alpha: Some(2),
            beta: Some(4),
            smoothing: 1.0,
            probe_multiplier: 30,
        }
    }

    pub(crate) fn gradient2() -> AdaptiveAlgorithm {
        AdaptiveAlgorithm::Gradient2 {
            smoothing: 0.2,
            rtt_tolerance: 1.0,
            long_window: 600,
            queue_size: 2,
        }
    }

    #[test]
    fn aimd_follows_the_knee_from_below() {
        follows_a_halving_and_the_recovery(&fitted(aimd(), 20));
    }

    #[test]
    fn aimd_follows_the_knee_from_above() {
        follows_a_halving_and_the_recovery(&fitted(aimd(), 200));
    }

    #[test]
    fn vegas_follows_the_knee_from_below() {
        follows_a_halving_and_the_recovery(&fitted(vegas(), 20));
    }

    #[test]
    fn vegas_follows_the_knee_from_above() {
        follows_a_halving_and_the_recovery(&fitted(vegas(), 200));
    }

    #[test]
    fn gradient2_follows_the_knee_from_below() {
        follows_a_halving_and_the_recovery(&fitted(gradient2(), 20));
    }

    #[test]
    fn gradient2_follows_the_knee_from_above() {
        follows_a_halving_and_the_recovery(&fitted(gradient2(), 200));
    }
}
