//! `FlowRule`: what a flow rule says, with Sentinel's fields and defaults.

use std::any::Any;
use std::fmt;

use super::cluster_config::ClusterFlowConfig;
use crate::BlockKind;
use crate::rule::footprint::Footprint;
use crate::rule::names::{NameOf, Names, RuleName, name_problems};
use crate::rule::{Problems, Rule, RuleError, origin_problem};

/// The kind's name in errors and logs.
pub(crate) const KIND_NAME: &str = BlockKind::Flow.as_str();

/// `limit_app` value: the rule counts every caller together.
pub const LIMIT_APP_DEFAULT: &str = "default";
/// `limit_app` value: the rule counts, per origin, the callers that no other
/// rule of the resource names.
pub const LIMIT_APP_OTHER: &str = "other";

/// The longest window a flow rule (or its cluster config) may count over:
/// one hour, in ms.
pub const MAX_STAT_INTERVAL_MS: u64 = 3_600_000;
/// The most buckets a flow rule's own window (or its cluster window) may
/// have: one-second buckets over the longest window. A bucket takes 48
/// bytes, and a few hundred more once two threads contend on it.
pub const MAX_STAT_SAMPLE_COUNT: u32 = 3_600;
/// The longest warm-up: one hour, in seconds.
pub const MAX_WARM_UP_PERIOD_SEC: u32 = 3_600;
/// The largest warm-up cold factor.
pub const MAX_WARM_UP_COLD_FACTOR: u32 = 1_000;
/// The longest a rate limiter may queue a request: one hour, in ms.
pub const MAX_QUEUEING_TIME_MS: u64 = 3_600_000;

/// What a flow rule counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FlowGrade {
    /// Passed requests per second.
    #[default]
    Qps,
    /// Calls inside the resource at once (Sentinel's thread grade).
    Concurrency,
}

/// Whose statistics a flow rule reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FlowStrategy {
    /// The resource's own (or the origin's, per `limit_app`).
    #[default]
    Direct,
    /// Another resource's (`ref_resource`): limit this resource when that one
    /// is busy.
    Relate,
    /// This resource's within one context (`ref_resource` names the context):
    /// limit only the calls that come in through that entrance.
    Chain,
}

/// What a flow rule does with a request over its threshold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ControlBehavior {
    /// Refuse it at once.
    #[default]
    Reject,
    /// Refuse it, with a threshold that rises from `count / cold_factor` to
    /// `count` over `warm_up_period_sec` after a quiet spell.
    WarmUp,
    /// Queue it: let requests through evenly spaced, `1 / count` s apart,
    /// waiting at most `max_queueing_time_ms`.
    RateLimiter,
    /// Queue it, spaced by the warm-up rate.
    WarmUpRateLimiter,
}

