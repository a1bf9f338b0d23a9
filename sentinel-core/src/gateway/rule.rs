//! What makes an API definition or a gateway rule valid, the hot-parameter
//! rule a gateway rule becomes, and what the engine reads of each (names,
//! footprint, display).

use std::any::Any;
use std::collections::{HashMap, HashSet};
use std::fmt;

use super::matcher::{PathMatcher, ValueMatcher};
use super::model::{
    ApiDefinition, GatewayBehavior, GatewayGrade, GatewayParamItem, GatewayRule,
    MAX_API_DEFINITIONS, MAX_API_PREDICATES, MAX_FIELD_NAME_LEN, MAX_GATEWAY_NAME_LEN,
    MAX_GATEWAY_RULES, MAX_PARAM_ITEMS_PER_RESOURCE, MAX_REGEX_BYTES, ParseStrategy, PathMatch,
    ResourceMode, ValueMatch,
};
use crate::BlockKind;
use crate::param_flow::{
    MAX_PARAM_COUNT, ParamControlBehavior, ParamFlowGrade, ParamFlowItem, ParamFlowRule,
};
use crate::rule::footprint::{Footprint, string_bytes};
use crate::rule::names::{Names, RuleName, name_problems};
use crate::rule::{Problems, Rule, RuleError};

/// The API definitions kind's name in errors and logs.
pub(crate) const API_KIND_NAME: &str = BlockKind::ApiDefinitions.as_str();
/// The gateway kind's name in errors and logs.
pub(crate) const GATEWAY_KIND_NAME: &str = BlockKind::Gateway.as_str();

fn name_problem(name: &str) -> Option<String> {
    if name.trim().is_empty() {
        return Some("must not be empty".into());
    }
    if name.len() > MAX_GATEWAY_NAME_LEN {
        return Some(format!(
            "longer than {MAX_GATEWAY_NAME_LEN} bytes ({} bytes)",
            name.len()
        ));
    }
    None
}

/// Whether `name` is a valid HTTP header name (RFC 9110 token).
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

impl ApiDefinition {
    /// Checks every field; the first problem found is returned, naming the
    /// field. `index` is the definition's position in the list loaded.
    pub fn validate(&self, index: usize) -> Result<(), RuleError> {
        self.problems(index).into_iter().next().map_or(Ok(()), Err)
    }

    /// Every problem of the definition (empty when it is valid): its name,
    /// its predicates (each pattern compiled: a bad regular expression is
    /// a problem).
    pub fn problems(&self, index: usize) -> Vec<RuleError> {
        let mut problems = Problems::new(API_KIND_NAME, index, &self.name);
        if let Some(message) = name_problem(&self.name) {
            problems.add("name", message);
        }
        if self.predicates.is_empty() {
            problems.add("predicates", "must not be empty");
        }
        if self.predicates.len() > MAX_API_PREDICATES {
            problems.add(
                "predicates",
                format!(
                    "more than {MAX_API_PREDICATES} predicates ({})",
                    self.predicates.len()
                ),
            );
            return problems.into_vec();
        }
        for (at, predicate) in self.predicates.iter().enumerate() {
            if let Err(message) = PathMatcher::new(&predicate.pattern, predicate.match_strategy) {
                problems.add("predicates", format!("pattern {at}: {message}"));
            }
        }
        problems.into_vec()
    }

    /// Problems between the definitions of one list: a name defined twice,
    /// too many definitions.
    pub(crate) fn across(definitions: &[ApiDefinition]) -> Vec<RuleError> {
        let mut errors = Vec::new();
        if definitions.len() > MAX_API_DEFINITIONS {
            errors.push(RuleError::new(
                API_KIND_NAME,
                MAX_API_DEFINITIONS,
                "",
                "name",
                format!(
                    "more than {MAX_API_DEFINITIONS} definitions ({})",
                    definitions.len()
                ),
            ));
            return errors;
        }
        let mut names = HashSet::new();
        for (index, definition) in definitions.iter().enumerate() {
            if !names.insert(definition.name.as_str()) {
                errors.push(RuleError::new(
                    API_KIND_NAME,
                    index,
                    &definition.name,
                    "name",
                    "defined twice",
                ));
            }
        }
        errors
    }

    name_problems!(API_KIND_NAME);

