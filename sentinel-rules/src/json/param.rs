//! `ParamFlowRule` as Sentinel's JSON, with its `paramFlowItemList` of
//! `{object, count, classType}` exceptions.

use sentinel_flow_core::param_flow::{
    ParamClassKind, ParamClusterThresholdType, ParamControlBehavior, ParamFlowClusterConfig,
    ParamFlowGrade, ParamFlowItem, ParamFlowRule, param_class_kind,
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

/// Sentinel's `ClusterRuleConstant`: 0 the average per instance, 1 global.
const THRESHOLDS: &[(i64, ParamClusterThresholdType, &str)] = &[
    (
        0,
        ParamClusterThresholdType::AvgLocal,
        "average per instance",
    ),
    (1, ParamClusterThresholdType::Global, "global"),
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
            "clusterMode": self.cluster_mode,
        });
        // Always written, as a Java machine echoes the `clusterConfig` the
        // dashboard's dialog always sends.
        let c = &self.cluster_config;
        let mut config = json!({
            "thresholdType": code(THRESHOLDS, &c.threshold_type),
            "fallbackToLocalWhenFail": c.fallback_to_local_when_fail,
            "sampleCount": c.sample_count,
            "windowIntervalMs": c.window_interval_ms,
        });
        if let Some(id) = c.flow_id {
            config["flowId"] = json!(id);
        }
        value["clusterConfig"] = config;
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
            cluster_mode: o.boolean("clusterMode", p).unwrap_or(d.cluster_mode),
            cluster_config: cluster_config(o, p),
        }
    }

    fn core_problems(&self, index: usize) -> Vec<RuleError> {
        self.problems(index)
    }
}

/// Sentinel's `ParamFlowClusterConfig`, read whether or not `clusterMode`
/// is on; absent fields take Java's defaults.
fn cluster_config(o: &Object<'_>, p: &mut Problems) -> ParamFlowClusterConfig {
    let d = ParamFlowClusterConfig::default();
    let Some(c) = o.nested("clusterConfig", p) else {
        return d;
    };
    ParamFlowClusterConfig {
        flow_id: c.unsigned("flowId", p),
        threshold_type: c.enumerated("thresholdType", p, THRESHOLDS, d.threshold_type),
        fallback_to_local_when_fail: c
            .boolean("fallbackToLocalWhenFail", p)
            .unwrap_or(d.fallback_to_local_when_fail),
        sample_count: c.unsigned("sampleCount", p).unwrap_or(d.sample_count),
        window_interval_ms: c
            .unsigned("windowIntervalMs", p)
            .unwrap_or(d.window_interval_ms),
    }
}

/// One exception item as Sentinel's `ParamFlowItem`, with the class type it
/// was given as (or its value's usual one); `None` for a list value, which
/// Sentinel's items cannot hold.
fn item_json(item: &ParamFlowItem) -> Option<Value> {
    let object = match &item.value {
        ParamValue::Bool(b) => b.to_string(),
        ParamValue::Int(i) => i.to_string(),
        ParamValue::UInt(u) => u.to_string(),
        // A `float` was read as an `f32`: its shortest `f32` form is what
        // was sent.
        ParamValue::Float(f) if matches!(item.class_type, Some("float" | "java.lang.Float")) => {
            java_float(*f as f32)
        }
        ParamValue::Float(f) => java_double(*f),
        value => value.as_str()?.to_owned(),
    };
    // Sentinel's item count is an Integer.
    let count = if item.count.fract() == 0.0 && item.count.abs() < 9.0e15 {
        json!(item.count as i64)
    } else {
        json!(item.count)
    };
    let class = item.class_type.unwrap_or_else(|| usual_class(&item.value));
    Some(json!({ "object": object, "count": count, "classType": class }))
}

/// The class type a value is written with when its item names none.
fn usual_class(value: &ParamValue) -> &'static str {
    match value {
        ParamValue::Bool(_) => "boolean",
        ParamValue::Int(i) if i32::try_from(*i).is_ok() => "int",
        ParamValue::Int(_) | ParamValue::UInt(_) => "long",
        ParamValue::Float(_) => "double",
        _ => "java.lang.String",
    }
}

/// `value` as Java's `Double.toString` spells the specials (the digits are
/// Rust's shortest round-trip form, which `Double.parseDouble` reads back).
fn java_double(value: f64) -> String {
    match value {
        v if v.is_nan() => "NaN".into(),
        f64::INFINITY => "Infinity".into(),
        f64::NEG_INFINITY => "-Infinity".into(),
        v => format!("{v:?}"),
    }
}

fn java_float(value: f32) -> String {
    match value {
        v if v.is_nan() => "NaN".into(),
        f32::INFINITY => "Infinity".into(),
        f32::NEG_INFINITY => "-Infinity".into(),
        v => format!("{v:?}"),
    }
}

/// A float as Java's `Double.parseDouble` reads one: decimal digits and
/// the names `NaN` and `Infinity` (Rust's parser also takes `inf` and
/// `nan`, which Java refuses).
fn parse_java_float(text: &str) -> Option<f64> {
    let t = text.trim();
    match t.trim_start_matches(['+', '-']) {
        "NaN" => Some(f64::NAN),
        "Infinity" if t.starts_with('-') => Some(f64::NEG_INFINITY),
        "Infinity" => Some(f64::INFINITY),
        rest if rest
            .chars()
            .all(|c| c.is_ascii_digit() || ".eE+-".contains(c)) =>
        {
            t.parse::<f64>().ok()
        }
        _ => None,
    }
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
    let sent = matches!(map.get("classType"), Some(Value::String(_)));
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
    let Some((class, kind)) = param_class_kind(class) else {
        return Err(format!("classType: unknown type {class:?}"));
    };
    let value = match kind {
        ParamClassKind::Integer => {
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
        ParamClassKind::Boolean => match object.trim() {
            "true" => ParamValue::Bool(true),
            "false" => ParamValue::Bool(false),
            _ => return Err(format!("object: {object:?} is not true or false")),
        },
        ParamClassKind::Float => match parse_java_float(&object) {
            // A Java `float` argument is an `f32`: read the item as one so
            // that it matches the argument's widened value.
            Some(f) if matches!(class, "float" | "java.lang.Float") => ParamValue::from(f as f32),
            Some(f) => ParamValue::from(f),
            None => return Err(format!("object: {object:?} is not a number ({class})")),
        },
        _ => ParamValue::from(object),
    };
    let item = ParamFlowItem::new(value, count);
    // Kept only where writing the item back would not give it: `int` for
    // 42 needs no keeping. (An absent `classType` is written back as the
    // value's usual one.)
    let implied = usual_class(&item.value) == class;
    Ok(if sent && !implied {
        item.with_class_type(class)
    } else {
        item
    })
}
