//! `AdaptiveRule`: a concurrency limit that moves with the resource's
//! latency, by one of Netflix concurrency-limits' algorithms, with their
//! parameters and defaults.

use std::any::Any;
use std::fmt;

use crate::BlockKind;
use crate::rule::footprint::Footprint;
use crate::rule::names::{Names, RuleName, name_problems};
use crate::rule::{Problems, Rule, RuleError, origin_problem};

/// The kind's name in errors and logs.
pub(crate) const KIND_NAME: &str = BlockKind::Adaptive.as_str();

/// `limit_app` value: the rule counts every caller together.
pub const ADAPTIVE_APP_DEFAULT: &str = "default";
/// `limit_app` value: the rule counts together the callers that no other
/// adaptive rule of the resource names.
pub const ADAPTIVE_APP_OTHER: &str = "other";

/// The largest concurrency limit (initial, min or max) a rule may give.
pub const MAX_ADAPTIVE_LIMIT: u32 = 1_000_000;

/// The longest sample window, in ms (one minute).
pub const MAX_WINDOW_MS: u64 = 60_000;

/// The shortest sample window, in ms (Netflix's bound).
pub const MIN_WINDOW_MS: u64 = 100;

/// The most samples a window may wait for before it folds.
pub const MAX_MIN_SAMPLES: u32 = 1_000_000;

/// The longest AIMD timeout, in ms (one hour).
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;

/// The largest Gradient2 RTT tolerance.
pub const MAX_RTT_TOLERANCE: f64 = 100.0;

/// The longest Gradient2 long window, in windows.
pub const MAX_LONG_WINDOW: u32 = 100_000;

/// The largest Vegas probe multiplier.
pub const MAX_PROBE_MULTIPLIER: u32 = 100_000;

/// How the limit moves, with the algorithm's parameters (Netflix's
/// meaning and defaults; [`AdaptiveAlgorithm::gradient2`],
/// [`vegas`](AdaptiveAlgorithm::vegas) and [`aimd`](AdaptiveAlgorithm::aimd)
/// give the defaults).
///
/// Each algorithm is fed once per sample window (see
/// [`AdaptiveRule::window_ms`]) with the window's average response time,
/// its fastest call's response time, the most calls in flight seen in it,
/// and whether a call in it failed.
///
/// What a window's average hides, its fastest call shows: a window of a
/// service past its knee mixes the calls admitted before the queue built
/// up with the queued ones. Gradient2 starts its long-term RTT, and Vegas
/// keeps its no-load RTT, from the fastest calls (as Netflix's, fed every
/// call, do), so a limit started above the knee comes down to it as long
/// as some calls of its first windows ran unqueued (a rule loaded while
/// the service is already overloaded takes the queued RTT as normal: start
/// it low, or at the limit the service had).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum AdaptiveAlgorithm {
    /// Gradient2: the limit follows the ratio of a long-term average RTT to
    /// the window's RTT, plus a queue allowance.
    ///
    /// The long-term RTT starts at the first window's fastest call, then
    /// follows the windows' averages by an exponential average over
    /// `long_window` windows (taken down 5% a window while it is more than
    /// twice the window's RTT). The limit settles where the window's RTT is
    /// `rtt_tolerance` times the long-term RTT, plus `queue_size` calls:
    /// with a tolerance of 1 and a small allowance, at the service's knee.
    Gradient2 {
        /// How much of a new estimate is taken each window (default 0.2,
        /// in `(0, 1]`).
        smoothing: f64,
        /// How much the window's RTT may exceed the long-term RTT before
        /// the limit shrinks (default 1.5, in `1..=`[`MAX_RTT_TOLERANCE`]).
        rtt_tolerance: f64,
        /// The long-term RTT's averaging length, in windows (default 600,
        /// in `1..=`[`MAX_LONG_WINDOW`]).
        long_window: u32,
        /// Calls allowed to queue on top of the estimate (default 4, at
        /// most [`MAX_ADAPTIVE_LIMIT`]).
        queue_size: u32,
    },
    /// Vegas: estimates the queue as `limit × (1 − rtt_noload / rtt)` and
    /// moves the limit to keep it between `alpha` and `beta`.
    ///
    /// `rtt_noload` is the fastest call seen; `rtt` is the window's
    /// average. A probe (see `probe_multiplier`) takes the probe window's
    /// fastest call as the no-load RTT again, so that a service that became
    /// slower for good is measured anew.
    Vegas {
        /// Below this queue the limit grows by log10(limit); `None`: 3 ×
        /// log10(limit), Netflix's default (at most [`MAX_ADAPTIVE_LIMIT`]).
        alpha: Option<u32>,
        /// Above this queue the limit shrinks by log10(limit); `None`: 6 ×
        /// log10(limit) (at most [`MAX_ADAPTIVE_LIMIT`], and above `alpha`).
        beta: Option<u32>,
        /// How much of a new limit is taken each window (default 1.0, in
        /// `(0, 1]`).
        smoothing: f64,
        /// The no-load RTT is measured again after about this many windows
        /// times the limit (a jitter of 0.5..1 applied; default 30, in
        /// `1..=`[`MAX_PROBE_MULTIPLIER`]).
        probe_multiplier: u32,
    },
    /// AIMD: the limit grows by one per window while it is used, and is
    /// multiplied by `backoff_ratio` when a call failed or the window's
    /// RTT exceeded `timeout_ms`.
    Aimd {
        /// The factor applied on a failure or timeout (default 0.9, in
        /// `[0.5, 1)`).
        backoff_ratio: f64,
        /// An RTT over this many ms counts as a drop (default 5000, in
        /// `1..=`[`MAX_TIMEOUT_MS`]).
        timeout_ms: u64,
    },
}