/// A flow rule: limit a resource's QPS or concurrency.
///
/// ```
/// use sentinel_flow_core::flow::{ControlBehavior, FlowRule};
///
/// let rule = FlowRule {
///     control_behavior: ControlBehavior::WarmUp,
///     ..FlowRule::new("GET:/orders", 100.0)
/// };
/// assert_eq!(rule.warm_up_period_sec, 10);
/// assert_eq!(rule.limit_app, "default");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct FlowRule {
    /// An optional identifier, shown in logs and errors.
    pub id: Option<u64>,
    /// The resource the rule guards.
    pub resource: String,
    /// What is counted (default QPS).
    pub grade: FlowGrade,
    /// The threshold: requests per second or concurrent calls. Any finite
    /// number >= 0: a threshold allocates nothing, and every computation on
    /// it saturates (a count of `u64::MAX` admits everything).
    pub count: f64,
    /// Whose calls count: [`LIMIT_APP_DEFAULT`] (everyone, the default),
    /// [`LIMIT_APP_OTHER`], or one origin's name.
    pub limit_app: String,
    /// Whose statistics are read (default direct).
    pub strategy: FlowStrategy,
    /// The resource (relate) or context (chain) the strategy refers to.
    pub ref_resource: Option<String>,
    /// What happens over the threshold (default reject). The concurrency
    /// grade only rejects: another behaviour is kept (a rule comes back as
    /// it was given) but ignored, as Sentinel ignores it.
    pub control_behavior: ControlBehavior,
    /// Warm-up: seconds from cold to full threshold (default 10, in
    /// 1..=[`MAX_WARM_UP_PERIOD_SEC`] for the warm-up behaviours).
    pub warm_up_period_sec: u32,
    /// Warm-up: a cold resource admits `count / cold_factor` (default 3, in
    /// 2..=[`MAX_WARM_UP_COLD_FACTOR`] for the warm-up behaviours).
    pub warm_up_cold_factor: u32,
    /// Rate limiter: the longest a request may wait, ms (default 500, at
    /// most [`MAX_QUEUEING_TIME_MS`]).
    pub max_queueing_time_ms: u64,
    /// The window the rule's QPS is read over, ms (default 1000, in
    /// 1..=[`MAX_STAT_INTERVAL_MS`]). A rule with another interval keeps a
    /// window of its own.
    pub stat_interval_ms: u64,
    /// Buckets in that window of its own (default 2, in
    /// 1..=[`MAX_STAT_SAMPLE_COUNT`], dividing `stat_interval_ms`): more
    /// buckets, smoother edges, more memory (48 bytes each, a few hundred
    /// more once contended). Unused at the default interval.
    pub stat_sample_count: u32,
    /// Whether the threshold is the cluster's: permits come from the
    /// instance's [`ClusterTokens`](super::ClusterTokens) service (default
    /// false). Needs a `cluster_config.flow_id`; the control behaviour
    /// applies only when the rule falls back to local counting. A
    /// concurrency-grade rule in cluster mode is Sentinel's cluster
    /// concurrency: each entry holds a token of the cluster's (at most
    /// `count` held at once across the instances) from its entry to its
    /// exit; see [`ClusterFlowConfig::resource_timeout`] and
    /// [`ClusterFlowConfig::client_offline_time`] for tokens never given
    /// back.
    ///
    /// The rule falls back in two cases, told apart. With no service
    /// attached ([`Sentinel::set_cluster_tokens`](crate::Sentinel::set_cluster_tokens),
    /// `RedisCluster::attach`) it is decided by its fallback as well (its
    /// count on this instance alone, or a pass): a misconfiguration, so a warning naming the resources is logged each
    /// time such rules are loaded with no service attached and when the
    /// service is taken away while they are in force, the resource's
    /// snapshot shows them in
    /// [`cluster_rules_unattached`](crate::snapshot::ResourceSnapshot::cluster_rules_unattached),
    /// and the Prometheus text in the gauge
    /// `sentinel_cluster_rules_unattached`. With a service attached that
    /// cannot answer (Redis down, past the wait budget), the fallback
    /// (`cluster_config.fallback_to_local_when_fail`) decides too, and the
    /// service shows it in its own state (for
    /// `sentinel-flow-cluster`, `fallback` in its snapshot and
    /// `sentinel_cluster_fallback`). [`Sentinel::cluster_status`](crate::Sentinel::cluster_status)
    /// tells the two apart.
    pub cluster_mode: bool,
    /// The cluster settings, read when `cluster_mode` is on.
    pub cluster_config: ClusterFlowConfig,
}

impl FlowRule {
    /// A QPS rule that rejects past `count`, with every other field at its
    /// default.
    pub fn new(resource: impl Into<String>, count: f64) -> Self {
        FlowRule {
            resource: resource.into(),
            count,
            ..FlowRule::default()
        }
    }

    /// Checks every field; the first problem found is returned, naming the
    /// field. `index` is the rule's position in the list being loaded.
    pub fn validate(&self, index: usize) -> Result<(), RuleError> {
        self.problems(index).into_iter().next().map_or(Ok(()), Err)
    }