    /// The names the definition mentions: its name (the resource its
    /// requests enter).
    pub(crate) fn names(&self) -> Names<'_> {
        std::iter::once(RuleName::resource(&self.name)).collect()
    }

    /// The most memory the definition may take once loaded: the
    /// definition, its name, each pattern three times (the definition, its
    /// copy, the compiled matcher) and each regular expression at its
    /// bound (its program and its matching cache).
    pub(crate) fn footprint(&self) -> Footprint {
        let patterns = self.predicates.iter().fold(0u64, |bytes, predicate| {
            let regex = match predicate.match_strategy {
                PathMatch::Regex => 2 * MAX_REGEX_BYTES as u64,
                _ => 0,
            };
            bytes
                .saturating_add(3 * string_bytes(&predicate.pattern))
                .saturating_add(regex)
        });
        Footprint::of_rule::<ApiDefinition, super::CompiledApi>()
            .name(&self.name)
            .part("predicates", patterns)
    }
}

impl GatewayRule {
    /// Checks every field; the first problem found is returned, naming the
    /// field. `index` is the rule's position in the list loaded.
    pub fn validate(&self, index: usize) -> Result<(), RuleError> {
        self.problems(index).into_iter().next().map_or(Ok(()), Err)
    }

    /// Every problem of the rule (empty when it is valid): its name, its
    /// thresholds as the hot-parameter rule it becomes checks them, and its
    /// parameter item (a field name where the strategy reads one, its
    /// pattern compiled: a bad regular expression is a problem).
    pub fn problems(&self, index: usize) -> Vec<RuleError> {
        let mut problems = Problems::new(GATEWAY_KIND_NAME, index, &self.resource);
        if let Some(message) = name_problem(&self.resource) {
            problems.add("resource", message);
        }
        let mut found = problems.into_vec();
        for problem in self.to_param_flow(0).problems(index) {
            if problem.field == "resource" {
                continue;
            }
            found.push(RuleError::new(
                GATEWAY_KIND_NAME,
                index,
                &self.resource,
                gateway_field(problem.field),
                problem.message,
            ));
        }
        let mut problems = Problems::new(GATEWAY_KIND_NAME, index, &self.resource);
        if let Some(item) = &self.param_item {
            item_problems(item, &mut problems);
        }
        found.extend(problems.into_vec());
        found
    }

    /// Problems between the rules of one list: too many rules, too many on
    /// one resource.
    pub(crate) fn across(rules: &[GatewayRule]) -> Vec<RuleError> {
        if rules.len() > MAX_GATEWAY_RULES {
            return vec![RuleError::new(
                GATEWAY_KIND_NAME,
                MAX_GATEWAY_RULES,
                "",
                "resource",
                format!("more than {MAX_GATEWAY_RULES} rules ({})", rules.len()),
            )];
        }
        let mut counts: HashMap<&str, usize> = HashMap::new();
        let mut errors = Vec::new();
        for (index, rule) in rules.iter().enumerate() {
            let count = counts.entry(rule.resource.as_str()).or_insert(0);
            *count += 1;
            if *count == MAX_PARAM_ITEMS_PER_RESOURCE + 1 {
                errors.push(RuleError::new(
                    GATEWAY_KIND_NAME,
                    index,
                    &rule.resource,
                    "resource",
                    format!(
                        "more than {MAX_PARAM_ITEMS_PER_RESOURCE} gateway rules on one resource"
                    ),
                ));
            }
        }
        errors
    }

    /// The hot-parameter rule the gateway rule becomes, reading the
    /// argument at `param_idx` of its resource's entries.
    pub(crate) fn to_param_flow(&self, param_idx: usize) -> ParamFlowRule {
        let mut param = ParamFlowRule {
            grade: match self.grade {
                GatewayGrade::Qps => ParamFlowGrade::Qps,
                GatewayGrade::Concurrency => ParamFlowGrade::Concurrency,
            },
            control_behavior: match self.control_behavior {
                GatewayBehavior::Reject => ParamControlBehavior::Reject,
                GatewayBehavior::RateLimiter => ParamControlBehavior::RateLimiter,
            },
            max_queueing_time_ms: self.max_queueing_timeout_ms,
            burst_count: self.burst,
            duration_in_sec: self.interval_sec,
            // At most MAX_PARAM_ITEMS_PER_RESOURCE once the list is valid.
            ..ParamFlowRule::new(
                self.resource.clone(),
                i32::try_from(param_idx).unwrap_or(i32::MAX),
                self.count,
            )
        };
        if self.param_item.is_some() {
            // Values outside the pattern (and missing ones) pass: a
            // threshold of their own that no traffic reaches.
            let out_of_reach = MAX_PARAM_COUNT.saturating_sub(self.burst).max(1);
            param.param_flow_item_list = vec![ParamFlowItem::new(
                super::not_matched(),
                out_of_reach as f64,
            )];
        }
        param
    }

