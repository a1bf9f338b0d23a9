//! Rules as Sentinel's JSON (the Java classes' field names and numeric
//! enums) and back, with every problem of a bad list reported: the format
//! of Sentinel's command API (`getRules`, `setRules`) and of the keys Java
//! services keep in a configuration store (one key per kind, a JSON array).
//!
//! ```
//! use sentinel_flow_rules::RuleChange;
//!
//! let change = sentinel_flow_rules::json::decode("flow", r#"[{"resource":"a","count":5}]"#)?;
//! let RuleChange::Flow(rules) = &change else { unreachable!() };
//! assert_eq!(rules[0].count, 5.0);
//! assert!(sentinel_flow_rules::json::encode(&change).contains(r#""resource":"a""#));
//!
//! let lines = sentinel_flow_rules::json::decode("flow", r#"[{"resource":"a","count":-1}]"#)
//!     .unwrap_err();
//! assert_eq!(lines, ["flow[0] (a): count: must be a finite number >= 0, got -1"]);
//! # Ok::<(), Vec<String>>(())
//! ```
//!
//! Reading is strict where a value would change what a rule does (a wrong
//! type, an enum number out of range, a Sentinel feature we do not have
//! turned on) and lenient where fastjson is (unknown fields are ignored, a
//! `null` is an absent field).

mod fields;
mod value;
mod write;

use sentinel_flow_core::describe::DescribeRule;
use serde_json::Value;

use crate::change::{Each, KIND_COUNT, KIND_NAMES, Make, RuleChange};
use crate::user::{UserKinds, UserRules};
pub(crate) use fields::Problems;

/// The rules as a JSON array.
pub(crate) fn to_json<R: DescribeRule>(rules: &[R]) -> Value {
    Value::Array(rules.iter().filter_map(write::object).collect())
}

/// `data` (a JSON array of rules) read whole: every rule, or every problem
/// found in it, one line each.
pub(crate) fn from_json<R: DescribeRule>(data: &str) -> Result<Vec<R>, Vec<String>> {
    let value: Value =
        serde_json::from_str(data).map_err(|e| vec![format!("data: bad JSON: {e}")])?;
    let Value::Array(items) = value else {
        return Err(vec![format!(
            "data: must be a JSON array of {} rules, got {}",
            R::SENTINEL_KIND,
            fields::type_name(&value)
        )]);
    };
    let name_key = rule_name_key::<R>();
    let mut problems = Problems::default();
    let mut rules = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let before = problems.len();
        let mut rule = R::default();
        {
            let Some(mut object) =
                fields::Object::new(R::SENTINEL_KIND, index, item, name_key, &mut problems)
            else {
                continue;
            };
            rule.describe(&mut object);
        }
        // The core's checks of a rule read with defaults in place of bad
        // fields would report problems the sender did not make.
        if problems.len() == before {
            for error in rule.problems(index, usize::MAX) {
                let field = write::json_path::<R>(error.field)
                    .unwrap_or_else(|| fields::json_name(error.field));
                problems.core(&error, &field);
            }
        }
        rules.push(rule);
    }
    if problems.is_empty() {
        Ok(rules)
    } else {
        Err(problems.into_lines())
    }
}

/// The JSON name of the field that names a rule of `R` (its resource).
fn rule_name_key<R: DescribeRule>() -> &'static str {
    use sentinel_flow_core::describe::{Choice, Describe, Fields, Format, Name, Whole};
    struct Key(&'static str);
    impl Fields for Key {
        fn format(&self) -> Format {
            Format::Json
        }
        fn string(&mut self, name: Name, _: &mut String, _: &str) {
            if name.is_rule_name() && self.0.is_empty() {
                self.0 = name.json;
            }
        }
        fn optional_string(&mut self, _: Name, _: &mut Option<String>) {}
        fn names(&mut self, _: Name, _: &mut Vec<String>, _: &'static str) {}
        fn number(&mut self, _: Name, _: &mut f64, _: f64) {}
        fn optional_number(&mut self, _: Name, _: &mut Option<f64>) {}
        fn whole<T: Whole>(&mut self, _: Name, _: &mut T, _: T) {}
        fn optional_whole<T: Whole>(&mut self, _: Name, _: &mut Option<T>) {}
        fn signed(&mut self, _: Name, _: &mut i32, _: i32) {}
        fn boolean(&mut self, _: Name, _: &mut bool, _: bool) {}
        fn choice<T: Copy + PartialEq + std::fmt::Debug + Send + Sync + 'static>(
            &mut self,
            _: Name,
            _: &mut T,
            _: T,
            _: &'static [Choice<T>],
        ) {
        }
        fn value(
            &mut self,
            _: Name,
            _: Name,
            _: &mut sentinel_flow_core::ParamValue,
            _: &mut Option<&'static str>,
        ) {
        }
        fn nested<T: Describe>(&mut self, _: Name, _: &mut T) {}
        fn list<T: Describe>(&mut self, _: Name, _: &mut Vec<T>) {}
        fn fixed(&mut self, _: Name, _: &'static str, _: &'static str) {}
        fn refused(&mut self, _: Name, _: &'static str) {}
    }
    let mut key = Key("");
    R::default().describe(&mut key);
    key.0
}

/// The kinds [`decode`] reads, by the names [`RuleChange::kind`] gives.
pub const KINDS: [&str; KIND_COUNT] = KIND_NAMES;

/// `data`, a JSON array of rules of `kind` (one of [`KINDS`]: `flow`,
/// `degrade`, ...), read whole: the new list, or every problem
/// found in it, one line each (`flow[2] (GET:/orders): count: why`).
pub fn decode(kind: &str, data: &str) -> Result<RuleChange, Vec<String>> {
    struct Decode<'d>(&'d str);
    impl Make for Decode<'_> {
        type Error = Vec<String>;
        fn make<R: DescribeRule>(self) -> Result<Vec<R>, Vec<String>> {
            from_json(self.0)
        }
    }
    RuleChange::make(kind, Decode(data)).unwrap_or_else(|| {
        Err(vec![format!(
            "{kind:?} is not a rule kind (one of {})",
            KINDS.join(", ")
        )])
    })
}

/// [`decode`], the kinds of `user_kinds` included: `kind` may name one of
/// them (`deny_after`), whose rules are then read by its description and
/// checked as its rules load them.
pub fn decode_with(
    user_kinds: &UserKinds,
    kind: &str,
    data: &str,
) -> Result<RuleChange, Vec<String>> {
    if let Some(registered) = user_kinds.find(kind) {
        return registered.decode(data).map(RuleChange::User);
    }
    decode(kind, data).map_err(
        |lines| match KINDS.contains(&kind) || user_kinds.is_empty() {
            true => lines,
            false => vec![format!(
                "{kind:?} is not a rule kind (one of {})",
                user_kinds.all_names(&KIND_NAMES)
            )],
        },
    )
}

/// The rules of `change` as Sentinel's JSON array.
pub fn encode(change: &RuleChange) -> String {
    struct Encode;
    impl Each for Encode {
        type Out = Value;
        fn each<R: DescribeRule>(self, rules: &[R]) -> Value {
            to_json(rules)
        }
        fn user(self, rules: &UserRules) -> Value {
            rules.json()
        }
    }
    change.each(Encode).to_string()
}

#[cfg(test)]
mod tests;
