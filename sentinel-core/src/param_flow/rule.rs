//! `ParamFlowRule`: what a hot-parameter rule says, with Sentinel's fields
//! and defaults.

use std::any::Any;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;

use crate::rule::footprint::Footprint;
use crate::rule::names::{Names, RuleName, name_problems};
use crate::rule::{Problems, Rule, RuleError};
use crate::{BlockKind, ParamValue};

/// The kind's name in errors and logs.
pub(crate) const KIND_NAME: &str = BlockKind::ParamFlow.as_str();

/// Values a rule tracks by default: 4 000 per second of its duration
/// (Sentinel's `BASE_PARAM_MAX_CAPACITY`)...
pub const BASE_PARAM_CAPACITY: usize = 4_000;
/// ... and never more than 200 000 (Sentinel's `TOTAL_MAX_CAPACITY`).
pub const TOTAL_PARAM_CAPACITY: usize = 200_000;
/// The largest `capacity` a rule may ask for: 1 048 576 values, whose
/// table takes 24 MiB when full ([`PARAM_VALUE_BYTES`] each).
pub const MAX_PARAM_CAPACITY: usize = 1 << 20;
/// The bytes a rule's value table takes per value it can track when full,
/// as the instance's rule memory budget counts them: a way's 64-bit key,
/// 64-bit state and 32-bit stamp, in sets of 8 ways padded to 192 bytes.
pub const PARAM_VALUE_BYTES: usize = 3 * std::mem::size_of::<u64>();
/// The longest `duration_in_sec`: one day.
pub const MAX_PARAM_DURATION_SEC: u64 = 86_400;
/// The longest a rate limiter may queue a request: one hour, in ms.
pub const MAX_PARAM_QUEUEING_TIME_MS: u64 = 3_600_000;
/// The most values with thresholds of their own in one rule.
pub const MAX_PARAM_ITEMS: usize = 10_000;
/// The largest threshold a value can have: `count + burst_count` (and each
/// item's `count + burst_count`) must not exceed it. Token counts share a
/// word with a time stamp (26 bits of tokens, one value reserved).
pub const MAX_PARAM_COUNT: u64 = (1 << 26) - 2;

/// What a hot-parameter rule counts per value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParamFlowGrade {
    /// Passed requests per `duration_in_sec` (a token bucket per value).
    #[default]
    Qps,
    /// Calls inside the resource at once, per value (Sentinel's thread grade).
    Concurrency,
}

/// What a QPS hot-parameter rule does with a request over its threshold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParamControlBehavior {
    /// Refuse it at once.
    #[default]
    Reject,
    /// Queue it: requests with one value pass evenly spaced,
    /// `duration_in_sec / count` apart, waiting less than
    /// `max_queueing_time_ms`.
    RateLimiter,
}

/// The Java type names an item's `class_type` may hold, each with the kind
/// of [`ParamValue`] it describes: what Sentinel's `ParamFlowRuleUtil`
/// parses (the primitive and the boxed names).
pub const PARAM_CLASS_TYPES: [(&str, ParamClassKind); 18] = [
    ("java.lang.String", ParamClassKind::Text),
    ("String", ParamClassKind::Text),
    ("int", ParamClassKind::Integer),
    ("java.lang.Integer", ParamClassKind::Integer),
    ("long", ParamClassKind::Integer),
    ("java.lang.Long", ParamClassKind::Integer),
    ("short", ParamClassKind::Integer),
    ("java.lang.Short", ParamClassKind::Integer),
    ("byte", ParamClassKind::Integer),
    ("java.lang.Byte", ParamClassKind::Integer),
    ("char", ParamClassKind::Text),
    ("java.lang.Character", ParamClassKind::Text),
    ("boolean", ParamClassKind::Boolean),
    ("java.lang.Boolean", ParamClassKind::Boolean),
    ("float", ParamClassKind::Float),
    ("java.lang.Float", ParamClassKind::Float),
    ("double", ParamClassKind::Float),
    ("java.lang.Double", ParamClassKind::Float),
];

