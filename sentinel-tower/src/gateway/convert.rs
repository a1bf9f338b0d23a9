//! Turns API definitions and gateway rules into what the layer reads per
//! request (each resource's arguments, where each comes from) and the
//! core's rules, as Sentinel's `GatewayRuleConverter` does:
//!
//! - a rule with a parameter item becomes a `param_flow` rule on its own
//!   argument of the resource's entries (the rule's place among the
//!   resource's rules with items): `count`, `interval_sec` as the
//!   duration, `burst`, the behaviour and queueing time carried over;
//!   values the item's pattern does not match, and missing ones, are
//!   handed over as one marker value with a threshold no traffic reaches
//!   (so they pass), missing ones as another, counted, marker when the
//!   item counts them as one. Markers are not strings: no client value
//!   can be one;
//! - a rule without one becomes a `flow` rule on the resource, or, where
//!   a flow rule cannot say it (an interval other than one second, a
//!   burst), a `param_flow` rule on a constant argument, as Sentinel's
//!   converter does for every such rule.

use std::collections::{HashMap, HashSet};

use http::header::HeaderName;
use sentinel_flow_core::flow::{ControlBehavior, FlowGrade, FlowRule};
use sentinel_flow_core::param_flow::{
    MAX_PARAM_COUNT, ParamControlBehavior, ParamFlowGrade, ParamFlowItem, ParamFlowRule,
};
use sentinel_flow_core::{ParamValue, Resource, RuleError, Sentinel};

use super::error::{GatewayError, GatewayErrors};
use super::matcher::{PathMatcher, ValueMatcher};
use super::model::{
    ApiDefinition, GatewayBehavior, GatewayGrade, GatewayParamItem, GatewayRule,
    MAX_API_DEFINITIONS, MAX_API_PREDICATES, MAX_FIELD_NAME_LEN, MAX_GATEWAY_NAME_LEN,
    MAX_GATEWAY_RULES, MAX_PARAM_ITEMS_PER_RESOURCE, ParseStrategy, ResourceMode,
};

const API: &str = "api_definition";
const RULE: &str = "gateway_rule";

/// The argument of a value the item's pattern does not match, or of a
/// missing one: passes (its threshold is out of reach).
pub(crate) fn not_matched() -> ParamValue {
    ParamValue::Bool(false)
}

/// The argument of every request without the attribute, when the item
/// counts them as one.
pub(crate) fn missing() -> ParamValue {
    ParamValue::Bool(true)
}

/// The argument a rule without an item reads when it is a `param_flow`
/// rule.
pub(crate) fn constant() -> ParamValue {
    ParamValue::Int(0)
}

/// Where one argument of a resource's entries comes from.
#[derive(Clone, Debug)]
pub(crate) enum ArgSource {
    Constant,
    Item(Item),
}

/// A parameter item, compiled.
#[derive(Clone, Debug)]
pub(crate) struct Item {
    pub(crate) parse: ParseStrategy,
    /// The header (for `Header`), or the query parameter or cookie name.
    pub(crate) header: Option<HeaderName>,
    pub(crate) field: String,
    pub(crate) matcher: ValueMatcher,
    pub(crate) missing_as_one: bool,
}

/// An API definition, compiled.
#[derive(Clone, Debug)]
pub(crate) struct Api {
    pub(crate) name: String,
    pub(crate) predicates: Vec<PathMatcher>,
    /// What its entries read and its resource handle (set by
    /// [`Plan::attach`]).
    pub(crate) target: Target,
}

/// A resource a request enters: its handle (found once, at load) and the
/// arguments its rules read.
#[derive(Clone, Debug, Default)]
pub(crate) struct Target {
    pub(crate) resource: Option<Resource<'static>>,
    pub(crate) args: Vec<ArgSource>,
}

type Map<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// A set of bytes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ByteSet([u64; 4]);

impl ByteSet {
    fn insert(&mut self, byte: u8) {
        self.0[usize::from(byte >> 6)] |= 1 << (byte & 63);
    }

    fn contains(&self, byte: u8) -> bool {
        self.0[usize::from(byte >> 6)] & (1 << (byte & 63)) != 0
    }
}

