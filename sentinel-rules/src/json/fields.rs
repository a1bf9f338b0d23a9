//! Reading one JSON rule object field by field, as its description asks,
//! each problem kept.

use sentinel_flow_core::ParamValue;
use sentinel_flow_core::describe::{Choice, Describe, Fields, Format, Name, Whole};
use serde_json::{Map, Value};

use super::value;

/// Every problem found in a list, one line each:
/// `kind[index] (resource): field: why`.
#[derive(Debug, Default)]
pub(crate) struct Problems {
    lines: Vec<String>,
}

impl Problems {
    pub(crate) fn len(&self) -> usize {
        self.lines.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    pub(crate) fn into_lines(self) -> Vec<String> {
        self.lines
    }

    fn add(&mut self, kind: &str, index: usize, resource: &str, field: &str, why: &str) {
        self.lines
            .push(format!("{kind}[{index}] ({resource}): {field}: {why}"));
    }

    /// A problem the core found, under the field's JSON name (`field`).
    pub(crate) fn core(&mut self, error: &sentinel_flow_core::RuleError, field: &str) {
        self.add(
            error.kind,
            error.index,
            &error.resource,
            field,
            &error.message,
        );
    }
}

/// The JSON name of a core field no description names: camelCase, and
/// Sentinel's own name where it differs.
pub(crate) fn json_name(field: &str) -> String {
    match field {
        "time_window_sec" => return "timeWindow".into(),
        "highest_system_load" => return "highestSystemLoad".into(),
        _ => {}
    }
    let mut name = String::with_capacity(field.len());
    let mut upper = false;
    for c in field.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            name.extend(c.to_uppercase());
            upper = false;
        } else {
            name.push(c);
        }
    }
    name
}

/// What a JSON value is, for messages.
pub(crate) fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// One element of a rule list, known to be an object, read as its
/// description asks; or an object inside one (`clusterConfig`, an item of
/// `paramFlowItemList`), whose problems name the field they are in.
#[derive(Debug)]
pub(crate) struct Object<'a, 'p> {
    kind: &'static str,
    index: usize,
    resource: &'a str,
    map: &'a Map<String, Value>,
    /// What precedes a field's name in problems: `clusterConfig.` for a
    /// nested object, `paramFlowItemList[2]: ` for a list item.
    prefix: String,
    problems: &'p mut Problems,
}

impl<'a, 'p> Object<'a, 'p> {
    /// Element `index` of a `kind` list; a problem and `None` if it is not
    /// an object. `name_key` is the field naming the rule (its resource).
    pub(crate) fn new(
        kind: &'static str,
        index: usize,
        value: &'a Value,
        name_key: &str,
        problems: &'p mut Problems,
    ) -> Option<Self> {
        let Value::Object(map) = value else {
            problems.lines.push(format!(
                "{kind}[{index}]: must be a JSON object, got {}",
                type_name(value)
            ));
            return None;
        };
        let resource = match map.get(name_key) {
            Some(Value::String(s)) => s.as_str(),
            _ => "",
        };
        Some(Object {
            kind,
            index,
            resource,
            map,
            prefix: String::new(),
            problems,
        })
    }

    /// An object inside this one, its fields named after `prefix`.
    fn inner(&mut self, map: &'a Map<String, Value>, prefix: String) -> Object<'a, '_> {
        Object {
            kind: self.kind,
            index: self.index,
            resource: self.resource,
            map,
            prefix,
            problems: self.problems,
        }
    }

    /// A problem with `field` of this object.
    fn problem(&mut self, field: &str, why: &str) {
        let field = format!("{}{field}", self.prefix);
        let (kind, index, resource) = (self.kind, self.index, self.resource);
        self.problems.add(kind, index, resource, &field, why);
    }