/// What kind of [`ParamValue`] a Java class type names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParamClassKind {
    /// A string (`Str`/`InlineStr`): `java.lang.String`, `char`.
    Text,
    /// A whole number (`Int`/`UInt`): `int`, `long`, `short`, `byte`.
    Integer,
    /// `Bool`: `boolean`.
    Boolean,
    /// `Float`: `float`, `double`.
    Float,
}

/// The kind of value the Java class type `name` describes, if it is one
/// of [`PARAM_CLASS_TYPES`], with the table's copy of the name.
pub fn param_class_kind(name: &str) -> Option<(&'static str, ParamClassKind)> {
    PARAM_CLASS_TYPES
        .iter()
        .find(|(known, _)| *known == name)
        .copied()
}

/// How a cluster hot-parameter rule's count becomes the cluster-wide
/// threshold (Sentinel's `thresholdType`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParamClusterThresholdType {
    /// The count is per instance (Sentinel's default for these rules).
    #[default]
    AvgLocal,
    /// The count is the threshold of all instances together.
    Global,
}

/// The longest cluster window of a hot-parameter rule: one day, in ms.
pub const MAX_PARAM_CLUSTER_WINDOW_MS: u64 = 86_400_000;
/// The most buckets in a hot-parameter rule's cluster window.
pub const MAX_PARAM_CLUSTER_SAMPLE_COUNT: u32 = 1_000;

/// A hot-parameter rule's cluster settings (Sentinel's
/// `ParamFlowClusterConfig`), with Sentinel's defaults (see
/// [`ParamFlowRule::cluster_mode`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ParamFlowClusterConfig {
    /// The limit's id across the cluster. Required in cluster mode.
    pub flow_id: Option<u64>,
    /// Per instance (default) or global.
    pub threshold_type: ParamClusterThresholdType,
    /// When the cluster cannot answer: `true` applies the rule locally,
    /// `false` (Sentinel's default for these rules) lets the entry pass.
    pub fallback_to_local_when_fail: bool,
    /// Buckets of the cluster window (default 10, in
    /// 1..=[`MAX_PARAM_CLUSTER_SAMPLE_COUNT`], dividing `window_interval_ms`).
    pub sample_count: u32,
    /// The cluster window, ms (default 1000, in
    /// 1..=[`MAX_PARAM_CLUSTER_WINDOW_MS`]).
    pub window_interval_ms: u64,
}

impl Default for ParamFlowClusterConfig {
    fn default() -> Self {
        ParamFlowClusterConfig {
            flow_id: None,
            threshold_type: ParamClusterThresholdType::AvgLocal,
            fallback_to_local_when_fail: false,
            sample_count: 10,
            window_interval_ms: 1_000,
        }
    }
}

/// A value with a threshold of its own (Sentinel's `ParamFlowItem`): the
/// rule's other values keep [`ParamFlowRule::count`].
#[derive(Clone, Debug, PartialEq)]
pub struct ParamFlowItem {
    /// The argument value.
    pub value: ParamValue,
    /// Its threshold, in the rule's grade.
    pub count: f64,
    /// The Java type the value was given as (Sentinel's `classType`, one of
    /// [`PARAM_CLASS_TYPES`]), kept so that a rule
    /// comes back as it was sent; `None` gives the type the value's kind
    /// has by default (`int` or `long`, `double`, `boolean`,
    /// `java.lang.String`). Matching reads only the value.
    pub class_type: Option<&'static str>,
}

impl ParamFlowItem {
    /// `value` limited to `count`.
    pub fn new(value: impl Into<ParamValue>, count: f64) -> Self {
        ParamFlowItem {
            value: value.into(),
            count,
            class_type: None,
        }
    }

    /// The same item, given as the Java type `class_type`.
    pub fn with_class_type(self, class_type: &'static str) -> Self {
        ParamFlowItem {
            class_type: Some(class_type),
            ..self
        }
    }

