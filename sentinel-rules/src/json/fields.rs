//! Reading one JSON rule object field by field, each problem kept.

use serde_json::{Map, Value};

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

    /// A problem the core found, under the field's JSON name.
    pub(crate) fn core(&mut self, error: &sentinel_flow_core::RuleError) {
        let field = json_name(error.field);
        self.add(
            error.kind,
            error.index,
            &error.resource,
            &field,
            &error.message,
        );
    }
}

/// The JSON name of a core field: camelCase, and Sentinel's own name where
/// it differs.
fn json_name(field: &str) -> String {
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

/// One element of a rule list, known to be an object.
#[derive(Debug)]
pub(crate) struct Object<'a> {
    kind: &'static str,
    index: usize,
    resource: String,
    map: &'a Map<String, Value>,
    /// `"clusterConfig."` for the fields of a nested object, else empty.
    prefix: &'static str,
}

impl<'a> Object<'a> {
    /// Element `index` of a `kind` list; a problem and `None` if it is not
    /// an object.
    pub(crate) fn new(
        kind: &'static str,
        index: usize,
        value: &'a Value,
        problems: &mut Problems,
    ) -> Option<Self> {
        let Value::Object(map) = value else {
            problems.lines.push(format!(
                "{kind}[{index}]: must be a JSON object, got {}",
                type_name(value)
            ));
            return None;
        };
        let resource = match map.get("resource") {
            Some(Value::String(s)) => s.clone(),
            _ => String::new(),
        };
        Some(Object {
            kind,
            index,
            resource,
            map,
            prefix: "",
        })
    }

    /// The object in `field` (Sentinel's `clusterConfig`), whose problems
    /// are named `field.name`; `None` when absent, a problem when it is not
    /// an object.
    pub(crate) fn nested(&self, field: &'static str, problems: &mut Problems) -> Option<Self> {
        match self.get(field)? {
            Value::Object(map) => Some(Object {
                kind: self.kind,
                index: self.index,
                resource: self.resource.clone(),
                map,
                prefix: field,
            }),
            other => {
                self.wrong(problems, field, "an object", other);
                None
            }
        }
    }

    /// A problem with `field` of this rule.
    pub(crate) fn problem(&self, problems: &mut Problems, field: &str, why: &str) {
        match self.prefix {
            "" => problems.add(self.kind, self.index, &self.resource, field, why),
            prefix => {
                let field = format!("{prefix}.{field}");
                problems.add(self.kind, self.index, &self.resource, &field, why);
            }
        }
    }

    /// The field's value; `None` when absent or `null`, as fastjson reads.
    pub(crate) fn raw(&self, field: &str) -> Option<&'a Value> {
        self.get(field)
    }

    fn get(&self, field: &str) -> Option<&'a Value> {
        self.map.get(field).filter(|v| !v.is_null())
    }

    fn wrong(&self, problems: &mut Problems, field: &str, wanted: &str, value: &Value) {
        let why = format!("must be {wanted}, got {}", short(value));
        self.problem(problems, field, &why);
    }

    /// A string field.
    pub(crate) fn string(&self, field: &str, problems: &mut Problems) -> Option<String> {
        match self.get(field)? {
            Value::String(s) => Some(s.clone()),
            other => {
                self.wrong(problems, field, "a string", other);
                None
            }
        }
    }

    /// A boolean field.
    pub(crate) fn boolean(&self, field: &str, problems: &mut Problems) -> Option<bool> {
        match self.get(field)? {
            Value::Bool(b) => Some(*b),
            other => {
                self.wrong(problems, field, "true or false", other);
                None
            }
        }
    }

    /// A number field (any JSON number).
    pub(crate) fn number(&self, field: &str, problems: &mut Problems) -> Option<f64> {
        match self.get(field)? {
            Value::Number(n) => n.as_f64(),
            other => {
                self.wrong(problems, field, "a number", other);
                None
            }
        }
    }

    /// A whole-number field (negative allowed).
    pub(crate) fn integer(&self, field: &str, problems: &mut Problems) -> Option<i64> {
        let value = self.get(field)?;
        match value.as_i64() {
            Some(i) => Some(i),
            None => {
                self.wrong(problems, field, "a whole number", value);
                None
            }
        }
    }

    /// A whole-number field that must be >= 0 and fit `T`.
    pub(crate) fn unsigned<T: TryFrom<u64>>(
        &self,
        field: &str,
        problems: &mut Problems,
    ) -> Option<T> {
        let value = self.get(field)?;
        match value.as_u64().and_then(|n| T::try_from(n).ok()) {
            Some(n) => Some(n),
            None => {
                self.wrong(problems, field, "a whole number >= 0 in range", value);
                None
            }
        }
    }

    /// An enum field given by number: `options` pairs each accepted number
    /// with its value and name; an absent field is `default`.
    pub(crate) fn enumerated<T: Copy>(
        &self,
        field: &str,
        problems: &mut Problems,
        options: &[(i64, T, &str)],
        default: T,
    ) -> T {
        let Some(n) = self.integer(field, problems) else {
            return default;
        };
        if let Some((_, value, _)) = options.iter().find(|(k, _, _)| *k == n) {
            return *value;
        }
        let accepted: Vec<String> = options
            .iter()
            .map(|(k, _, name)| format!("{k} ({name})"))
            .collect();
        let why = format!("must be {}, got {n}", accepted.join(" or "));
        self.problem(problems, field, &why);
        default
    }

    /// Sentinel's `regex` resource matching: accepted off, refused on.
    pub(crate) fn no_regex(&self, problems: &mut Problems) {
        if self.boolean("regex", problems) == Some(true) {
            self.problem(
                problems,
                "regex",
                "regular-expression resources are not supported by sentinel-rs; send false",
            );
        }
    }

    /// `limitApp` of a kind that has no origin in sentinel-rs: only
    /// `default` (or nothing) is accepted.
    pub(crate) fn default_limit_app(&self, problems: &mut Problems) {
        if let Some(app) = self.string("limitApp", problems)
            && !app.is_empty()
            && app != "default"
        {
            let why = format!(
                "{} rules apply to every origin in sentinel-rs; send \"default\", got {app:?}",
                self.kind
            );
            self.problem(problems, "limitApp", &why);
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