impl Api {
    pub(crate) fn matches(&self, path: &str) -> bool {
        self.predicates
            .iter()
            .any(|predicate| predicate.matches(path))
    }
}

/// What one load compiles to.
#[derive(Clone, Debug, Default)]
pub(crate) struct Plan {
    pub(crate) apis: Vec<Api>,
    /// The arguments of each resource a rule names (routes and APIs).
    pub(crate) args: Map<Vec<ArgSource>>,
    /// What a route's entries read, for each resource a rule names (set
    /// by [`Plan::attach`]).
    pub(crate) routes: Map<Target>,
    /// The first bytes of the names in `routes`, so that a path no route
    /// can be named by is not cleaned and looked up (set by
    /// [`Plan::attach`]).
    pub(crate) route_starts: ByteSet,
    /// The core's rules.
    pub(crate) flow: Vec<FlowRule>,
    pub(crate) param: Vec<ParamFlowRule>,
    /// As given, for reading back.
    pub(crate) definitions: Vec<ApiDefinition>,
    pub(crate) rules: Vec<GatewayRule>,
}

impl Plan {
    /// Finds the resource handles of every API and every resource a rule
    /// names on `sentinel`, with the arguments each reads.
    pub(crate) fn attach(&mut self, sentinel: &'static Sentinel) {
        let target = |name: &str, args: &Map<Vec<ArgSource>>| Target {
            resource: Some(sentinel.resource(name)),
            args: args.get(name).cloned().unwrap_or_default(),
        };
        for api in &mut self.apis {
            api.target = target(&api.name, &self.args);
        }
        self.routes = self
            .args
            .keys()
            .map(|name| (name.clone(), target(name, &self.args)))
            .collect();
        self.route_starts = ByteSet::default();
        for name in self.routes.keys() {
            if let Some(&first) = name.as_bytes().first() {
                self.route_starts.insert(first);
            }
        }
    }

    /// Whether a path cleaned by [`clean_path`](crate::clean_path) may be
    /// the name of one of `routes`: the cleaned path starts with the
    /// path's first byte, or with `{` when its first segment is an
    /// identifier (and is empty when the path is).
    pub(crate) fn may_name_route(&self, path: &str) -> bool {
        path.as_bytes().first().is_some_and(|&first| {
            self.route_starts.contains(first) || self.route_starts.contains(b'{')
        })
    }

    /// The resources the core's rules of this plan name.
    pub(crate) fn resources(&self) -> HashSet<&str> {
        self.flow
            .iter()
            .map(|rule| rule.resource.as_str())
            .chain(self.param.iter().map(|rule| rule.resource.as_str()))
            .collect()
    }
}

/// Compiles `definitions` and `rules`; every problem is returned, and
/// nothing is compiled if there is one.
pub(crate) fn compile(
    definitions: Vec<ApiDefinition>,
    rules: Vec<GatewayRule>,
) -> Result<Plan, GatewayErrors> {
    let mut errors = Vec::new();
    let mut plan = Plan::default();
    if definitions.len() > MAX_API_DEFINITIONS {
        errors.push(GatewayError::new(
            API,
            MAX_API_DEFINITIONS,
            "",
            "api_definitions",
            format!(
                "more than {MAX_API_DEFINITIONS} definitions ({})",
                definitions.len()
            ),
        ));
    }
    if rules.len() > MAX_GATEWAY_RULES {
        errors.push(GatewayError::new(
            RULE,
            MAX_GATEWAY_RULES,
            "",
            "gateway_rules",
            format!("more than {MAX_GATEWAY_RULES} rules ({})", rules.len()),
        ));
    }
    if !errors.is_empty() {
        return Err(GatewayErrors(errors));
    }
    let mut names = HashSet::new();
    for (index, definition) in definitions.iter().enumerate() {
        let error = |field: String, message: String| {
            GatewayError::new(API, index, &definition.name, field, message)
        };
        if let Some(message) = name_problem(&definition.name) {
            errors.push(error("name".into(), message));
        } else if !names.insert(definition.name.as_str()) {
            errors.push(error("name".into(), "defined twice".into()));
        }
        if definition.predicates.is_empty() {
            errors.push(error("predicates".into(), "must not be empty".into()));
        }
        if definition.predicates.len() > MAX_API_PREDICATES {
            errors.push(error(
                "predicates".into(),
                format!(
                    "more than {MAX_API_PREDICATES} predicates ({})",
                    definition.predicates.len()
                ),
            ));
            continue;
        }
        let mut predicates = Vec::with_capacity(definition.predicates.len());
        for (at, predicate) in definition.predicates.iter().enumerate() {
            match PathMatcher::new(&predicate.pattern, predicate.match_strategy) {
                Ok(matcher) => predicates.push(matcher),
                Err(message) => errors.push(error(format!("predicates[{at}].pattern"), message)),
            }
        }
        plan.apis.push(Api {
            name: definition.name.clone(),
            predicates,
            target: Target::default(),
        });
    }
    for (index, rule) in rules.iter().enumerate() {
        if let Err(error) = convert(index, rule, &names, &mut plan) {
            errors.push(error);
        }
    }
    if !errors.is_empty() {
        return Err(GatewayErrors(errors));
    }
    plan.definitions = definitions;
    plan.rules = rules;
    Ok(plan)
}

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