    /// Why the item's class type does not describe its value, if it does not.
    fn class_problem(&self) -> Option<String> {
        let name = self.class_type?;
        let Some((_, kind)) = param_class_kind(name) else {
            return Some(format!(
                "class type {name:?} is not a Java type Sentinel parses"
            ));
        };
        let fits = match kind {
            ParamClassKind::Text => self.value.as_str().is_some(),
            ParamClassKind::Integer => {
                matches!(self.value, ParamValue::Int(_) | ParamValue::UInt(_))
            }
            ParamClassKind::Boolean => matches!(self.value, ParamValue::Bool(_)),
            ParamClassKind::Float => matches!(self.value, ParamValue::Float(_)),
        };
        (!fits).then(|| format!("value {:?} is not a {name}", self.value))
    }
}

/// A hot-parameter rule: limit each value of one argument of a resource on
/// its own (each user id, each product id...).
///
/// Thresholds are whole numbers, as in Sentinel (`count` 2.9 admits 2).
///
/// ```
/// use sentinel_flow_core::param_flow::{ParamFlowItem, ParamFlowRule};
///
/// // At most 5 calls per second per user (argument 0), 100 for "admin".
/// let rule = ParamFlowRule {
///     param_flow_item_list: vec![ParamFlowItem::new("admin", 100.0)],
///     ..ParamFlowRule::new("GET:/orders", 0, 5.0)
/// };
/// assert_eq!(rule.duration_in_sec, 1);
/// assert_eq!(rule.effective_capacity(), 4_000);
/// assert!(rule.validate(0).is_ok());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct ParamFlowRule {
    /// An optional identifier, shown in logs and errors.
    pub id: Option<u64>,
    /// The resource the rule guards.
    pub resource: String,
    /// Which argument: 0 is the first, -1 the last. A call without that
    /// argument passes.
    pub param_idx: i32,
    /// What is counted (default QPS).
    pub grade: ParamFlowGrade,
    /// The threshold per value: requests per `duration_in_sec`, or calls at
    /// once.
    pub count: f64,
    /// What happens over the threshold (default reject; QPS only).
    pub control_behavior: ParamControlBehavior,
    /// Rate limiter: a request waits less than this, ms (default 0, as in
    /// Sentinel: no queue; at most [`MAX_PARAM_QUEUEING_TIME_MS`]).
    pub max_queueing_time_ms: u64,
    /// QPS with reject: extra requests a quiet value may pass in a burst
    /// (default 0; `count + burst_count` at most [`MAX_PARAM_COUNT`]).
    pub burst_count: u64,
    /// The window the QPS threshold applies to, seconds (default 1, in
    /// 1..=[`MAX_PARAM_DURATION_SEC`]).
    pub duration_in_sec: u64,
    /// Values with thresholds of their own (at most [`MAX_PARAM_ITEMS`]).
    pub param_flow_item_list: Vec<ParamFlowItem>,
    /// How many values the rule tracks at most (least recently seen ones
    /// are forgotten past it); default
    /// [`effective_capacity`](Self::effective_capacity), at most
    /// [`MAX_PARAM_CAPACITY`]. The instance's rule memory budget counts
    /// the table full: [`PARAM_VALUE_BYTES`] per value.
    pub capacity: Option<usize>,
    /// Whether the rule's threshold is the cluster's (Sentinel's
    /// `clusterMode`, default false); needs a `cluster_config.flow_id`.
    /// A QPS rule in cluster mode asks the instance's cluster service
    /// ([`ClusterTokens::acquire_param`](crate::flow::ClusterTokens::acquire_param))
    /// for each value, counted across instances in the cluster's window;
    /// with no answer, `cluster_config.fallback_to_local_when_fail`
    /// decides. A concurrency-grade rule in cluster mode limits each value
    /// on this instance alone, as in Sentinel.
    pub cluster_mode: bool,
    /// The cluster settings, kept whether or not `cluster_mode` is on.
    pub cluster_config: ParamFlowClusterConfig,
}

impl ParamFlowRule {
    /// A QPS rule on argument `param_idx` that rejects past `count` per
    /// second, with every other field at its default.
    pub fn new(resource: impl Into<String>, param_idx: i32, count: f64) -> Self {
        ParamFlowRule {
            resource: resource.into(),
            param_idx,
            count,
            ..ParamFlowRule::default()
        }
    }

