//! The three algorithms' rules for moving the limit, after Netflix
//! concurrency-limits' `Gradient2Limit`, `VegasLimit` and `AIMDLimit`, fed
//! once per sample window. Plain state, owned by whichever exit folds a
//! window (see `limiter.rs`).

use super::rule::{AdaptiveAlgorithm, AdaptiveRule};

/// One window's samples, as the algorithm hears them.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sample {
    /// The average response time of the window's calls, in ms (at least 1).
    pub(crate) rtt: f64,
    /// The lowest response time of the window's calls, in ms (at least 1,
    /// at most `rtt`).
    pub(crate) min_rtt: f64,
    /// The most calls in flight seen in the window.
    pub(crate) in_flight: u32,
    /// A call of the window failed.
    pub(crate) dropped: bool,
}

/// The algorithm's learned state.
#[derive(Debug)]
pub(crate) struct Estimator {
    algorithm: AdaptiveAlgorithm,
    min: f64,
    max: f64,
    /// The limit as a real number (the gate holds its whole part).
    estimate: f64,
    /// Gradient2: the long-term RTT; Vegas: the no-load RTT (0: none yet).
    long_rtt: f64,
    /// Gradient2: windows averaged so far (for the warm-up); Vegas: windows
    /// since the last probe of the no-load RTT.
    count: u64,
    /// Vegas: the jitter of the next probe (0.5..1), from a fixed
    /// sequence so that runs repeat.
    jitter: f64,
    seed: u64,
}

/// `floor(log10(n))`, at least 1 (Netflix's `Log10RootIntFunction`).
fn log10_root(n: f64) -> f64 {
    n.max(1.0).log10().floor().max(1.0)
}

impl Estimator {
    pub(crate) fn new(rule: &AdaptiveRule) -> Self {
        let mut estimator = Estimator {
            algorithm: rule.algorithm.clone(),
            min: f64::from(rule.min_limit),
            max: f64::from(rule.max_limit),
            estimate: f64::from(rule.initial_limit),
            long_rtt: 0.0,
            count: 0,
            jitter: 1.0,
            seed: 0x9E37_79B9_7F4A_7C15,
        };
        estimator.next_jitter();
        estimator
    }

    /// The current estimate, as a limit.
    pub(crate) fn limit(&self) -> u32 {
        self.estimate as u32
    }

    /// The RTT the algorithm compares against (Gradient2's long-term RTT,
    /// Vegas's no-load RTT; 0 for AIMD or before any sample), in ms.
    pub(crate) fn reference_rtt(&self) -> f64 {
        self.long_rtt
    }

    fn next_jitter(&mut self) {
        // xorshift64*: a fixed sequence of jitters in 0.5..1.
        self.seed ^= self.seed >> 12;
        self.seed ^= self.seed << 25;
        self.seed ^= self.seed >> 27;
        let bits = self.seed.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11;
        self.jitter = 0.5 + 0.5 * (bits as f64 / (1u64 << 53) as f64);
    }

    /// Folds one window; the new limit.
    pub(crate) fn update(&mut self, sample: Sample) -> u32 {
        let next = match self.algorithm {
            AdaptiveAlgorithm::Gradient2 {
                smoothing,
                rtt_tolerance,
                long_window,
                queue_size,
            } => self.gradient2(sample, smoothing, rtt_tolerance, long_window, queue_size),
            AdaptiveAlgorithm::Vegas {
                alpha,
                beta,
                smoothing,
                probe_multiplier,
            } => self.vegas(sample, alpha, beta, smoothing, probe_multiplier),
            AdaptiveAlgorithm::Aimd {
                backoff_ratio,
                timeout_ms,
            } => {
                let limit = self.estimate.floor();
                if sample.dropped || sample.rtt > timeout_ms as f64 {
                    (limit * backoff_ratio).floor()
                } else if f64::from(sample.in_flight) * 2.0 >= limit {
                    limit + 1.0
                } else {
                    limit
                }
            }
        };
        self.estimate = next.clamp(self.min, self.max);
        self.limit()
    }

    fn gradient2(
        &mut self,
        sample: Sample,
        smoothing: f64,
        tolerance: f64,
        long_window: u32,
        queue_size: u32,
    ) -> f64 {
        let short = sample.rtt;
        // An exponential average of the windows' RTTs, started from the
        // first window's lowest RTT: Netflix's `ExpAvgMeasurement` warms up
        // on the first calls' RTTs, which the first window's lowest stands
        // for (an average of whole windows would take a load already
        // queued as the normal latency).
        self.count += 1;
        self.long_rtt = if self.count == 1 {
            sample.min_rtt
        } else {
            let factor = 2.0 / (f64::from(long_window) + 1.0);
            self.long_rtt * (1.0 - factor) + short * factor
        };
        // Back to normal after long overload: bring the long RTT down
        // faster than its averaging would.
        if self.long_rtt / short > 2.0 {
            self.long_rtt *= 0.95;
        }
        let estimate = self.estimate;
        // Not growing a limit the load does not use.
        if f64::from(sample.in_flight) < estimate / 2.0 {
            return estimate;
        }
        let gradient = (tolerance * self.long_rtt / short).clamp(0.5, 1.0);
        let target = estimate * gradient + f64::from(queue_size);
        estimate * (1.0 - smoothing) + target * smoothing
    }