impl AdaptiveAlgorithm {
    /// Gradient2 with Netflix's defaults.
    pub fn gradient2() -> Self {
        AdaptiveAlgorithm::Gradient2 {
            smoothing: 0.2,
            rtt_tolerance: 1.5,
            long_window: 600,
            queue_size: 4,
        }
    }

    /// Vegas with Netflix's defaults.
    pub fn vegas() -> Self {
        AdaptiveAlgorithm::Vegas {
            alpha: None,
            beta: None,
            smoothing: 1.0,
            probe_multiplier: 30,
        }
    }

    /// AIMD with Netflix's defaults.
    pub fn aimd() -> Self {
        AdaptiveAlgorithm::Aimd {
            backoff_ratio: 0.9,
            timeout_ms: 5_000,
        }
    }

    /// Netflix's default (initial, min, max) limits for the algorithm.
    pub(super) fn default_limits(&self) -> (u32, u32, u32) {
        match self {
            AdaptiveAlgorithm::Gradient2 { .. } => (20, 20, 200),
            AdaptiveAlgorithm::Vegas { .. } => (20, 1, 1_000),
            AdaptiveAlgorithm::Aimd { .. } => (20, 20, 200),
        }
    }

    /// The algorithm's name in logs and `Display`.
    pub fn name(&self) -> &'static str {
        match self {
            AdaptiveAlgorithm::Gradient2 { .. } => "gradient2",
            AdaptiveAlgorithm::Vegas { .. } => "vegas",
            AdaptiveAlgorithm::Aimd { .. } => "aimd",
        }
    }

    fn problems(&self, problems: &mut Problems<'_>) {
        match *self {
            AdaptiveAlgorithm::Gradient2 {
                smoothing,
                rtt_tolerance,
                long_window,
                queue_size,
            } => {
                fraction(problems, "smoothing", smoothing);
                if !(1.0..=MAX_RTT_TOLERANCE).contains(&rtt_tolerance) {
                    problems.add(
                        "rtt_tolerance",
                        format!("must be in 1..={MAX_RTT_TOLERANCE}, got {rtt_tolerance}"),
                    );
                }
                problems.positive_at_most("long_window", long_window, MAX_LONG_WINDOW);
                problems.at_most("queue_size", queue_size, MAX_ADAPTIVE_LIMIT);
            }
            AdaptiveAlgorithm::Vegas {
                alpha,
                beta,
                smoothing,
                probe_multiplier,
            } => {
                let alpha_ok =
                    alpha.is_none_or(|a| problems.at_most("alpha", a, MAX_ADAPTIVE_LIMIT));
                let beta_ok = beta.is_none_or(|b| problems.at_most("beta", b, MAX_ADAPTIVE_LIMIT));
                if let (Some(a), Some(b), true, true) = (alpha, beta, alpha_ok, beta_ok) {
                    if b <= a {
                        problems.add("beta", format!("must be above alpha ({a}), got {b}"));
                    }
                }
                fraction(problems, "smoothing", smoothing);
                problems.positive_at_most(
                    "probe_multiplier",
                    probe_multiplier,
                    MAX_PROBE_MULTIPLIER,
                );
            }
            AdaptiveAlgorithm::Aimd {
                backoff_ratio,
                timeout_ms,
            } => {
                if !(0.5..1.0).contains(&backoff_ratio) {
                    problems.add(
                        "backoff_ratio",
                        format!("must be in [0.5, 1), got {backoff_ratio}"),
                    );
                }
                problems.positive_at_most("timeout_ms", timeout_ms, MAX_TIMEOUT_MS);
            }
        }
    }
}