    /// The number of values tracked: `capacity`, or by default
    /// min(4 000 × `duration_in_sec`, 200 000), as Sentinel sizes its LRU.
    pub fn effective_capacity(&self) -> usize {
        self.capacity.unwrap_or_else(|| {
            let duration = usize::try_from(self.duration_in_sec.max(1)).unwrap_or(usize::MAX);
            BASE_PARAM_CAPACITY
                .saturating_mul(duration)
                .min(TOTAL_PARAM_CAPACITY)
        })
    }

    /// Checks every field; the first problem found is returned, naming the
    /// field. `index` is the rule's position in the list being loaded.
    pub fn validate(&self, index: usize) -> Result<(), RuleError> {
        self.problems(index).into_iter().next().map_or(Ok(()), Err)
    }

    /// Every problem of the rule, in field order, one per item at most
    /// (empty when it is valid); [`validate`](Self::validate) returns the
    /// first.
    pub fn problems(&self, index: usize) -> Vec<RuleError> {
        let mut problems = Problems::new(KIND_NAME, index, &self.resource);
        problems.require_resource();
        if let Some(problem) = count_problem(self.count, self.burst_count) {
            problems.add("count", problem);
        }
        problems.positive_at_most(
            "duration_in_sec",
            self.duration_in_sec,
            MAX_PARAM_DURATION_SEC,
        );
        problems.at_most(
            "max_queueing_time_ms",
            self.max_queueing_time_ms,
            MAX_PARAM_QUEUEING_TIME_MS,
        );
        if self.grade == ParamFlowGrade::Concurrency
            && self.control_behavior != ParamControlBehavior::Reject
        {
            problems.add(
                "control_behavior",
                format!(
                    "{:?} needs grade qps; the concurrency grade only rejects",
                    self.control_behavior
                ),
            );
        }
        if self.cluster_mode {
            let c = &self.cluster_config;
            if c.flow_id.is_none() {
                problems.add(
                    "cluster_config.flow_id",
                    "is required when cluster_mode is on",
                );
            }
            problems.positive_at_most(
                "cluster_config.window_interval_ms",
                c.window_interval_ms,
                MAX_PARAM_CLUSTER_WINDOW_MS,
            );
            problems.positive_at_most(
                "cluster_config.sample_count",
                c.sample_count,
                MAX_PARAM_CLUSTER_SAMPLE_COUNT,
            );
            if c.sample_count > 0 && c.window_interval_ms % u64::from(c.sample_count) != 0 {
                problems.add(
                    "cluster_config.sample_count",
                    format!(
                        "must divide window_interval_ms {}, got {}",
                        c.window_interval_ms, c.sample_count
                    ),
                );
            }
        }
        // Before the items: a list past its bound ends the checks.
        match self.capacity {
            Some(0) => problems.add("capacity", "must be > 0"),
            Some(capacity) if capacity > MAX_PARAM_CAPACITY => {
                problems.add(
                    "capacity",
                    format!("must be <= {MAX_PARAM_CAPACITY}, got {capacity}"),
                );
            }
            _ => {}
        }
        let items = self.param_flow_item_list.len();
        if items > MAX_PARAM_ITEMS {
            problems.add(
                "param_flow_item_list",
                format!("must hold at most {MAX_PARAM_ITEMS} items, got {items}"),
            );
            return problems.into_vec();
        }
        // Where each value is first listed: a list may hold many items.
        let mut first_at: HashMap<&ParamValue, usize> = HashMap::new();
        for (i, item) in self.param_flow_item_list.iter().enumerate() {
            let repeats = first_item(&mut first_at, &item.value, i);
            if matches!(item.value, ParamValue::List(_)) {
                problems.add(
                    "param_flow_item_list",
                    format!(
                        "item {i}: a list ({}) is not a value; give its elements as items",
                        item.value
                    ),
                );
            } else if let Some(problem) = count_problem(item.count, self.burst_count) {
                problems.add(
                    "param_flow_item_list",
                    format!("item {i} ({:?}): count {problem}", item.value),
                );
            } else if let Some(problem) = item.class_problem() {
                problems.add("param_flow_item_list", format!("item {i}: {problem}"));
            } else if let Some(first) = repeats {
                problems.add(
                    "param_flow_item_list",
                    format!(
                        "item {i} ({:?}) repeats item {first}: one threshold per value",
                        item.value
                    ),
                );
            }
        }
        problems.into_vec()
    }