    fn vegas(
        &mut self,
        sample: Sample,
        alpha: Option<u32>,
        beta: Option<u32>,
        smoothing: f64,
        probe_multiplier: u32,
    ) -> f64 {
        let rtt = sample.rtt;
        let estimate = self.estimate;
        self.count += 1;
        if self.jitter * f64::from(probe_multiplier) * estimate <= self.count as f64 {
            // Probe: take this window's lowest RTT as the no-load RTT again.
            self.next_jitter();
            self.count = 0;
            self.long_rtt = sample.min_rtt;
            return estimate;
        }
        // The no-load RTT is the lowest call RTT seen (Netflix's, fed every
        // call), not the lowest window average: a window's average mixes
        // the calls of a queue.
        if self.long_rtt == 0.0 || sample.min_rtt < self.long_rtt {
            self.long_rtt = sample.min_rtt;
            if rtt <= self.long_rtt {
                return estimate;
            }
        }
        let log = log10_root(estimate);
        let next = if sample.dropped {
            estimate - log
        } else if f64::from(sample.in_flight) * 2.0 < estimate {
            return estimate;
        } else {
            let queue = (estimate * (1.0 - self.long_rtt / rtt)).ceil();
            let alpha = alpha.map_or(3.0 * log, f64::from);
            let beta = beta.map_or(6.0 * log, f64::from);
            if queue <= log {
                estimate + beta
            } else if queue < alpha {
                estimate + log
            } else if queue > beta {
                estimate - log
            } else {
                return estimate;
            }
        };
        let next = next.clamp(1.0, self.max);
        (1.0 - smoothing) * estimate + smoothing * next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(rtt: f64, in_flight: u32) -> Sample {
        Sample {
            rtt,
            min_rtt: rtt,
            in_flight,
            dropped: false,
        }
    }

    #[test]
    fn aimd_adds_one_while_used_and_backs_off_on_a_drop() {
        let rule = AdaptiveRule::new("r", AdaptiveAlgorithm::aimd());
        let mut e = Estimator::new(&rule);
        assert_eq!(e.update(sample(10.0, 20)), 21);
        // Not used: no growth.
        assert_eq!(e.update(sample(10.0, 5)), 21);
        let drop = Sample {
            dropped: true,
            ..sample(10.0, 21)
        };
        assert_eq!(e.update(drop), 20); // floor(21 * 0.9) = 18, held at min 20
        assert_eq!(e.update(sample(6_000.0, 20)), 20);
    }

    #[test]
    fn gradient2_grows_by_the_queue_allowance_without_queueing() {
        let rule = AdaptiveRule::new("r", AdaptiveAlgorithm::gradient2());
        let mut e = Estimator::new(&rule);
        e.update(sample(100.0, 20));
        // 20 * 0.8 + (20 + 4) * 0.2 = 20.8
        assert!((e.estimate - 20.8).abs() < 1e-9, "{}", e.estimate);
    }

    #[test]
    fn gradient2_shrinks_when_the_rtt_is_past_the_tolerance() {
        let rule = AdaptiveRule {
            initial_limit: 100,
            ..AdaptiveRule::new("r", AdaptiveAlgorithm::gradient2())
        };
        let mut e = Estimator::new(&rule);
        // The long RTT's warm-up (a plain average of 10 windows) at 100 ms.
        for _ in 0..10 {
            e.update(sample(100.0, 100));
        }
        let before = e.estimate;
        for _ in 0..5 {
            e.update(sample(400.0, 100));
        }
        assert!(e.estimate < before, "{} !< {before}", e.estimate);
    }

    #[test]
    fn vegas_learns_the_no_load_rtt_then_moves_by_the_queue() {
        let rule = AdaptiveRule::new("r", AdaptiveAlgorithm::vegas());
        let mut e = Estimator::new(&rule);
        assert_eq!(e.update(sample(100.0, 20)), 20);
        assert_eq!(e.reference_rtt(), 100.0);
        // No queue: + beta (6 * 1).
        assert_eq!(e.update(sample(100.0, 20)), 26);
        // Queue of ceil(26 * (1 - 100/200)) = 13 > beta: - 1.
        assert_eq!(e.update(sample(200.0, 26)), 25);
    }

    /// A window that mixes unqueued calls (50 ms) with queued ones
    /// (100 ms on average): what a limit started past the knee sees first.
    fn mixed(in_flight: u32) -> Sample {
        Sample {
            rtt: 100.0,
            min_rtt: 50.0,
            in_flight,
            dropped: false,
        }
    }

    #[test]
    fn vegas_takes_the_no_load_rtt_from_a_windows_fastest_call_not_its_average() {
        let rule = AdaptiveRule {
            initial_limit: 200,
            ..AdaptiveRule::new("r", AdaptiveAlgorithm::vegas())
        };
        let mut e = Estimator::new(&rule);
        // A queue of ceil(200 x (1 - 50/100)) = 100 > beta (6 x 2): down by
        // log10(200) = 2.
        assert_eq!(e.update(mixed(200)), 198);
        assert_eq!(e.reference_rtt(), 50.0);
        // Then every call queued alike: the same queue, the same step.
        assert_eq!(e.update(sample(100.0, 198)), 196);
    }

    #[test]
    fn gradient2_starts_its_long_rtt_from_the_first_windows_fastest_call() {
        let rule = AdaptiveRule {
            initial_limit: 200,
            ..AdaptiveRule::new("r", AdaptiveAlgorithm::gradient2())
        };
        let mut e = Estimator::new(&rule);
        e.update(mixed(200));
        assert_eq!(e.reference_rtt(), 50.0);
        // Queued windows after it: 1.5 x 50 / 100 = 0.75 of the limit is
        // the target, so the limit falls.
        let before = e.estimate;
        e.update(sample(100.0, 200));
        assert!(e.estimate < before, "{} !< {before}", e.estimate);
    }

    #[test]
    fn log10_root_is_netflixs() {
        assert_eq!(log10_root(0.0), 1.0);
        assert_eq!(log10_root(99.0), 1.0);
        assert_eq!(log10_root(100.0), 2.0);
        assert_eq!(log10_root(1_500.0), 3.0);
    }
}