    /// The most values the rule's table tracks at once: the capacity of
    /// the hot-parameter rule it becomes, from its count
    /// ([`ParamFlowRule::effective_capacity`]). Past it, a new value
    /// evicts the least frequent one; see [`param_flow`](crate::param_flow).
    pub fn effective_capacity(&self) -> usize {
        self.to_param_flow(0).effective_capacity()
    }

    name_problems!(GATEWAY_KIND_NAME);

    /// The names the rule mentions: its resource (a route or an API).
    pub(crate) fn names(&self) -> Names<'_> {
        std::iter::once(RuleName::resource(&self.resource)).collect()
    }

    /// The most memory the rule may take once loaded: the hot-parameter
    /// rule it becomes (its value table full), the rule and its copies,
    /// and its item's regular expression at its bound.
    pub(crate) fn footprint(&self) -> Footprint {
        let param = self.to_param_flow(0).footprint();
        let item = self.param_item.as_ref().map_or(0, |item| {
            let text = item.field_name.as_deref().map_or(0, string_bytes)
                + item.pattern.as_deref().map_or(0, string_bytes);
            let regex = match item.match_strategy {
                ValueMatch::Regex if item.pattern.as_deref().is_some_and(|p| !p.is_empty()) => {
                    2 * MAX_REGEX_BYTES as u64
                }
                _ => 0,
            };
            3 * text + regex
        });
        Footprint::of_rule::<GatewayRule, super::compiled::CompiledGatewayRule>()
            .name(&self.resource)
            .part("param_item", item)
            .part("count", param.bytes)
    }
}

fn item_problems(item: &GatewayParamItem, problems: &mut Problems<'_>) {
    let needs_field = matches!(
        item.parse,
        ParseStrategy::Header | ParseStrategy::UrlParam | ParseStrategy::Cookie
    );
    if !needs_field {
        // Unread, but kept and written back: bounded like any other.
        if let Some(field) = item.field_name.as_deref()
            && field.len() > MAX_FIELD_NAME_LEN
        {
            problems.add(
                "param_item.field_name",
                format!(
                    "longer than {MAX_FIELD_NAME_LEN} bytes ({} bytes)",
                    field.len()
                ),
            );
        }
    } else {
        match item.field_name.as_deref() {
            None => problems.add(
                "param_item.field_name",
                format!("required to parse {}", parse_word(item.parse)),
            ),
            Some("") => problems.add("param_item.field_name", "must not be empty"),
            Some(field) if field.len() > MAX_FIELD_NAME_LEN => problems.add(
                "param_item.field_name",
                format!(
                    "longer than {MAX_FIELD_NAME_LEN} bytes ({} bytes)",
                    field.len()
                ),
            ),
            Some(field) if item.parse == ParseStrategy::Header && !is_header_name(field) => {
                problems.add(
                    "param_item.field_name",
                    format!("not a valid header name: {field:?}"),
                )
            }
            Some(_) => {}
        }
    }
    if let Err(message) = ValueMatcher::new(item.pattern.as_deref(), item.match_strategy) {
        problems.add("param_item.pattern", message);
    }
}

fn parse_word(parse: ParseStrategy) -> &'static str {
    match parse {
        ParseStrategy::ClientIp => "client_ip",
        ParseStrategy::Host => "host",
        ParseStrategy::Header => "header",
        ParseStrategy::UrlParam => "url_param",
        ParseStrategy::Cookie => "cookie",
    }
}

/// The gateway rule's name for a field of the hot-parameter rule it
/// becomes.
fn gateway_field(core: &'static str) -> &'static str {
    match core {
        "duration_in_sec" => "interval_sec",
        "burst_count" => "burst",
        "max_queueing_time_ms" => "max_queueing_timeout_ms",
        other => other,
    }
}

impl fmt::Display for ApiDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "API definition {}: {} predicate(s)",
            self.name,
            self.predicates.len()
        )
    }
}

impl fmt::Display for GatewayRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mode = match self.resource_mode {
            ResourceMode::Route => "route",
            ResourceMode::ApiGroup => "API group",
        };
        let what = match self.grade {
            GatewayGrade::Qps => "requests",
            GatewayGrade::Concurrency => "at once",
        };
        write!(
            f,
            "gateway rule on {mode} {}: {} {what}",
            self.resource, self.count
        )?;
        if self.grade == GatewayGrade::Qps {
            write!(f, " per {} s", self.interval_sec)?;
        }
        if let Some(item) = &self.param_item {
            write!(f, " per {}", parse_word(item.parse))?;
            if let Some(field) = &item.field_name {
                write!(f, " {field}")?;
            }
        }
        Ok(())
    }
}

