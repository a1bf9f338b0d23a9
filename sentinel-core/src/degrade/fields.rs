//! A circuit-breaking rule's fields, for the codecs: each field's name in
//! a rule file and in Sentinel's JSON, its default, and the grades' words
//! and numbers.

use super::{DegradeGrade, DegradeRule};
use crate::rule::RuleError;
use crate::rule::describe::{Choice, Describe, DescribeRule, Fields, Name};

const GRADES: &[Choice<DegradeGrade>] = &[
    Choice::new(
        DegradeGrade::SlowRequestRatio,
        "slow_request_ratio",
        0,
        "slow request ratio",
    ),
    Choice::new(
        DegradeGrade::ErrorRatio,
        "error_ratio",
        1,
        "exception ratio",
    ),
    Choice::new(
        DegradeGrade::ErrorCount,
        "error_count",
        2,
        "exception count",
    ),
];

/// Sentinel's `limitApp` and `regex`, which a circuit breaker here has not.
const EVERY_ORIGIN: &str = "rules apply to every origin in sentinel-rs";
const NO_REGEX: &str = "regular-expression resources are not supported by sentinel-rs; send false";

impl Describe for DegradeRule {
    fn describe<F: Fields>(&mut self, f: &mut F) {
        let d = DegradeRule::default();
        f.fixed(Name::json("limitApp"), "default", EVERY_ORIGIN);
        f.refused(Name::json("regex"), NO_REGEX);
        f.optional_whole(Name::new("id", "id").last(), &mut self.id);
        let resource = Name::new("resource", "resource").required().names_rule();
        f.string(resource, &mut self.resource, "");
        let grade = Name::new("grade", "grade").required();
        f.choice(grade, &mut self.grade, d.grade, GRADES);
        f.number(
            Name::new("count", "count").required(),
            &mut self.count,
            d.count,
        );
        let slow = Name::new("slow_ratio_threshold", "slowRatioThreshold");
        f.number(slow, &mut self.slow_ratio_threshold, d.slow_ratio_threshold);
        let window = Name::new("time_window_sec", "timeWindow");
        f.whole(window, &mut self.time_window_sec, d.time_window_sec);
        let amount = Name::new("min_request_amount", "minRequestAmount");
        f.whole(amount, &mut self.min_request_amount, d.min_request_amount);
        let interval = Name::new("stat_interval_ms", "statIntervalMs");
        f.whole(interval, &mut self.stat_interval_ms, d.stat_interval_ms);
        f.whole(
            Name::new("probe_num", "probeNum"),
            &mut self.probe_num,
            d.probe_num,
        );
    }
}

impl DescribeRule for DegradeRule {
    const KIND: &'static str = super::rule::KIND_NAME;
    const FILE_ORDER: u32 = 1;

    fn problems(&self, index: usize, max_name_len: usize) -> Vec<RuleError> {
        let mut problems = DegradeRule::problems(self, index);
        problems.extend(self.name_problems(index, max_name_len));
        problems
    }
}
