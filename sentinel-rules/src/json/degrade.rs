//! `DegradeRule` as Sentinel's JSON.

use sentinel_flow_core::RuleError;
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use serde_json::{Value, json};

use super::JsonRule;
use super::fields::{Object, Problems};
use super::flow::code;

const GRADES: &[(i64, DegradeGrade, &str)] = &[
    (0, DegradeGrade::SlowRequestRatio, "slow request ratio"),
    (1, DegradeGrade::ErrorRatio, "exception ratio"),
    (2, DegradeGrade::ErrorCount, "exception count"),
];

impl JsonRule for DegradeRule {
    const KIND: &'static str = "degrade";

    fn to_json(&self) -> Value {
        let mut value = json!({
            "resource": self.resource,
            "limitApp": "default",
            "grade": code(GRADES, &self.grade),
            "count": self.count,
            "timeWindow": self.time_window_sec,
            "minRequestAmount": self.min_request_amount,
            "slowRatioThreshold": self.slow_ratio_threshold,
            "statIntervalMs": self.stat_interval_ms,
            // Ours, beyond Sentinel's rule (the dashboard drops it).
            "probeNum": self.probe_num,
        });
        if let Some(id) = self.id {
            value["id"] = json!(id);
        }
        value
    }

    fn from_json(o: &Object<'_>, p: &mut Problems) -> Self {
        o.default_limit_app(p);
        o.no_regex(p);
        let d = DegradeRule::default();
        DegradeRule {
            id: o.unsigned("id", p),
            resource: o.string("resource", p).unwrap_or_default(),
            grade: o.enumerated("grade", p, GRADES, d.grade),
            count: o.number("count", p).unwrap_or(d.count),
            time_window_sec: o.unsigned("timeWindow", p).unwrap_or(d.time_window_sec),
            min_request_amount: o
                .unsigned("minRequestAmount", p)
                .unwrap_or(d.min_request_amount),
            slow_ratio_threshold: o
                .number("slowRatioThreshold", p)
                .unwrap_or(d.slow_ratio_threshold),
            stat_interval_ms: o
                .unsigned("statIntervalMs", p)
                .unwrap_or(d.stat_interval_ms),
            probe_num: o.unsigned("probeNum", p).unwrap_or(d.probe_num),
        }
    }

    fn core_problems(&self, index: usize) -> Vec<RuleError> {
        self.problems(index)
    }
}