    /// The field's value; `None` when absent or `null`, as fastjson reads;
    /// an absent field Sentinel requires is a problem.
    fn get(&mut self, name: Name) -> Option<&'a Value> {
        if name.json.is_empty() {
            return None;
        }
        let value = self.map.get(name.json).filter(|v| !v.is_null());
        if value.is_none()
            && let Some(hint) = name.json_required()
        {
            let why = match hint {
                "" => "is required".to_owned(),
                hint => format!("is required ({hint})"),
            };
            self.problem(name.json, &why);
        }
        value
    }

    fn wrong(&mut self, field: &str, wanted: &str, value: &Value) {
        let why = format!("must be {wanted}, got {}", short(value));
        self.problem(field, &why);
    }

    fn read_string(&mut self, name: Name) -> Option<&'a str> {
        match self.get(name)? {
            Value::String(s) => Some(s),
            other => {
                self.wrong(name.json, "a string", other);
                None
            }
        }
    }

    fn read_number(&mut self, name: Name) -> Option<f64> {
        match self.get(name)? {
            Value::Number(n) => n.as_f64(),
            other => {
                self.wrong(name.json, "a number", other);
                None
            }
        }
    }

    /// A whole number, negative allowed.
    fn integer(&mut self, name: Name) -> Option<i64> {
        let value = self.get(name)?;
        match value.as_i64() {
            Some(i) => Some(i),
            None => {
                self.wrong(name.json, "a whole number", value);
                None
            }
        }
    }

    /// A whole number >= 0 that fits `T`.
    fn read_whole<T: Whole>(&mut self, name: Name) -> Option<T> {
        let value = self.get(name)?;
        match value.as_u64().and_then(T::from_u64) {
            Some(n) => Some(n),
            None => {
                self.wrong(name.json, "a whole number >= 0 in range", value);
                None
            }
        }
    }

    fn read_boolean(&mut self, name: Name) -> Option<bool> {
        match self.get(name)? {
            Value::Bool(b) => Some(*b),
            other => {
                self.wrong(name.json, "true or false", other);
                None
            }
        }
    }
}

impl Fields for Object<'_, '_> {
    fn format(&self) -> Format {
        Format::Json
    }

    fn string(&mut self, name: Name, v: &mut String, default: &str) {
        match self.read_string(name) {
            Some(s) => s.clone_into(v),
            None if v != default => default.clone_into(v),
            None => {}
        }
    }

    fn optional_string(&mut self, name: Name, v: &mut Option<String>) {
        // The dashboard sends an unset string as "".
        *v = self
            .read_string(name)
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
    }

    fn names(&mut self, name: Name, v: &mut Vec<String>, _: &'static str) {
        // As Sentinel splits it: on commas, names kept as written (Sentinel
        // compares them untrimmed), empty names dropped.
        let joined = self.read_string(name).unwrap_or_default();
        *v = joined
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
    }

    fn number(&mut self, name: Name, v: &mut f64, default: f64) {
        *v = self.read_number(name).unwrap_or(default);
    }

    fn optional_number(&mut self, name: Name, v: &mut Option<f64>) {
        let n = self.read_number(name);
        // Sentinel reads a negative threshold as "not set".
        *v = match name.is_unset_negative() {
            true => n.filter(|n| *n >= 0.0),
            false => n,
        };
    }

    fn whole<T: Whole>(&mut self, name: Name, v: &mut T, default: T) {
        *v = self.read_whole(name).unwrap_or(default);
    }

    fn optional_whole<T: Whole>(&mut self, name: Name, v: &mut Option<T>) {
        *v = match name.is_unset_negative() {
            true => self
                .integer(name)
                .and_then(|n| u64::try_from(n).ok())
                .and_then(T::from_u64),
            false => self.read_whole(name),
        };
    }

    fn signed(&mut self, name: Name, v: &mut i32, default: i32) {
        let n = self.integer(name).and_then(|i| {
            let n = i32::try_from(i).ok();
            if n.is_none() {
                self.problem(name.json, &format!("out of range: {i}"));
            }
            n
        });
        *v = n.unwrap_or(default);
    }

    fn boolean(&mut self, name: Name, v: &mut bool, default: bool) {
        *v = self.read_boolean(name).unwrap_or(default);
    }

