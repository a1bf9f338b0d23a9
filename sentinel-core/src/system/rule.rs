//! `SystemRule`: limits on the whole service's inbound traffic.

use std::any::Any;
use std::fmt;

use crate::BlockKind;
use crate::rule::footprint::Footprint;
use crate::rule::names::Names;
use crate::rule::{Problems, Rule, RuleError};

/// The kind's name in errors and logs.
pub(crate) const KIND_NAME: &str = BlockKind::System.as_str();

/// The largest `avg_rt` limit: one hour, in ms.
pub const MAX_SYSTEM_AVG_RT_MS: u64 = 3_600_000;
/// The largest `max_thread` limit.
pub const MAX_SYSTEM_THREADS: u64 = 1_000_000_000;

/// Limits on every inbound entry of an instance together (Sentinel's system
/// adaptive protection). A field left `None` is off; with several rules the
/// strictest value of each field applies.
///
/// ```
/// use sentinel_flow_core::system::SystemRule;
///
/// let rule = SystemRule { qps: Some(5_000.0), max_thread: Some(200), ..SystemRule::default() };
/// assert!(rule.validate(0).is_ok());
/// assert!(SystemRule::default().validate(0).is_err(), "a rule must set a limit");
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SystemRule {
    /// An optional identifier, shown in logs and errors.
    pub id: Option<u64>,
    /// The one-minute load average above which entries are refused, unless
    /// the service still keeps up (Sentinel's BBR check). Linux only.
    pub highest_system_load: Option<f64>,
    /// The CPU usage (0 to 1) above which entries are refused. Linux only.
    pub highest_cpu_usage: Option<f64>,
    /// Inbound passes per second.
    pub qps: Option<f64>,
    /// Average response time of inbound entries, ms (at most
    /// [`MAX_SYSTEM_AVG_RT_MS`]).
    pub avg_rt: Option<u64>,
    /// Inbound calls inside at once (at most [`MAX_SYSTEM_THREADS`]).
    pub max_thread: Option<u64>,
}

impl SystemRule {
    /// Checks every field; the first problem found is returned, naming the
    /// field. `index` is the rule's position in the list being loaded.
    pub fn validate(&self, index: usize) -> Result<(), RuleError> {
        self.problems(index).into_iter().next().map_or(Ok(()), Err)
    }

    /// Every problem of the rule, in field order (empty when it is valid);
    /// [`validate`](Self::validate) returns the first.
    pub fn problems(&self, index: usize) -> Vec<RuleError> {
        let mut problems = Problems::new(KIND_NAME, index, "");
        let not_finite = |value: Option<f64>| match value {
            Some(v) if !v.is_finite() || v < 0.0 => {
                Some(format!("must be a finite number >= 0, got {v}"))
            }
            _ => None,
        };
        if let Some(problem) = not_finite(self.highest_system_load) {
            problems.add("highest_system_load", problem);
        }
        if let Some(problem) = not_finite(self.highest_cpu_usage) {
            problems.add("highest_cpu_usage", problem);
        } else if let Some(cpu) = self.highest_cpu_usage
            && cpu > 1.0
        {
            problems.add(
                "highest_cpu_usage",
                format!("must be within 0..=1 (a fraction), got {cpu}"),
            );
        }
        if let Some(problem) = not_finite(self.qps) {
            problems.add("qps", problem);
        }
        if let Some(avg_rt) = self.avg_rt {
            problems.at_most("avg_rt", avg_rt, MAX_SYSTEM_AVG_RT_MS);
        }
        if let Some(max_thread) = self.max_thread {
            problems.at_most("max_thread", max_thread, MAX_SYSTEM_THREADS);
        }
        if self.highest_system_load.is_none()
            && self.highest_cpu_usage.is_none()
            && self.qps.is_none()
            && self.avg_rt.is_none()
            && self.max_thread.is_none()
        {
            problems.add(
                "highest_system_load",
                "no limit is set: set at least one of highest_system_load, highest_cpu_usage, qps, avg_rt, max_thread",
            );
        }
        problems.into_vec()
    }