/// `value` of `field` must be in `(0, 1]`.
fn fraction(problems: &mut Problems<'_>, field: &'static str, value: f64) {
    if !(value > 0.0 && value <= 1.0) {
        problems.add(field, format!("must be in (0, 1], got {value}"));
    }
}

/// An adaptive concurrency rule: calls of `resource` (from the callers
/// `limit_app` selects) are admitted while fewer than the current limit are
/// in flight under the rule; the limit moves with their response times by
/// `algorithm`, between `min_limit` and `max_limit`.
///
/// ```
/// use sentinel_flow_core::adaptive::{AdaptiveAlgorithm, AdaptiveRule};
///
/// let rule = AdaptiveRule::new("GET:/orders", AdaptiveAlgorithm::vegas());
/// assert_eq!((rule.initial_limit, rule.min_limit, rule.max_limit), (20, 1, 1_000));
/// assert!(rule.validate(0).is_ok());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct AdaptiveRule {
    /// An optional identifier, shown in logs and errors.
    pub id: Option<u64>,
    /// The resource the rule guards.
    pub resource: String,
    /// The callers the rule counts: `"default"` (every caller together),
    /// one origin's name, or `"other"` (the callers no other adaptive rule
    /// of the resource names).
    pub limit_app: String,
    /// How the limit moves.
    pub algorithm: AdaptiveAlgorithm,
    /// The limit before any sample (default by algorithm: 20; in
    /// `min_limit..=max_limit`).
    pub initial_limit: u32,
    /// The lowest the limit goes (Gradient2 and AIMD 20, Vegas 1; at
    /// least 1).
    pub min_limit: u32,
    /// The highest the limit goes (Gradient2 and AIMD 200, Vegas 1000; at
    /// most [`MAX_ADAPTIVE_LIMIT`]).
    pub max_limit: u32,
    /// The sample window, in ms: completed calls are gathered for at least
    /// this long, then folded into the algorithm by one exit (default 1000,
    /// Netflix's; in [`MIN_WINDOW_MS`]`..=`[`MAX_WINDOW_MS`]).
    pub window_ms: u64,
    /// The fewest completed calls a window folds (default 10, Netflix's;
    /// in `1..=`[`MAX_MIN_SAMPLES`]): a window with fewer goes on.
    pub min_samples: u32,
}

