//! `ParamFlowRule` as Sentinel's JSON, with its `paramFlowItemList` of
//! `{object, count, classType}` exceptions.

use sentinel_flow_core::param_flow::{
    ParamControlBehavior, ParamFlowGrade, ParamFlowItem, ParamFlowRule,
};
use sentinel_flow_core::{ParamValue, RuleError};
use serde_json::{Value, json};

use super::JsonRule;
use super::fields::{Object, Problems, type_name};
use super::flow::code;

const GRADES: &[(i64, ParamFlowGrade, &str)] = &[
    (0, ParamFlowGrade::Concurrency, "thread count"),
    (1, ParamFlowGrade::Qps, "QPS"),
];

const BEHAVIORS: &[(i64, ParamControlBehavior, &str)] = &[
    (0, ParamControlBehavior::Reject, "reject"),
    (2, ParamControlBehavior::RateLimiter, "rate limiter"),
];

impl JsonRule for ParamFlowRule {
    const KIND: &'static str = "paramFlow";

    fn to_json(&self) -> Value {
        let items: Vec<Value> = self
            .param_flow_item_list
            .iter()
            .filter_map(item_json)
            .collect();
        let mut value = json!({
            "resource": self.resource,
            "limitApp": "default",
            "grade": code(GRADES, &self.grade),
            "paramIdx": self.param_idx,
            "count": self.count,
            "controlBehavior": code(BEHAVIORS, &self.control_behavior),
            "maxQueueingTimeMs": self.max_queueing_time_ms,
            "burstCount": self.burst_count,
            "durationInSec": self.duration_in_sec,
            "paramFlowItemList": items,
            "clusterMode": false,
        });
        if let Some(id) = self.id {
            value["id"] = json!(id);
        }
        if let Some(capacity) = self.capacity {
            value["capacity"] = json!(capacity);
        }
        value
    }

    fn from_json(o: &Object<'_>, p: &mut Problems) -> Self {
        o.default_limit_app(p);
        o.no_cluster(p);
        o.no_regex(p);
        let d = ParamFlowRule::default();
        let param_idx = o.integer("paramIdx", p).and_then(|i| {
            let idx = i32::try_from(i).ok();
            if idx.is_none() {
                o.problem(p, "paramIdx", &format!("out of range: {i}"));
            }
            idx
        });
        if param_idx.is_none() && o.raw("paramIdx").is_none() {
            o.problem(p, "paramIdx", "is required (0 is the first argument)");
        }
        ParamFlowRule {
            id: o.unsigned("id", p),
            resource: o.string("resource", p).unwrap_or_default(),
            param_idx: param_idx.unwrap_or(d.param_idx),
            grade: o.enumerated("grade", p, GRADES, d.grade),
            count: o.number("count", p).unwrap_or(d.count),
            control_behavior: o.enumerated("controlBehavior", p, BEHAVIORS, d.control_behavior),
            max_queueing_time_ms: o
                .unsigned("maxQueueingTimeMs", p)
                .unwrap_or(d.max_queueing_time_ms),
            burst_count: o.unsigned("burstCount", p).unwrap_or(d.burst_count),
            duration_in_sec: o.unsigned("durationInSec", p).unwrap_or(d.duration_in_sec),
            param_flow_item_list: items(o, p),
            capacity: o.unsigned("capacity", p),
        }
    }

    fn core_problems(&self, index: usize) -> Vec<RuleError> {
        self.problems(index)
    }
}

/// One exception item as Sentinel's `ParamFlowItem`; `None` for a list
/// value, which Sentinel's items cannot hold.
fn item_json(item: &ParamFlowItem) -> Option<Value> {
    let (object, class) = match &item.value {
        ParamValue::Bool(b) => (b.to_string(), "boolean"),
        ParamValue::Int(i) if i32::try_from(*i).is_ok() => (i.to_string(), "int"),
        ParamValue::Int(i) => (i.to_string(), "long"),
        ParamValue::UInt(u) => (u.to_string(), "long"),
        value => (value.as_str()?.to_owned(), "java.lang.String"),
    };
    // Sentinel's item count is an Integer.
    let count = if item.count.fract() == 0.0 && item.count.abs() < 9.0e15 {
        json!(item.count as i64)
    } else {
        json!(item.count)
    };
    Some(json!({ "object": object, "count": count, "classType": class }))
}

fn items(o: &Object<'_>, p: &mut Problems) -> Vec<ParamFlowItem> {
    let list = match o.raw("paramFlowItemList") {
        None => return Vec::new(),
        Some(Value::Array(list)) => list,
        Some(other) => {
            let why = format!("must be an array, got {}", type_name(other));
            o.problem(p, "paramFlowItemList", &why);
            return Vec::new();
        }
    };
    let mut items = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let field = format!("paramFlowItemList[{i}]");
        match item(entry) {
            Ok(item) => items.push(item),
            Err(why) => o.problem(p, &field, &why),
        }
    }
    items
}

/// One `{object, count, classType}` read, or why not.
fn item(entry: &Value) -> Result<ParamFlowItem, String> {
    let Value::Object(map) = entry else {
        return Err(format!("must be an object, got {}", type_name(entry)));
    };
    let object = match map.get("object") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(other) => {
            return Err(format!(
                "object: must be a string, got {}",
                type_name(other)
            ));
        }
        None => return Err("object: is required".into()),
    };
    let count = match map.get("count") {
        Some(Value::Number(n)) => n.as_f64().unwrap_or(-1.0),
        Some(other) => return Err(format!("count: must be a number, got {}", type_name(other))),
        None => return Err("count: is required".into()),
    };
    let class = match map.get("classType") {
        None | Some(Value::Null) => "java.lang.String",
        Some(Value::String(s)) => s.as_str(),
        Some(other) => {
            return Err(format!(
                "classType: must be a string, got {}",
                type_name(other)
            ));
        }
    };
    let value = match class {
        "int" | "long" | "short" | "byte" | "java.lang.Integer" | "java.lang.Long"
        | "java.lang.Short" | "java.lang.Byte" => {
            if let Ok(i) = object.trim().parse::<i64>() {
                ParamValue::Int(i)
            } else if let Ok(u) = object.trim().parse::<u64>() {
                ParamValue::UInt(u)
            } else {
                return Err(format!(
                    "object: {object:?} is not a whole number ({class})"
                ));
            }
        }
        "boolean" | "java.lang.Boolean" => match object.trim() {
            "true" => ParamValue::Bool(true),
            "false" => ParamValue::Bool(false),
            _ => return Err(format!("object: {object:?} is not true or false")),
        },
        "java.lang.String" | "String" | "char" | "java.lang.Character" => ParamValue::from(object),
        "float" | "double" | "java.lang.Float" | "java.lang.Double" => {
            return Err(format!(
                "classType: {class} values are not supported by sentinel-rs (no float arguments)"
            ));
        }
        other => return Err(format!("classType: unknown type {other:?}")),
    };
    Ok(ParamFlowItem::new(value, count))
}
