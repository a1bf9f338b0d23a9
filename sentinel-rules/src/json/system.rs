//! `SystemRule` as Sentinel's JSON: each threshold, or -1 when off.

use sentinel_flow_core::RuleError;
use sentinel_flow_core::system::SystemRule;
use serde_json::{Value, json};

use super::JsonRule;
use super::fields::{Object, Problems};

impl JsonRule for SystemRule {
    const KIND: &'static str = "system";

    fn to_json(&self) -> Value {
        let mut value = json!({
            "highestSystemLoad": self.highest_system_load.unwrap_or(-1.0),
            "highestCpuUsage": self.highest_cpu_usage.unwrap_or(-1.0),
            "qps": self.qps.unwrap_or(-1.0),
            "avgRt": self.avg_rt.map_or(-1, |v| v as i64),
            "maxThread": self.max_thread.map_or(-1, |v| v as i64),
        });
        if let Some(id) = self.id {
            value["id"] = json!(id);
        }
        value
    }

    fn from_json(o: &Object<'_>, p: &mut Problems) -> Self {
        // Sentinel reads a negative threshold as "not set".
        let real = |field: &str, p: &mut Problems| o.number(field, p).filter(|v| *v >= 0.0);
        let whole =
            |field: &str, p: &mut Problems| o.integer(field, p).and_then(|v| u64::try_from(v).ok());
        SystemRule {
            id: o.unsigned("id", p),
            highest_system_load: real("highestSystemLoad", p),
            highest_cpu_usage: real("highestCpuUsage", p),
            qps: real("qps", p),
            avg_rt: whole("avgRt", p),
            max_thread: whole("maxThread", p),
        }
    }

    fn core_problems(&self, index: usize) -> Vec<RuleError> {
        self.problems(index)
    }
}