impl AdaptiveRule {
    /// A rule on `resource` for every caller, with the algorithm's default
    /// limits and a 1 s window of at least 10 calls.
    pub fn new(resource: impl Into<String>, algorithm: AdaptiveAlgorithm) -> Self {
        let (initial_limit, min_limit, max_limit) = algorithm.default_limits();
        AdaptiveRule {
            id: None,
            resource: resource.into(),
            limit_app: ADAPTIVE_APP_DEFAULT.to_owned(),
            algorithm,
            initial_limit,
            min_limit,
            max_limit,
            window_ms: 1_000,
            min_samples: 10,
        }
    }

    /// Checks every field; the first problem found is returned, naming the
    /// field. `index` is the rule's position in the list being loaded.
    pub fn validate(&self, index: usize) -> Result<(), RuleError> {
        self.problems(index).into_iter().next().map_or(Ok(()), Err)
    }

    /// Every problem of the rule, in field order (empty when it is valid).
    pub fn problems(&self, index: usize) -> Vec<RuleError> {
        let mut problems = Problems::new(KIND_NAME, index, &self.resource);
        problems.require_resource();
        if let Some(problem) = origin_problem(&self.limit_app) {
            problems.add("limit_app", problem);
        }
        self.algorithm.problems(&mut problems);
        let min_ok = problems.positive_at_most("min_limit", self.min_limit, MAX_ADAPTIVE_LIMIT);
        let max_ok = problems.positive_at_most("max_limit", self.max_limit, MAX_ADAPTIVE_LIMIT);
        if min_ok && max_ok && self.max_limit < self.min_limit {
            problems.add(
                "max_limit",
                format!(
                    "must be >= min_limit ({}), got {}",
                    self.min_limit, self.max_limit
                ),
            );
        } else if min_ok
            && max_ok
            && !(self.min_limit..=self.max_limit).contains(&self.initial_limit)
        {
            problems.add(
                "initial_limit",
                format!(
                    "must be in min_limit..=max_limit ({}..={}), got {}",
                    self.min_limit, self.max_limit, self.initial_limit
                ),
            );
        }
        if !(MIN_WINDOW_MS..=MAX_WINDOW_MS).contains(&self.window_ms) {
            problems.add(
                "window_ms",
                format!(
                    "must be in {MIN_WINDOW_MS}..={MAX_WINDOW_MS}, got {}",
                    self.window_ms
                ),
            );
        }
        problems.positive_at_most("min_samples", self.min_samples, MAX_MIN_SAMPLES);
        problems.into_vec()
    }

    name_problems!(KIND_NAME);

    /// Whether `limit_app` names one origin (not "default" or "other").
    pub(crate) fn names_origin(&self) -> bool {
        self.limit_app != ADAPTIVE_APP_DEFAULT && self.limit_app != ADAPTIVE_APP_OTHER
    }

    /// The names the rule mentions: its resource, and the origin it names.
    pub(crate) fn names(&self) -> Names<'_> {
        let mut names = Names::new();
        names.push(RuleName::resource(&self.resource));
        if self.names_origin() {
            names.push(RuleName::origin(&self.limit_app));
        }
        names
    }

    /// The most memory the rule may take once loaded as a `C`, with its
    /// names.
    pub(super) fn footprint_compiled_as<C>(&self) -> Footprint {
        Footprint::of_rule::<AdaptiveRule, C>()
            .name(&self.resource)
            .name(&self.limit_app)
    }
}

impl fmt::Display for AdaptiveRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "adaptive rule")?;
        if let Some(id) = self.id {
            write!(f, " #{id}")?;
        }
        write!(
            f,
            " on {}: {} in {}..={} from {} (limit_app {})",
            self.resource,
            self.algorithm.name(),
            self.min_limit,
            self.max_limit,
            self.initial_limit,
            self.limit_app
        )
    }
}

impl Rule for AdaptiveRule {
    fn resource(&self) -> &str {
        &self.resource
    }

    fn block_kind(&self) -> BlockKind {
        BlockKind::Adaptive
    }

    fn limit_app(&self) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(&self.limit_app)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
