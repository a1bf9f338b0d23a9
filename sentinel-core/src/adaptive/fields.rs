//! An adaptive rule's fields, for the codecs: each field's name in a rule
//! file and in the JSON of the command API, its default, and the
//! algorithms' words. The algorithm is named by `algorithm`, and its own
//! parameters sit beside the rule's fields (a rule file reads as one flat
//! mapping); a parameter of another algorithm is an unknown field.

use super::rule::KIND_NAME;
use super::{AdaptiveAlgorithm, AdaptiveRule};
use crate::rule::RuleError;
use crate::rule::describe::{Choice, Describe, DescribeRule, Fields, Name};

/// An algorithm's name, without its parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Algorithm {
    Gradient2,
    Vegas,
    Aimd,
}

const ALGORITHMS: &[Choice<Algorithm>] = &[
    Choice::new(Algorithm::Gradient2, "gradient2", 0, "Gradient2"),
    Choice::new(Algorithm::Vegas, "vegas", 1, "Vegas"),
    Choice::new(Algorithm::Aimd, "aimd", 2, "AIMD"),
];

fn algorithm_of(algorithm: &AdaptiveAlgorithm) -> Algorithm {
    match algorithm {
        AdaptiveAlgorithm::Gradient2 { .. } => Algorithm::Gradient2,
        AdaptiveAlgorithm::Vegas { .. } => Algorithm::Vegas,
        AdaptiveAlgorithm::Aimd { .. } => Algorithm::Aimd,
    }
}

fn with_defaults(algorithm: Algorithm) -> AdaptiveAlgorithm {
    match algorithm {
        Algorithm::Gradient2 => AdaptiveAlgorithm::gradient2(),
        Algorithm::Vegas => AdaptiveAlgorithm::vegas(),
        Algorithm::Aimd => AdaptiveAlgorithm::aimd(),
    }
}

impl Default for AdaptiveRule {
    /// A rule with no resource yet, Gradient2 with Netflix's defaults.
    fn default() -> Self {
        AdaptiveRule::new("", AdaptiveAlgorithm::gradient2())
    }
}

impl Describe for AdaptiveRule {
    fn describe<F: Fields>(&mut self, f: &mut F) {
        f.optional_whole(Name::new("id", "id").last(), &mut self.id);
        let resource = Name::new("resource", "resource").required().names_rule();
        f.string(resource, &mut self.resource, "");
        let origin = Name::new("limit_app", "limitApp");
        f.string(origin, &mut self.limit_app, super::ADAPTIVE_APP_DEFAULT);
        let mut algorithm = algorithm_of(&self.algorithm);
        let name = Name::new("algorithm", "algorithm");
        f.choice(name, &mut algorithm, Algorithm::Gradient2, ALGORITHMS);
        if algorithm != algorithm_of(&self.algorithm) {
            self.algorithm = with_defaults(algorithm);
        }
        let (initial, min, max) = self.algorithm.default_limits();
        f.whole(
            Name::new("initial_limit", "initialLimit"),
            &mut self.initial_limit,
            initial,
        );
        f.whole(Name::new("min_limit", "minLimit"), &mut self.min_limit, min);
        f.whole(Name::new("max_limit", "maxLimit"), &mut self.max_limit, max);
        f.whole(
            Name::new("window_ms", "windowMs"),
            &mut self.window_ms,
            1_000,
        );
        let samples = Name::new("min_samples", "minSamples");
        f.whole(samples, &mut self.min_samples, 10);
        describe_algorithm(&mut self.algorithm, f);
    }
}

/// The parameters of the rule's algorithm, with its defaults.
fn describe_algorithm<F: Fields>(algorithm: &mut AdaptiveAlgorithm, f: &mut F) {
    let d = with_defaults(algorithm_of(algorithm));
    match (algorithm, d) {
        (
            AdaptiveAlgorithm::Gradient2 {
                smoothing,
                rtt_tolerance,
                long_window,
                queue_size,
            },
            AdaptiveAlgorithm::Gradient2 {
                smoothing: d_smoothing,
                rtt_tolerance: d_tolerance,
                long_window: d_long,
                queue_size: d_queue,
            },
        ) => {
            f.number(Name::new("smoothing", "smoothing"), smoothing, d_smoothing);
            let tolerance = Name::new("rtt_tolerance", "rttTolerance");
            f.number(tolerance, rtt_tolerance, d_tolerance);
            f.whole(Name::new("long_window", "longWindow"), long_window, d_long);
            f.whole(Name::new("queue_size", "queueSize"), queue_size, d_queue);
        }
        (
            AdaptiveAlgorithm::Vegas {
                alpha,
                beta,
                smoothing,
                probe_multiplier,
            },
            AdaptiveAlgorithm::Vegas {
                smoothing: d_smoothing,
                probe_multiplier: d_probe,
                ..
            },
        ) => {
            f.optional_whole(Name::new("alpha", "alpha"), alpha);
            f.optional_whole(Name::new("beta", "beta"), beta);
            f.number(Name::new("smoothing", "smoothing"), smoothing, d_smoothing);
            let probe = Name::new("probe_multiplier", "probeMultiplier");
            f.whole(probe, probe_multiplier, d_probe);
        }
        (
            AdaptiveAlgorithm::Aimd {
                backoff_ratio,
                timeout_ms,
            },
            AdaptiveAlgorithm::Aimd {
                backoff_ratio: d_ratio,
                timeout_ms: d_timeout,
            },
        ) => {
            let ratio = Name::new("backoff_ratio", "backoffRatio");
            f.number(ratio, backoff_ratio, d_ratio);
            f.whole(Name::new("timeout_ms", "timeoutMs"), timeout_ms, d_timeout);
        }
        // `with_defaults` gives the same algorithm back.
        _ => {}
    }
}

impl DescribeRule for AdaptiveRule {
    const KIND: &'static str = KIND_NAME;
    const FILE_ORDER: u32 = 5;

    fn problems(&self, index: usize, max_name_len: usize) -> Vec<RuleError> {
        let mut problems = AdaptiveRule::problems(self, index);
        problems.extend(self.name_problems(index, max_name_len));
        problems
    }
}