    /// The most memory the rule may take once loaded: the rule as loaded
    /// and the copies, one per limit, that the limits in force keep.
    pub(crate) fn footprint(&self) -> Footprint {
        Footprint::of_rule::<SystemRule, [SystemRule; 5]>()
    }

    /// The names the rule mentions: none, it is the instance's.
    pub(crate) fn names(&self) -> Names<'_> {
        Names::new()
    }

    /// The rule with only the `field` limit kept, to name in a block.
    pub(crate) fn only(&self, field: SystemField) -> SystemRule {
        let keep = |f: SystemField| f == field;
        SystemRule {
            id: self.id,
            highest_system_load: self.highest_system_load.filter(|_| keep(SystemField::Load)),
            highest_cpu_usage: self.highest_cpu_usage.filter(|_| keep(SystemField::Cpu)),
            qps: self.qps.filter(|_| keep(SystemField::Qps)),
            avg_rt: self.avg_rt.filter(|_| keep(SystemField::AvgRt)),
            max_thread: self.max_thread.filter(|_| keep(SystemField::MaxThread)),
        }
    }
}

/// The fields of a system rule, one limit each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SystemField {
    Load,
    Cpu,
    Qps,
    AvgRt,
    MaxThread,
}

impl fmt::Display for SystemRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "system rule")?;
        if let Some(id) = self.id {
            write!(f, " #{id}")?;
        }
        let mut sep = ":";
        let mut limit = |f: &mut fmt::Formatter<'_>, name: &str, value: Option<String>| {
            if let Some(value) = value {
                write!(f, "{sep} {name} <= {value}")?;
                sep = ",";
            }
            Ok::<(), fmt::Error>(())
        };
        limit(f, "load", self.highest_system_load.map(|v| v.to_string()))?;
        limit(f, "cpu", self.highest_cpu_usage.map(|v| v.to_string()))?;
        limit(f, "qps", self.qps.map(|v| v.to_string()))?;
        limit(f, "avg_rt", self.avg_rt.map(|v| format!("{v} ms")))?;
        limit(f, "max_thread", self.max_thread.map(|v| v.to_string()))
    }
}

impl Rule for SystemRule {
    /// System rules guard every inbound resource: `""`.
    fn resource(&self) -> &str {
        ""
    }

    fn block_kind(&self) -> BlockKind {
        BlockKind::System
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_fields_are_named() {
        let field = |rule: SystemRule| rule.validate(2).unwrap_err().field;
        assert_eq!(field(SystemRule::default()), "highest_system_load");
        let with = |f: fn(&mut SystemRule)| {
            let mut rule = SystemRule {
                max_thread: Some(10),
                ..SystemRule::default()
            };
            f(&mut rule);
            rule
        };
        assert!(with(|_| {}).validate(0).is_ok());
        assert_eq!(field(with(|r| r.qps = Some(-1.0))), "qps");
        assert_eq!(field(with(|r| r.qps = Some(f64::NAN))), "qps");
        assert_eq!(
            field(with(|r| r.highest_cpu_usage = Some(1.5))),
            "highest_cpu_usage"
        );
        assert_eq!(
            field(with(|r| r.highest_system_load = Some(f64::INFINITY))),
            "highest_system_load"
        );
    }

    #[test]
    fn display_names_only_the_set_limits() {
        let rule = SystemRule {
            id: Some(4),
            qps: Some(100.0),
            avg_rt: Some(20),
            ..SystemRule::default()
        };
        assert_eq!(
            rule.to_string(),
            "system rule #4: qps <= 100, avg_rt <= 20 ms"
        );
        assert_eq!(
            rule.only(SystemField::AvgRt).to_string(),
            "system rule #4: avg_rt <= 20 ms"
        );
    }
}