/// Converts one rule into `plan`; on an error `plan` is left for the
/// caller to drop.
fn convert(
    index: usize,
    rule: &GatewayRule,
    apis: &HashSet<&str>,
    plan: &mut Plan,
) -> Result<(), GatewayError> {
    let error = |field: &str, message: String| {
        GatewayError::new(RULE, index, &rule.resource, field, message)
    };
    if let Some(message) = name_problem(&rule.resource) {
        return Err(error("resource", message));
    }
    if rule.resource_mode == ResourceMode::ApiGroup && !apis.contains(rule.resource.as_str()) {
        return Err(error(
            "resource",
            "no API definition of this name (resource_mode api_group)".into(),
        ));
    }
    let core_error = |problem: RuleError| error(gateway_field(problem.field), problem.message);
    let args = plan.args.entry(rule.resource.clone()).or_default();
    let item = match &rule.param_item {
        Some(item) => Some(compile_item(item).map_err(|(field, message)| error(field, message))?),
        None if rule.interval_sec == 1 && rule.burst == 0 => {
            let flow = FlowRule {
                grade: match rule.grade {
                    GatewayGrade::Qps => FlowGrade::Qps,
                    GatewayGrade::Concurrency => FlowGrade::Concurrency,
                },
                control_behavior: match rule.control_behavior {
                    GatewayBehavior::Reject => ControlBehavior::Reject,
                    GatewayBehavior::RateLimiter => ControlBehavior::RateLimiter,
                },
                max_queueing_time_ms: rule.max_queueing_timeout_ms,
                ..FlowRule::new(rule.resource.clone(), rule.count)
            };
            flow.validate(index).map_err(core_error)?;
            plan.flow.push(flow);
            return Ok(());
        }
        None => None,
    };
    if args.len() == MAX_PARAM_ITEMS_PER_RESOURCE {
        return Err(error(
            "param_item",
            format!(
                "more than {MAX_PARAM_ITEMS_PER_RESOURCE} rules with a parameter item (or an interval or burst) on one resource"
            ),
        ));
    }
    let mut param = ParamFlowRule {
        grade: match rule.grade {
            GatewayGrade::Qps => ParamFlowGrade::Qps,
            GatewayGrade::Concurrency => ParamFlowGrade::Concurrency,
        },
        control_behavior: match rule.control_behavior {
            GatewayBehavior::Reject => ParamControlBehavior::Reject,
            GatewayBehavior::RateLimiter => ParamControlBehavior::RateLimiter,
        },
        max_queueing_time_ms: rule.max_queueing_timeout_ms,
        burst_count: rule.burst,
        duration_in_sec: rule.interval_sec,
        // Within i32: at most MAX_PARAM_ITEMS_PER_RESOURCE.
        ..ParamFlowRule::new(rule.resource.clone(), args.len() as i32, rule.count)
    };
    if item.is_some() {
        // Values outside the pattern (and missing ones) pass: a threshold
        // of their own that no traffic reaches.
        let out_of_reach = MAX_PARAM_COUNT.saturating_sub(rule.burst).max(1);
        param.param_flow_item_list = vec![ParamFlowItem::new(not_matched(), out_of_reach as f64)];
    }
    param.validate(index).map_err(core_error)?;
    args.push(match item {
        Some(item) => ArgSource::Item(item),
        None => ArgSource::Constant,
    });
    plan.param.push(param);
    Ok(())
}