    fn choice<T: Copy + PartialEq + std::fmt::Debug + Send + Sync + 'static>(
        &mut self,
        name: Name,
        v: &mut T,
        default: T,
        table: &'static [Choice<T>],
    ) {
        *v = default;
        let Some(n) = self.integer(name) else {
            return;
        };
        if let Some(choice) = table.iter().find(|c| c.number == n) {
            *v = choice.value;
            return;
        }
        let mut accepted: Vec<&Choice<T>> = table.iter().collect();
        accepted.sort_by_key(|c| c.number);
        let accepted: Vec<String> = accepted
            .iter()
            .map(|c| format!("{} ({})", c.number, c.label))
            .collect();
        let why = format!("must be {}, got {n}", accepted.join(" or "));
        self.problem(name.json, &why);
    }

    fn value(
        &mut self,
        name: Name,
        class: Name,
        v: &mut ParamValue,
        class_type: &mut Option<&'static str>,
    ) {
        let object = self.get(name).and_then(|value| {
            let text = value::object_text(value);
            if text.is_none() {
                let why = format!("must be a string, got {}", type_name(value));
                self.problem(name.json, &why);
            }
            text
        });
        let (class_name, sent) = match self.get(class) {
            None => ("java.lang.String", false),
            Some(Value::String(s)) => (s.as_str(), true),
            Some(other) => {
                let why = format!("must be a string, got {}", type_name(other));
                return self.problem(class.json, &why);
            }
        };
        let Some(object) = object else {
            return;
        };
        match value::read(&object, class_name, sent) {
            Ok((value, class)) => {
                *v = value;
                *class_type = class;
            }
            Err(value::Bad::Object(why)) => self.problem(name.json, &why),
            Err(value::Bad::Class(why)) => self.problem(class.json, &why),
        }
    }

    fn nested<T: Describe>(&mut self, name: Name, v: &mut T) {
        let Some(value) = self.get(name) else {
            return;
        };
        let Value::Object(map) = value else {
            return self.wrong(name.json, "an object", value);
        };
        let mut inner = self.inner(map, format!("{}{}.", self.prefix, name.json));
        v.describe(&mut inner);
    }

    fn optional_nested<T: Describe>(&mut self, name: Name, v: &mut Option<T>) {
        let present =
            !name.json.is_empty() && self.map.get(name.json).is_some_and(|v| !v.is_null());
        if !present {
            *v = None;
            return;
        }
        let mut inner = v.take().unwrap_or_default();
        self.nested(name, &mut inner);
        *v = Some(inner);
    }

    fn list<T: Describe>(&mut self, name: Name, v: &mut Vec<T>) {
        v.clear();
        let list = match self.get(name) {
            None => return,
            Some(Value::Array(list)) => list,
            Some(other) => {
                let why = format!("must be an array, got {}", type_name(other));
                return self.problem(name.json, &why);
            }
        };
        v.reserve(list.len());
        for (i, entry) in list.iter().enumerate() {
            let field = format!("{}[{i}]", name.json);
            let Value::Object(map) = entry else {
                let why = format!("must be an object, got {}", type_name(entry));
                self.problem(&field, &why);
                continue;
            };
            let before = self.problems.len();
            let mut item = T::default();
            let mut inner = self.inner(map, format!("{}{field}: ", self.prefix));
            item.describe(&mut inner);
            if self.problems.len() == before {
                v.push(item);
            }
        }
    }

    fn fixed(&mut self, name: Name, value: &'static str, why: &'static str) {
        if let Some(got) = self.read_string(name)
            && !got.is_empty()
            && got != value
        {
            let why = format!("{} {why}; send {value:?}, got {got:?}", self.kind);
            self.problem(name.json, &why);
        }
    }

    fn refused(&mut self, name: Name, why: &'static str) {
        if self.read_boolean(name) == Some(true) {
            self.problem(name.json, why);
        }
    }
}

/// A value in a message, cut short.
fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 40 {
        let cut: String = text.chars().take(40).collect();
        format!("{cut}...")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::json_name;

    #[test]
    fn core_fields_get_sentinel_names() {
        assert_eq!(json_name("warm_up_period_sec"), "warmUpPeriodSec");
        assert_eq!(json_name("time_window_sec"), "timeWindow");
        assert_eq!(json_name("count"), "count");
    }
}
