//! `DegradeRule`: what a circuit-breaking rule says, with Sentinel's fields
//! and defaults.

use std::any::Any;
use std::fmt;

use crate::BlockKind;
use crate::rule::footprint::Footprint;
use crate::rule::names::{Names, RuleName, name_problems};
use crate::rule::{Problems, Rule, RuleError};

/// The kind's name in errors and logs.
pub(crate) const KIND_NAME: &str = BlockKind::Degrade.as_str();

/// The longest statistics window a rule may ask for, in milliseconds (two
/// minutes, Sentinel's bound).
pub const MAX_STAT_INTERVAL_MS: u64 = 120_000;

/// The longest a breaker may stay open before it probes: one day, in
/// seconds.
pub const MAX_TIME_WINDOW_SEC: u32 = 86_400;

/// The most calls a window may need before it can trip the breaker.
pub const MAX_MIN_REQUEST_AMOUNT: u64 = 1_000_000_000;

/// The largest slow-call threshold (`count` of the slow request ratio
/// grade): one hour, in ms.
pub const MAX_SLOW_RT_MS: f64 = 3_600_000.0;

/// The largest error count threshold (`count` of the error count grade).
pub const MAX_ERROR_COUNT: f64 = 1_000_000_000.0;

/// The most probes a half-open breaker may let through at once.
pub const MAX_PROBE_NUM: u32 = (1 << 15) - 1;

/// What trips a circuit breaker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum DegradeGrade {
    /// The share of slow calls (response time over `count` ms) in the window
    /// exceeds `slow_ratio_threshold` (Sentinel's RT grade).
    #[default]
    SlowRequestRatio,
    /// The share of calls that recorded an error exceeds `count` (0..=1).
    ErrorRatio,
    /// The number of calls that recorded an error exceeds `count`.
    ErrorCount,
}

/// A circuit-breaking rule: stop calling a resource for `time_window_sec`
/// once its calls are too slow or fail too often, then let `probe_num`
/// calls through to see whether it recovered.
///
/// ```
/// use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
///
/// // Open for 30 s when over half the calls in a second take more than 200 ms.
/// let rule = DegradeRule {
///     slow_ratio_threshold: 0.5,
///     time_window_sec: 30,
///     ..DegradeRule::new("GET:/orders", DegradeGrade::SlowRequestRatio, 200.0)
/// };
/// assert_eq!(rule.min_request_amount, 5);
/// assert!(rule.validate(0).is_ok());
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct DegradeRule {
    /// An optional identifier, shown in logs and errors.
    pub id: Option<u64>,
    /// The resource the rule guards.
    pub resource: String,
    /// What trips the breaker (default slow request ratio).
    pub grade: DegradeGrade,
    /// The threshold, by grade: the largest response time that is not slow,
    /// in ms (rounded to a whole ms, at most [`MAX_SLOW_RT_MS`]); the error
    /// ratio, 0..=1; the error count (at most [`MAX_ERROR_COUNT`]).
    pub count: f64,
    /// How long the breaker stays open before it probes, in seconds
    /// (default 10, in 1..=[`MAX_TIME_WINDOW_SEC`]).
    pub time_window_sec: u32,
    /// Calls a window needs before it can trip the breaker (default 5, in
    /// 1..=[`MAX_MIN_REQUEST_AMOUNT`]).
    pub min_request_amount: u64,
    /// Slow request ratio grade: the share of slow calls over which the
    /// breaker trips, 0..=1 (default 1.0, which trips when every call is
    /// slow).
    pub slow_ratio_threshold: f64,
    /// The statistics window, in ms (default 1000, at most
    /// [`MAX_STAT_INTERVAL_MS`]).
    pub stat_interval_ms: u64,
    /// Calls let through when the open time is over; the breaker closes when
    /// all of them complete well and opens again at the first that does not
    /// (default 1, at most [`MAX_PROBE_NUM`]).
    pub probe_num: u32,
}

