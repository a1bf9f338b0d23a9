//! An argument value as Sentinel's JSON holds it: its text (`object`) and
//! the Java type it is parsed as (`classType`).

use sentinel_flow_core::ParamValue;
use sentinel_flow_core::param_flow::{ParamClassKind, param_class_kind};
use serde_json::Value;

/// The value's text and its class type (the one it was given as, or its
/// value's usual one); `None` for a list value, which Sentinel's items
/// cannot hold.
pub(super) fn write(
    value: &ParamValue,
    class_type: Option<&'static str>,
) -> Option<(String, &'static str)> {
    let object = match value {
        ParamValue::Bool(b) => b.to_string(),
        ParamValue::Int(i) => i.to_string(),
        ParamValue::UInt(u) => u.to_string(),
        // A `float` was read as an `f32`: its shortest `f32` form is what
        // was sent.
        ParamValue::Float(f) if matches!(class_type, Some("float" | "java.lang.Float")) => {
            java_float(*f as f32)
        }
        ParamValue::Float(f) => java_double(*f),
        value => value.as_str()?.to_owned(),
    };
    Some((object, class_type.unwrap_or_else(|| usual_class(value))))
}

/// The class type a value is written with when it names none.
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

/// The text of an `object` as sent: a string, or a number or boolean
/// written as one; `None` for another value.
pub(super) fn object_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Why a value could not be read: its text (`object`) or its type name.
pub(super) enum Bad {
    Object(String),
    Class(String),
}

/// `object` parsed as Java type `class` (sent or not): the value, and the
/// class type to keep (only where writing the value back would not give
/// it: `int` for 42 needs no keeping).
pub(super) fn read(
    object: &str,
    class: &str,
    sent: bool,
) -> Result<(ParamValue, Option<&'static str>), Bad> {
    let Some((class, kind)) = param_class_kind(class) else {
        return Err(Bad::Class(format!("unknown type {class:?}")));
    };
    let bad = |why: String| Err(Bad::Object(why));
    let value = match kind {
        ParamClassKind::Integer => {
            if let Ok(i) = object.trim().parse::<i64>() {
                ParamValue::Int(i)
            } else if let Ok(u) = object.trim().parse::<u64>() {
                ParamValue::UInt(u)
            } else {
                return bad(format!("{object:?} is not a whole number ({class})"));
            }
        }
        ParamClassKind::Boolean => match object.trim() {
            "true" => ParamValue::Bool(true),
            "false" => ParamValue::Bool(false),
            _ => return bad(format!("{object:?} is not true or false")),
        },
        ParamClassKind::Float => match parse_java_float(object) {
            // A Java `float` argument is an `f32`: read the value as one so
            // that it matches the argument's widened value.
            Some(f) if matches!(class, "float" | "java.lang.Float") => ParamValue::from(f as f32),
            Some(f) => ParamValue::from(f),
            None => return bad(format!("{object:?} is not a number ({class})")),
        },
        _ => ParamValue::from(object),
    };
    let implied = usual_class(&value) == class;
    Ok((value, (sent && !implied).then_some(class)))
}