    /// Every problem of the rule, in field order (empty when it is valid);
    /// [`validate`](Self::validate) returns the first.
    pub fn problems(&self, index: usize) -> Vec<RuleError> {
        let mut problems = Problems::new(KIND_NAME, index, &self.resource);
        problems.require_resource();
        problems.non_negative("count", self.count);
        if let Some(problem) = origin_problem(&self.limit_app) {
            problems.add("limit_app", problem);
        }
        let reference = self.ref_resource.as_deref().map(str::trim).unwrap_or("");
        match self.strategy {
            FlowStrategy::Direct => {}
            FlowStrategy::Relate if reference.is_empty() => {
                problems.add("ref_resource", "is required by the relate strategy");
            }
            FlowStrategy::Chain if reference.is_empty() => {
                problems.add(
                    "ref_resource",
                    "is required by the chain strategy (the context name)",
                );
            }
            FlowStrategy::Chain if reference == crate::DEFAULT_CONTEXT => {
                problems.add(
                    "ref_resource",
                    format!(
                        "the chain strategy needs a named context, not {}",
                        crate::DEFAULT_CONTEXT
                    ),
                );
            }
            FlowStrategy::Relate | FlowStrategy::Chain => {}
        }
        // The concurrency grade only rejects: a behaviour left over from a
        // QPS rule is kept but ignored, as Sentinel ignores it.
        let warms = self.grade == FlowGrade::Qps
            && matches!(
                self.control_behavior,
                ControlBehavior::WarmUp | ControlBehavior::WarmUpRateLimiter
            );
        if warms {
            problems.positive_at_most(
                "warm_up_period_sec",
                self.warm_up_period_sec,
                MAX_WARM_UP_PERIOD_SEC,
            );
            if self.warm_up_cold_factor <= 1 {
                problems.add(
                    "warm_up_cold_factor",
                    format!("must be > 1, got {}", self.warm_up_cold_factor),
                );
            } else {
                problems.at_most(
                    "warm_up_cold_factor",
                    self.warm_up_cold_factor,
                    MAX_WARM_UP_COLD_FACTOR,
                );
            }
        }
        problems.at_most(
            "max_queueing_time_ms",
            self.max_queueing_time_ms,
            MAX_QUEUEING_TIME_MS,
        );
        window_problems(
            &mut problems,
            ("stat_interval_ms", self.stat_interval_ms),
            ("stat_sample_count", self.stat_sample_count),
        );
        cluster_config_problems(self, &mut problems);
        problems.into_vec()
    }

    name_problems!(KIND_NAME);

    /// The most memory the rule may take once loaded: the rule, its names,
    /// and its own window with every bucket contended.
    pub(crate) fn footprint(&self) -> Footprint {
        let names = [&self.resource, &self.limit_app]
            .into_iter()
            .chain(&self.ref_resource);
        let footprint = names.fold(
            Footprint::of_rule::<FlowRule, super::CompiledFlow>(),
            |footprint, name| footprint.name(name),
        );
        match super::own_window(self) {
            Some(shape) => footprint.part(
                "stat_sample_count",
                u64::from(shape.sample_count()).saturating_mul(bucket_bytes()),
            ),
            None => footprint,
        }
    }

    /// Whether `limit_app` names one origin (not "default" or "other").
    pub(crate) fn names_origin(&self) -> bool {
        self.limit_app != LIMIT_APP_DEFAULT && self.limit_app != LIMIT_APP_OTHER
    }

    /// The names the rule mentions: its resource, the origin it names, and
    /// a related resource's or a chain's context's name.
    pub(crate) fn names(&self) -> Names<'_> {
        let mut names = Names::new();
        names.push(RuleName::resource(&self.resource));
        if self.names_origin() {
            names.push(RuleName::origin(&self.limit_app));
        }
        let reference = self.ref_resource.as_deref().map(str::trim);
        let of = match self.strategy {
            FlowStrategy::Direct => None,
            FlowStrategy::Relate => Some(NameOf::Resource),
            FlowStrategy::Chain => Some(NameOf::Context),
        };
        if let (Some(of), Some(name)) = (of, reference.filter(|r| !r.is_empty())) {
            names.push(RuleName {
                field: "ref_resource",
                of,
                name,
            });
        }
        names
    }
}