impl DegradeRule {
    /// A rule of `grade` with threshold `count` and every other field at its
    /// default: open for 10 s, at least 5 calls per 1000 ms window, slow
    /// ratio 1.0, one probe.
    pub fn new(resource: impl Into<String>, grade: DegradeGrade, count: f64) -> Self {
        DegradeRule {
            resource: resource.into(),
            grade,
            count,
            ..DegradeRule::default()
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
        if problems.non_negative("count", self.count) {
            let (max, what) = match self.grade {
                DegradeGrade::ErrorRatio => (1.0, "an error ratio"),
                DegradeGrade::SlowRequestRatio => (MAX_SLOW_RT_MS, "a response time in ms"),
                DegradeGrade::ErrorCount => (MAX_ERROR_COUNT, "an error count"),
            };
            if self.count > max {
                problems.add(
                    "count",
                    format!("is {what} and must be in 0..={max}, got {}", self.count),
                );
            }
        }
        problems.positive_at_most("time_window_sec", self.time_window_sec, MAX_TIME_WINDOW_SEC);
        problems.positive_at_most(
            "min_request_amount",
            self.min_request_amount,
            MAX_MIN_REQUEST_AMOUNT,
        );
        if !(0.0..=1.0).contains(&self.slow_ratio_threshold) {
            problems.add(
                "slow_ratio_threshold",
                format!("must be in 0..=1, got {}", self.slow_ratio_threshold),
            );
        }
        if self.stat_interval_ms == 0 || self.stat_interval_ms > MAX_STAT_INTERVAL_MS {
            problems.add(
                "stat_interval_ms",
                format!(
                    "must be in 1..={MAX_STAT_INTERVAL_MS}, got {}",
                    self.stat_interval_ms
                ),
            );
        }
        if self.probe_num == 0 || self.probe_num > MAX_PROBE_NUM {
            problems.add(
                "probe_num",
                format!("must be in 1..={MAX_PROBE_NUM}, got {}", self.probe_num),
            );
        }
        problems.into_vec()
    }

    name_problems!(KIND_NAME);

    /// The most memory the rule may take once loaded as a `C` (its
    /// breaker, window included) with its resource's name; the folder's
    /// root names `C` (`footprint`).
    pub(super) fn footprint_compiled_as<C>(&self) -> Footprint {
        Footprint::of_rule::<DegradeRule, C>().name(&self.resource)
    }

    /// The names the rule mentions: its resource.
    pub(crate) fn names(&self) -> Names<'_> {
        std::iter::once(RuleName::resource(&self.resource)).collect()
    }
}

impl Default for DegradeRule {
    fn default() -> Self {
        DegradeRule {
            id: None,
            resource: String::new(),
            grade: DegradeGrade::SlowRequestRatio,
            count: 0.0,
            time_window_sec: 10,
            min_request_amount: 5,
            slow_ratio_threshold: 1.0,
            stat_interval_ms: 1_000,
            probe_num: 1,
        }
    }
}

impl fmt::Display for DegradeRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "degrade rule")?;
        if let Some(id) = self.id {
            write!(f, " #{id}")?;
        }
        write!(f, " on {}: {:?}", self.resource, self.grade)?;
        match self.grade {
            DegradeGrade::SlowRequestRatio => write!(
                f,
                " > {} ms at ratio {}",
                self.count, self.slow_ratio_threshold
            )?,
            DegradeGrade::ErrorRatio | DegradeGrade::ErrorCount => write!(f, " > {}", self.count)?,
        }
        write!(
            f,
            " (open {} s, min {} in {} ms, {} probe(s))",
            self.time_window_sec, self.min_request_amount, self.stat_interval_ms, self.probe_num
        )
    }
}

impl Rule for DegradeRule {
    fn resource(&self) -> &str {
        &self.resource
    }

    fn block_kind(&self) -> BlockKind {
        BlockKind::Degrade
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(grade: DegradeGrade, count: f64) -> DegradeRule {
        DegradeRule::new("res", grade, count)
    }

    fn refused_field(rule: &DegradeRule) -> &'static str {
        rule.validate(3).expect_err("rule should be refused").field
    }

    #[test]
    fn defaults_are_sentinels() {
        let r = rule(DegradeGrade::ErrorCount, 3.0);
        assert_eq!(r.id, None);
        assert_eq!(r.time_window_sec, 10);
        assert_eq!(r.min_request_amount, 5);
        assert_eq!(r.slow_ratio_threshold, 1.0);
        assert_eq!(r.stat_interval_ms, 1_000);
        assert_eq!(r.probe_num, 1);
        assert_eq!(DegradeGrade::default(), DegradeGrade::SlowRequestRatio);
        assert!(r.validate(0).is_ok());
    }