    name_problems!(KIND_NAME);

    /// The most memory the rule may take once loaded: the rule, its
    /// resource's name, its items (each kept in the rule, in the compiled
    /// rule's copy and in the compiled lookup, a string's text once), and
    /// its value table full, compiled as a `C`; the folder's root names
    /// `C` (`footprint`).
    pub(super) fn footprint_compiled_as<C>(&self) -> Footprint {
        let per_item = 3 * std::mem::size_of::<ParamFlowItem>() + 16;
        let items = self.param_flow_item_list.iter().fold(0u64, |bytes, item| {
            let text = match &item.value {
                ParamValue::Str(text) => text.len() + 16,
                _ => 0,
            };
            bytes.saturating_add((per_item + text) as u64)
        });
        // A table is sets of 8 ways: a capacity is rounded up to one.
        let values = self
            .effective_capacity()
            .max(1)
            .div_ceil(8)
            .saturating_mul(8);
        let table = (values as u64).saturating_mul(PARAM_VALUE_BYTES as u64);
        Footprint::of_rule::<ParamFlowRule, C>()
            .name(&self.resource)
            .part("param_flow_item_list", items)
            .part("capacity", table)
    }

    /// The names the rule mentions: its resource.
    pub(crate) fn names(&self) -> Names<'_> {
        std::iter::once(RuleName::resource(&self.resource)).collect()
    }
}

/// The index of the item listed before `at` with `value`, or `None` (and
/// `value` recorded at `at`) when it is the first.
fn first_item<'v>(
    first_at: &mut HashMap<&'v ParamValue, usize>,
    value: &'v ParamValue,
    at: usize,
) -> Option<usize> {
    match first_at.entry(value) {
        Entry::Occupied(first) => Some(*first.get()),
        Entry::Vacant(slot) => {
            slot.insert(at);
            None
        }
    }
}

/// Why `count` (with `burst`) is not a usable threshold, if it is not.
fn count_problem(count: f64, burst: u64) -> Option<String> {
    if !count.is_finite() || count < 0.0 {
        return Some(format!("must be a finite number >= 0, got {count}"));
    }
    // `count` is finite and >= 0 here, so the cast saturates at worst.
    let max = (count as u64).saturating_add(burst);
    if max > MAX_PARAM_COUNT {
        return Some(format!(
            "{count} + burst_count {burst} must be <= {MAX_PARAM_COUNT}"
        ));
    }
    None
}

impl Default for ParamFlowRule {
    fn default() -> Self {
        ParamFlowRule {
            id: None,
            resource: String::new(),
            param_idx: 0,
            grade: ParamFlowGrade::Qps,
            count: 0.0,
            control_behavior: ParamControlBehavior::Reject,
            max_queueing_time_ms: 0,
            burst_count: 0,
            duration_in_sec: 1,
            param_flow_item_list: Vec::new(),
            capacity: None,
            cluster_mode: false,
            cluster_config: ParamFlowClusterConfig::default(),
        }
    }
}

impl fmt::Display for ParamFlowRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "param flow rule")?;
        if let Some(id) = self.id {
            write!(f, " #{id}")?;
        }
        write!(
            f,
            " on {} arg {}: {:?} <= {} per {} s ({:?}",
            self.resource,
            self.param_idx,
            self.grade,
            self.count,
            self.duration_in_sec,
            self.control_behavior
        )?;
        if self.burst_count > 0 {
            write!(f, ", burst {}", self.burst_count)?;
        }
        if !self.param_flow_item_list.is_empty() {
            write!(f, ", {} item(s)", self.param_flow_item_list.len())?;
        }
        write!(f, ")")
    }
}

impl Rule for ParamFlowRule {
    fn resource(&self) -> &str {
        &self.resource
    }

    fn block_kind(&self) -> BlockKind {
        BlockKind::ParamFlow
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(rule: &ParamFlowRule) -> &'static str {
        rule.validate(3).expect_err("should be refused").field
    }