impl Rule for ApiDefinition {
    fn resource(&self) -> &str {
        &self.name
    }

    fn block_kind(&self) -> BlockKind {
        BlockKind::ApiDefinitions
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl Rule for GatewayRule {
    fn resource(&self) -> &str {
        &self.resource
    }

    fn block_kind(&self) -> BlockKind {
        BlockKind::Gateway
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::ApiPredicate;

    #[test]
    fn every_bad_field_is_named() {
        let fields = |rule: GatewayRule| -> Vec<&'static str> {
            rule.problems(0).into_iter().map(|e| e.field).collect()
        };
        assert!(fields(GatewayRule::route("/a", 1.0)).is_empty());
        assert_eq!(fields(GatewayRule::route(" ", 1.0)), ["resource"]);
        assert_eq!(fields(GatewayRule::route("/a", -1.0)), ["count"]);
        let interval = GatewayRule {
            interval_sec: 0,
            ..GatewayRule::route("/a", 1.0)
        };
        assert_eq!(fields(interval), ["interval_sec"]);
        let no_field = GatewayRule::route("/a", 1.0).param_item(GatewayParamItem {
            field_name: None,
            ..GatewayParamItem::header("")
        });
        assert_eq!(fields(no_field), ["param_item.field_name"]);
        let bad_header =
            GatewayRule::route("/a", 1.0).param_item(GatewayParamItem::header("bad header"));
        assert_eq!(fields(bad_header), ["param_item.field_name"]);
        let bad_regex = GatewayRule::route("/a", 1.0)
            .param_item(GatewayParamItem::client_ip().pattern("[", ValueMatch::Regex));
        assert_eq!(fields(bad_regex), ["param_item.pattern"]);
        // A field name the strategy does not read is still bounded; an
        // empty one (the dashboard's, for a client IP) is no problem.
        for item in [GatewayParamItem::client_ip(), GatewayParamItem::host()] {
            let long = GatewayRule::route("/a", 1.0).param_item(GatewayParamItem {
                field_name: Some("f".repeat(MAX_FIELD_NAME_LEN + 1)),
                ..item.clone()
            });
            assert_eq!(fields(long), ["param_item.field_name"]);
            let empty = GatewayRule::route("/a", 1.0).param_item(GatewayParamItem {
                field_name: Some(String::new()),
                ..item
            });
            assert!(fields(empty).is_empty());
        }

        let api = |definition: ApiDefinition| -> Vec<&'static str> {
            definition
                .problems(0)
                .into_iter()
                .map(|e| e.field)
                .collect()
        };
        assert!(api(ApiDefinition::new("a", vec![ApiPredicate::exact("/a")])).is_empty());
        assert_eq!(
            api(ApiDefinition::new("", vec![ApiPredicate::exact("/a")])),
            ["name"]
        );
        assert_eq!(api(ApiDefinition::new("a", vec![])), ["predicates"]);
        let regex = ApiDefinition::new("a", vec![ApiPredicate::regex("(")]);
        assert_eq!(api(regex.clone()), ["predicates"]);
        assert!(
            regex.problems(0)[0]
                .message
                .contains("invalid regular expression")
        );
    }

    #[test]
    fn lists_refuse_a_name_defined_twice_and_too_many_rules_on_a_resource() {
        let a = ApiDefinition::new("a", vec![ApiPredicate::exact("/a")]);
        let errors = ApiDefinition::across(&[a.clone(), a]);
        assert_eq!((errors.len(), errors[0].index), (1, 1));
        let rules: Vec<_> = (0..=MAX_PARAM_ITEMS_PER_RESOURCE)
            .map(|_| GatewayRule::route("/a", 1.0))
            .collect();
        let errors = GatewayRule::across(&rules);
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].index, MAX_PARAM_ITEMS_PER_RESOURCE);
    }

    #[test]
    fn a_rule_becomes_a_param_flow_rule_on_its_argument() {
        let rule = GatewayRule {
            interval_sec: 60,
            burst: 5,
            ..GatewayRule::api_group("orders", 100.0).param_item(GatewayParamItem::header("k"))
        };
        let param = rule.to_param_flow(1);
        assert_eq!(param.param_idx, 1);
        assert_eq!((param.duration_in_sec, param.burst_count), (60, 5));
        assert_eq!(
            param.param_flow_item_list[0].value,
            super::super::not_matched()
        );
        assert!(
            GatewayRule::route("/a", 1.0)
                .to_param_flow(0)
                .param_flow_item_list
                .is_empty()
        );
    }
}