    #[test]
    fn boundaries_that_are_valid() {
        for r in [
            rule(DegradeGrade::SlowRequestRatio, 0.0),
            rule(DegradeGrade::ErrorRatio, 0.0),
            rule(DegradeGrade::ErrorRatio, 1.0),
            rule(DegradeGrade::ErrorCount, 1e9),
            DegradeRule {
                slow_ratio_threshold: 0.0,
                stat_interval_ms: MAX_STAT_INTERVAL_MS,
                probe_num: MAX_PROBE_NUM,
                min_request_amount: 1,
                time_window_sec: 1,
                ..rule(DegradeGrade::SlowRequestRatio, 50.0)
            },
        ] {
            assert_eq!(r.validate(0), Ok(()), "{r}");
        }
    }

    #[test]
    fn every_bad_field_is_named() {
        let ok = rule(DegradeGrade::SlowRequestRatio, 100.0);
        let cases: Vec<(DegradeRule, &str)> = vec![
            (
                DegradeRule {
                    resource: "".into(),
                    ..ok.clone()
                },
                "resource",
            ),
            (
                DegradeRule {
                    resource: "  ".into(),
                    ..ok.clone()
                },
                "resource",
            ),
            (
                DegradeRule {
                    count: -1.0,
                    ..ok.clone()
                },
                "count",
            ),
            (
                DegradeRule {
                    count: f64::NAN,
                    ..ok.clone()
                },
                "count",
            ),
            (
                DegradeRule {
                    count: f64::INFINITY,
                    ..ok.clone()
                },
                "count",
            ),
            (rule(DegradeGrade::ErrorRatio, 1.5), "count"),
            (
                DegradeRule {
                    time_window_sec: 0,
                    ..ok.clone()
                },
                "time_window_sec",
            ),
            (
                DegradeRule {
                    min_request_amount: 0,
                    ..ok.clone()
                },
                "min_request_amount",
            ),
            (
                DegradeRule {
                    slow_ratio_threshold: 1.01,
                    ..ok.clone()
                },
                "slow_ratio_threshold",
            ),
            (
                DegradeRule {
                    slow_ratio_threshold: -0.1,
                    ..ok.clone()
                },
                "slow_ratio_threshold",
            ),
            (
                DegradeRule {
                    slow_ratio_threshold: f64::NAN,
                    ..ok.clone()
                },
                "slow_ratio_threshold",
            ),
            (
                DegradeRule {
                    stat_interval_ms: 0,
                    ..ok.clone()
                },
                "stat_interval_ms",
            ),
            (
                DegradeRule {
                    stat_interval_ms: MAX_STAT_INTERVAL_MS + 1,
                    ..ok.clone()
                },
                "stat_interval_ms",
            ),
            (
                DegradeRule {
                    probe_num: 0,
                    ..ok.clone()
                },
                "probe_num",
            ),
            (
                DegradeRule {
                    probe_num: MAX_PROBE_NUM + 1,
                    ..ok.clone()
                },
                "probe_num",
            ),
        ];
        for (bad, field) in cases {
            assert_eq!(refused_field(&bad), field, "{bad:?}");
        }
        let error = DegradeRule { probe_num: 0, ..ok }.validate(3).unwrap_err();
        assert_eq!(error.kind, "degrade");
        assert_eq!(error.index, 3);
        assert_eq!(error.resource, "res");
        assert_eq!(
            error.to_string(),
            "degrade[3] (res): probe_num must be in 1..=32767, got 0"
        );
    }

    #[test]
    fn display_is_one_short_line() {
        let slow = DegradeRule {
            id: Some(7),
            slow_ratio_threshold: 0.5,
            ..rule(DegradeGrade::SlowRequestRatio, 200.0)
        };
        assert_eq!(
            slow.to_string(),
            "degrade rule #7 on res: SlowRequestRatio > 200 ms at ratio 0.5 \
             (open 10 s, min 5 in 1000 ms, 1 probe(s))"
        );
        assert_eq!(
            rule(DegradeGrade::ErrorCount, 3.0).to_string(),
            "degrade rule on res: ErrorCount > 3 (open 10 s, min 5 in 1000 ms, 1 probe(s))"
        );
    }

    #[test]
    fn is_a_rule_of_kind_degrade() {
        let r = rule(DegradeGrade::ErrorRatio, 0.5);
        let as_rule: &dyn Rule = &r;
        assert_eq!(as_rule.resource(), "res");
        assert_eq!(as_rule.block_kind(), BlockKind::Degrade);
        assert_eq!(as_rule.as_any().downcast_ref::<DegradeRule>(), Some(&r));
    }
}