    #[test]
    fn defaults_follow_sentinel() {
        let rule = ParamFlowRule::new("r", -1, 10.0);
        assert_eq!(rule.grade, ParamFlowGrade::Qps);
        assert_eq!(rule.control_behavior, ParamControlBehavior::Reject);
        assert_eq!(rule.max_queueing_time_ms, 0);
        assert_eq!(rule.burst_count, 0);
        assert_eq!(rule.duration_in_sec, 1);
        assert_eq!(rule.effective_capacity(), 4_000);
        let long = ParamFlowRule {
            duration_in_sec: 10,
            ..rule.clone()
        };
        assert_eq!(long.effective_capacity(), 40_000);
        let day = ParamFlowRule {
            duration_in_sec: 86_400,
            ..rule.clone()
        };
        assert_eq!(day.effective_capacity(), 200_000);
        let own = ParamFlowRule {
            capacity: Some(7),
            ..rule.clone()
        };
        assert_eq!(own.effective_capacity(), 7);
        assert!(rule.validate(0).is_ok());
        assert_eq!(rule.block_kind(), BlockKind::ParamFlow);
        assert_eq!(Rule::resource(&rule), "r");
        assert_eq!(
            rule.to_string(),
            "param flow rule on r arg -1: Qps <= 10 per 1 s (Reject)"
        );
    }

    #[test]
    fn every_bad_field_is_named() {
        let ok = ParamFlowRule::new("r", 0, 10.0);
        let error = ParamFlowRule {
            resource: " ".into(),
            ..ok.clone()
        }
        .validate(3)
        .unwrap_err();
        assert_eq!(
            (error.kind, error.index, error.field),
            ("param_flow", 3, "resource")
        );

        for count in [f64::NAN, -1.0, f64::INFINITY, 1e12] {
            let rule = ParamFlowRule {
                count,
                ..ok.clone()
            };
            assert_eq!(field_of(&rule), "count", "{count}");
        }
        let burst = ParamFlowRule {
            burst_count: MAX_PARAM_COUNT,
            ..ok.clone()
        };
        assert_eq!(field_of(&burst), "count");
        let edge = ParamFlowRule {
            count: 0.0,
            burst_count: MAX_PARAM_COUNT,
            ..ok.clone()
        };
        assert!(edge.validate(0).is_ok());

        let rule = ParamFlowRule {
            duration_in_sec: 0,
            ..ok.clone()
        };
        assert_eq!(field_of(&rule), "duration_in_sec");
        let rule = ParamFlowRule {
            grade: ParamFlowGrade::Concurrency,
            control_behavior: ParamControlBehavior::RateLimiter,
            ..ok.clone()
        };
        assert_eq!(field_of(&rule), "control_behavior");
        let rule = ParamFlowRule {
            capacity: Some(0),
            ..ok.clone()
        };
        assert_eq!(field_of(&rule), "capacity");
        let rule = ParamFlowRule {
            capacity: Some(MAX_PARAM_CAPACITY + 1),
            ..ok.clone()
        };
        assert_eq!(field_of(&rule), "capacity");

        let items = |list: Vec<ParamFlowItem>| ParamFlowRule {
            param_flow_item_list: list,
            ..ok.clone()
        };
        for count in [f64::NAN, -0.5, f64::NEG_INFINITY] {
            let rule = items(vec![ParamFlowItem::new("a", count)]);
            assert_eq!(field_of(&rule), "param_flow_item_list", "{count}");
        }
        let twice = items(vec![
            ParamFlowItem::new(7u8, 1.0),
            ParamFlowItem::new("b", 1.0),
            ParamFlowItem::new(7i64, 2.0),
        ]);
        let error = twice.validate(0).unwrap_err();
        assert_eq!(error.field, "param_flow_item_list");
        assert!(
            error.message.contains("repeats item 0"),
            "{}",
            error.message
        );
        let list = items(vec![ParamFlowItem::new(vec![ParamValue::from(1)], 1.0)]);
        assert_eq!(field_of(&list), "param_flow_item_list");
        assert!(
            items(vec![ParamFlowItem::new("a", 0.0)])
                .validate(0)
                .is_ok()
        );
    }
}