/// The gateway rule's name for a field of the core rule it became.
fn gateway_field(core: &str) -> &str {
    match core {
        "duration_in_sec" | "stat_interval_ms" => "interval_sec",
        "burst_count" => "burst",
        "max_queueing_time_ms" => "max_queueing_timeout_ms",
        other => other,
    }
}

fn compile_item(item: &GatewayParamItem) -> Result<Item, (&'static str, String)> {
    let needs_field = matches!(
        item.parse,
        ParseStrategy::Header | ParseStrategy::UrlParam | ParseStrategy::Cookie
    );
    let field = match (&item.field_name, needs_field) {
        (_, false) => String::new(),
        (None, true) => {
            return Err((
                "param_item.field_name",
                format!("required to parse {:?}", item.parse),
            ));
        }
        (Some(field), true) if field.is_empty() => {
            return Err(("param_item.field_name", "must not be empty".into()));
        }
        (Some(field), true) if field.len() > MAX_FIELD_NAME_LEN => {
            return Err((
                "param_item.field_name",
                format!(
                    "longer than {MAX_FIELD_NAME_LEN} bytes ({} bytes)",
                    field.len()
                ),
            ));
        }
        (Some(field), true) => field.clone(),
    };
    let header = match item.parse {
        ParseStrategy::Header => Some(HeaderName::try_from(field.as_str()).map_err(|_| {
            (
                "param_item.field_name",
                format!("not a valid header name: {field:?}"),
            )
        })?),
        _ => None,
    };
    let matcher = ValueMatcher::new(item.pattern.as_deref(), item.match_strategy)
        .map_err(|message| ("param_item.pattern", message))?;
    Ok(Item {
        parse: item.parse,
        header,
        field,
        matcher,
        missing_as_one: item.count_missing_as_one,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::model::{ApiPredicate, ValueMatch};

    fn orders() -> Vec<ApiDefinition> {
        vec![ApiDefinition::new(
            "orders",
            vec![ApiPredicate::prefix("/orders/**")],
        )]
    }

    #[test]
    fn a_rule_with_an_item_becomes_a_param_flow_rule_on_its_own_argument() {
        let rules = vec![
            GatewayRule::api_group("orders", 10.0).param_item(GatewayParamItem::client_ip()),
            GatewayRule {
                interval_sec: 60,
                burst: 5,
                ..GatewayRule::api_group("orders", 100.0)
                    .param_item(GatewayParamItem::header("x-api-key"))
            },
        ];
        let plan = compile(orders(), rules).unwrap();
        assert!(plan.flow.is_empty());
        assert_eq!(plan.param.len(), 2);
        assert_eq!((plan.param[0].param_idx, plan.param[0].count), (0, 10.0));
        let second = &plan.param[1];
        assert_eq!(second.param_idx, 1);
        assert_eq!((second.duration_in_sec, second.burst_count), (60, 5));
        // Values outside a pattern, and missing ones, pass on a marker.
        assert_eq!(second.param_flow_item_list[0].value, not_matched());
        assert_eq!(plan.args["orders"].len(), 2);
    }

    #[test]
    fn a_path_may_name_a_route_only_as_its_cleaned_form_can() {
        let sentinel: &'static Sentinel = Box::leak(Box::new(
            Sentinel::builder()
                .clock(sentinel_flow_core::ManualClock::new(0))
                .build(),
        ));
        let mut plan = compile(orders(), vec![GatewayRule::api_group("orders", 1.0)]).unwrap();
        plan.attach(sentinel);
        // Only the API's name: no path starting with `/` can be it.
        assert!(!plan.may_name_route("/orders/42"));
        assert!(plan.may_name_route("orders"));
        let mut plan = compile(vec![], vec![GatewayRule::route("/orders/{id}", 1.0)]).unwrap();
        plan.attach(sentinel);
        assert!(plan.may_name_route("/orders/42") && !plan.may_name_route("orders"));
        assert!(!plan.may_name_route(""));
        // A name starting with an identifier's placeholder: any path whose
        // first segment is an identifier is cleaned to start with it.
        let mut plan = compile(vec![], vec![GatewayRule::route("{id}/a", 1.0)]).unwrap();
        plan.attach(sentinel);
        assert_eq!(crate::clean_path("42/a"), "{id}/a");
        assert!(plan.may_name_route("42/a"));
        assert!(!plan.may_name_route(""));
        assert!(!Plan::default().may_name_route("/orders"));
    }

    #[test]
    fn a_rule_without_an_item_is_a_flow_rule_unless_it_needs_an_interval_or_burst() {
        let rules = vec![
            GatewayRule::route("/a", 5.0),
            GatewayRule {
                interval_sec: 2,
                ..GatewayRule::route("/b", 5.0)
            },
        ];
        let plan = compile(vec![], rules).unwrap();
        assert_eq!(plan.flow.len(), 1);
        assert_eq!(plan.flow[0].resource, "/a");
        assert_eq!(plan.param.len(), 1);
        assert_eq!(plan.param[0].duration_in_sec, 2);
        assert!(plan.param[0].param_flow_item_list.is_empty());
        assert!(matches!(plan.args["/b"][..], [ArgSource::Constant]));
    }

    #[test]
    fn every_bad_field_is_named_and_nothing_compiles() {
        let definitions = vec![
            ApiDefinition::new("", vec![ApiPredicate::exact("/a")]),
            ApiDefinition::new("x", vec![ApiPredicate::regex("(")]),
            ApiDefinition::new("x", vec![]),
        ];
        let rules = vec![
            GatewayRule::api_group("nope", 1.0),
            GatewayRule::route("/a", -1.0),
            GatewayRule::route("/a", 1.0).param_item(GatewayParamItem {
                field_name: None,
                ..GatewayParamItem::header("")
            }),
            GatewayRule::route("/a", 1.0).param_item(GatewayParamItem::header("bad header")),
            GatewayRule::route("/a", 1.0)
                .param_item(GatewayParamItem::client_ip().pattern("[", ValueMatch::Regex)),
            GatewayRule {
                interval_sec: 0,
                ..GatewayRule::route("/a", 1.0)
            },
        ];
        let errors = compile(definitions, rules).unwrap_err();
        let fields: Vec<_> = errors
            .errors()
            .iter()
            .map(|e| (e.kind, e.index, e.field.as_str()))
            .collect();
        assert_eq!(
            fields,
            [
                (API, 0, "name"),
                (API, 1, "predicates[0].pattern"),
                (API, 2, "name"),
                (API, 2, "predicates"),
                (RULE, 0, "resource"),
                (RULE, 1, "count"),
                (RULE, 2, "param_item.field_name"),
                (RULE, 3, "param_item.field_name"),
                (RULE, 4, "param_item.pattern"),
                (RULE, 5, "interval_sec"),
            ]
        );
        assert!(
            errors
                .to_string()
                .starts_with("10 invalid gateway item(s): ")
        );
    }

    #[test]
    fn too_many_items_on_one_resource_are_refused() {
        let rules: Vec<_> = (0..=MAX_PARAM_ITEMS_PER_RESOURCE)
            .map(|i| {
                GatewayRule::route("/a", 1.0).param_item(GatewayParamItem::header(format!("h{i}")))
            })
            .collect();
        let errors = compile(vec![], rules).unwrap_err();
        assert_eq!(errors.errors().len(), 1);
        assert_eq!(errors.errors()[0].index, MAX_PARAM_ITEMS_PER_RESOURCE);
    }
}
