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

mod authority;
mod degrade;
mod fields;
mod flow;
mod param;
mod system;

use serde_json::Value;

use crate::change::RuleChange;
pub(crate) use fields::Problems;

/// A rule kind that has a JSON form.
pub(crate) trait JsonRule: Sized {
    /// The kind's name in problems (`flow`, `degrade`, ...).
    const KIND: &'static str;
    /// The rule as Sentinel's JSON object.
    fn to_json(&self) -> Value;
    /// The rule read from `object`; each bad field adds a problem and is
    /// left at its default.
    fn from_json(object: &fields::Object<'_>, problems: &mut Problems) -> Self;
    /// The core's own checks of the rule (ranges, combinations).
    fn core_problems(&self, index: usize) -> Vec<sentinel_flow_core::RuleError>;
}

/// The rules as a JSON array.
pub(crate) fn to_json<R: JsonRule>(rules: &[R]) -> Value {
    Value::Array(rules.iter().map(JsonRule::to_json).collect())
}

/// `data` (a JSON array of rules) read whole: every rule, or every problem
/// found in it, one line each.
pub(crate) fn from_json<R: JsonRule>(data: &str) -> Result<Vec<R>, Vec<String>> {
    let value: Value =
        serde_json::from_str(data).map_err(|e| vec![format!("data: bad JSON: {e}")])?;
    let Value::Array(items) = value else {
        return Err(vec![format!(
            "data: must be a JSON array of {} rules, got {}",
            R::KIND,
            fields::type_name(&value)
        )]);
    };
    let mut problems = Problems::default();
    let mut rules = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let Some(object) = fields::Object::new(R::KIND, index, item, &mut problems) else {
            continue;
        };
        let before = problems.len();
        let rule = R::from_json(&object, &mut problems);
        // The core's checks of a rule read with defaults in place of bad
        // fields would report problems the sender did not make.
        if problems.len() == before {
            for error in rule.core_problems(index) {
                problems.core(&error);
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

/// The kinds [`decode`] reads, by the names [`RuleChange::kind`] gives.
pub const KINDS: [&str; 5] = ["flow", "degrade", "system", "authority", "param_flow"];

/// `data`, a JSON array of rules of `kind` (`flow`, `degrade`, `system`,
/// `authority` or `param_flow`), read whole: the new list, or every problem
/// found in it, one line each (`flow[2] (GET:/orders): count: why`).
pub fn decode(kind: &str, data: &str) -> Result<RuleChange, Vec<String>> {
    match kind {
        "flow" => from_json(data).map(RuleChange::Flow),
        "degrade" => from_json(data).map(RuleChange::Degrade),
        "system" => from_json(data).map(RuleChange::System),
        "authority" => from_json(data).map(RuleChange::Authority),
        "param_flow" => from_json(data).map(RuleChange::ParamFlow),
        other => Err(vec![format!(
            "{other:?} is not a rule kind (one of {})",
            KINDS.join(", ")
        )]),
    }
}

/// The rules of `change` as Sentinel's JSON array.
pub fn encode(change: &RuleChange) -> String {
    match change {
        RuleChange::Flow(rules) => to_json(rules),
        RuleChange::Degrade(rules) => to_json(rules),
        RuleChange::System(rules) => to_json(rules),
        RuleChange::Authority(rules) => to_json(rules),
        RuleChange::ParamFlow(rules) => to_json(rules),
    }
    .to_string()
}

#[cfg(test)]
mod tests;
