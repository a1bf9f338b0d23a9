//! `AuthorityRule` as Sentinel's JSON: `limitApp` is the origins joined
//! by commas, `strategy` 0 white list, 1 black list.

use sentinel_flow_core::RuleError;
use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use serde_json::{Value, json};

use super::JsonRule;
use super::fields::{Object, Problems};
use super::flow::code;

const STRATEGIES: &[(i64, AuthorityStrategy, &str)] = &[
    (0, AuthorityStrategy::White, "white list"),
    (1, AuthorityStrategy::Black, "black list"),
];

impl JsonRule for AuthorityRule {
    const KIND: &'static str = "authority";

    fn to_json(&self) -> Value {
        let mut value = json!({
            "resource": self.resource,
            "limitApp": self.limit_app.join(","),
            "strategy": code(STRATEGIES, &self.strategy),
        });
        if let Some(id) = self.id {
            value["id"] = json!(id);
        }
        value
    }

    fn from_json(o: &Object<'_>, p: &mut Problems) -> Self {
        o.no_regex(p);
        let origins = o.string("limitApp", p).unwrap_or_default();
        AuthorityRule {
            id: o.unsigned("id", p),
            resource: o.string("resource", p).unwrap_or_default(),
            strategy: o.enumerated("strategy", p, STRATEGIES, AuthorityStrategy::White),
            // As Sentinel splits it: on commas, names kept as written
            // (Sentinel compares them untrimmed), empty names dropped.
            limit_app: origins
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        }
    }

    fn core_problems(&self, index: usize) -> Vec<RuleError> {
        self.problems(index)
    }
}