/// The problems of a window's interval and bucket count (a rule's own, or
/// its cluster window), each named by its field.
pub(crate) fn window_problems(
    problems: &mut Problems<'_>,
    (interval_field, interval_ms): (&'static str, u64),
    (samples_field, samples): (&'static str, u32),
) {
    let interval_ok = problems.positive_at_most(interval_field, interval_ms, MAX_STAT_INTERVAL_MS);
    if problems.positive_at_most(samples_field, samples, MAX_STAT_SAMPLE_COUNT)
        && interval_ok
        && interval_ms % u64::from(samples) != 0
    {
        problems.add(
            samples_field,
            format!(
                "must divide {} ({interval_ms} ms into {samples} buckets)",
                interval_field.rsplit('.').next().unwrap_or(interval_field)
            ),
        );
    }
}

/// The cluster fields' problems of one rule.
fn cluster_config_problems(rule: &FlowRule, problems: &mut Problems<'_>) {
    if !rule.cluster_mode {
        return;
    }
    let c = &rule.cluster_config;
    if c.flow_id.is_none() {
        problems.add(
            "cluster_config.flow_id",
            "is required when cluster_mode is on",
        );
    }
    window_problems(
        problems,
        ("cluster_config.window_interval_ms", c.window_interval_ms),
        ("cluster_config.sample_count", c.sample_count),
    );
}

/// The most one bucket of a rule's own window takes: its slot in the ring
/// (the bucket and its start time) and, once two threads contend on it,
/// its cells: one padded line of counters per CPU, rounded up to a power
/// of two, 2 to 64 (as `stat::adder` sizes them), with their box.
fn bucket_bytes() -> u64 {
    const CELL: u64 = 128;
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let cells = cpus.next_power_of_two().clamp(2, 64) as u64;
    let slot = (std::mem::size_of::<crate::stat::MetricBucket>() + 8) as u64;
    slot + 2 * 16 + cells * CELL
}

impl Default for FlowRule {
    fn default() -> Self {
        FlowRule {
            id: None,
            resource: String::new(),
            grade: FlowGrade::Qps,
            count: 0.0,
            limit_app: LIMIT_APP_DEFAULT.to_owned(),
            strategy: FlowStrategy::Direct,
            ref_resource: None,
            control_behavior: ControlBehavior::Reject,
            warm_up_period_sec: 10,
            warm_up_cold_factor: 3,
            max_queueing_time_ms: 500,
            stat_interval_ms: 1_000,
            stat_sample_count: 2,
            cluster_mode: false,
            cluster_config: ClusterFlowConfig::default(),
        }
    }
}

impl fmt::Display for FlowRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "flow rule")?;
        if let Some(id) = self.id {
            write!(f, " #{id}")?;
        }
        write!(
            f,
            " on {}: {:?} <= {} ({:?}, limit_app {}",
            self.resource, self.grade, self.count, self.control_behavior, self.limit_app
        )?;
        if let Some(reference) = &self.ref_resource {
            write!(f, ", {:?} {reference}", self.strategy)?;
        }
        if let (true, Some(id)) = (self.cluster_mode, self.cluster_config.flow_id) {
            write!(
                f,
                ", cluster flow {id} {:?}",
                self.cluster_config.threshold_type
            )?;
        }
        write!(f, ")")
    }
}

impl Rule for FlowRule {
    fn resource(&self) -> &str {
        &self.resource
    }

    fn block_kind(&self) -> BlockKind {
        BlockKind::Flow
    }

    fn limit_app(&self) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(&self.limit_app)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Problems between rules: every cluster rule of one flow id must agree on
/// the threshold (grade, count, threshold type, window), since they share
/// one window (or one set of concurrency tokens). Each later rule that disagrees with the first is reported.
pub fn cluster_problems(rules: &[FlowRule]) -> Vec<RuleError> {
    let mut first: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    let mut errors = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        let Some(id) = rule.cluster_config.flow_id.filter(|_| rule.cluster_mode) else {
            continue;
        };
        let j = *first.entry(id).or_insert(i);
        let other = &rules[j];
        let (a, b) = (&rule.cluster_config, &other.cluster_config);
        if rule.grade != other.grade {
            errors.push(RuleError::new(
                KIND_NAME,
                i,
                &rule.resource,
                "cluster_config.flow_id",
                format!(
                    "flow id {id} is also rule {j}'s (on {}) of another grade ({:?}); rules \
                     sharing a flow id must agree on the grade",
                    other.resource, other.grade
                ),
            ));
            continue;
        }
        let same = rule.count.to_bits() == other.count.to_bits()
            && a.threshold_type == b.threshold_type
            && a.window_interval_ms == b.window_interval_ms
            && a.sample_count == b.sample_count;
        if !same {
            errors.push(RuleError::new(
                KIND_NAME,
                i,
                &rule.resource,
                "cluster_config.flow_id",
                format!(
                    "flow id {id} is also rule {j}'s (on {}) with another threshold \
                     (count {} {:?} per {} ms / {}); rules sharing a flow id must agree \
                     on count, threshold_type, window_interval_ms and sample_count",
                    other.resource,
                    other.count,
                    b.threshold_type,
                    b.window_interval_ms,
                    b.sample_count
                ),
            ));
        }
    }
    errors
}
