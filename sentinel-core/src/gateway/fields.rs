//! API definitions' and gateway rules' fields, for the codecs: each
//! field's name in a rule file and in Sentinel's JSON (`ApiDefinition`,
//! `GatewayFlowRule`, `GatewayParamFlowItem`), its default, and each
//! enum's words and numbers (`SentinelGatewayConstants`, `RuleConstant`).

use super::model::{
    ApiDefinition, ApiPredicate, GatewayBehavior, GatewayGrade, GatewayParamItem, GatewayRule,
    ParseStrategy, PathMatch, ResourceMode, ValueMatch,
};
use crate::rule::RuleError;
use crate::rule::describe::{Choice, Commands, Describe, DescribeRule, Fields, Name};

const MODES: &[Choice<ResourceMode>] = &[
    Choice::new(ResourceMode::Route, "route", 0, "route id"),
    Choice::new(ResourceMode::ApiGroup, "api_group", 1, "custom API name"),
];

/// In a rule file's order (problems give Sentinel's numbers in order).
const GRADES: &[Choice<GatewayGrade>] = &[
    Choice::new(GatewayGrade::Qps, "qps", 1, "QPS"),
    Choice::new(GatewayGrade::Concurrency, "thread", 0, "thread count"),
];

const BEHAVIORS: &[Choice<GatewayBehavior>] = &[
    Choice::new(GatewayBehavior::Reject, "reject", 0, "reject"),
    Choice::new(
        GatewayBehavior::RateLimiter,
        "rate_limiter",
        2,
        "rate limiter",
    ),
];

const PARSES: &[Choice<ParseStrategy>] = &[
    Choice::new(ParseStrategy::ClientIp, "client_ip", 0, "client IP"),
    Choice::new(ParseStrategy::Host, "host", 1, "host"),
    Choice::new(ParseStrategy::Header, "header", 2, "header"),
    Choice::new(ParseStrategy::UrlParam, "url_param", 3, "URL parameter"),
    Choice::new(ParseStrategy::Cookie, "cookie", 4, "cookie"),
];

const VALUE_MATCHES: &[Choice<ValueMatch>] = &[
    Choice::new(ValueMatch::Exact, "exact", 0, "exact"),
    Choice::new(ValueMatch::Prefix, "prefix", 1, "prefix"),
    Choice::new(ValueMatch::Regex, "regex", 2, "regex"),
    Choice::new(ValueMatch::Contains, "contains", 3, "contains"),
];

const PATH_MATCHES: &[Choice<PathMatch>] = &[
    Choice::new(PathMatch::Exact, "exact", 0, "exact"),
    Choice::new(PathMatch::Prefix, "prefix", 1, "prefix"),
    Choice::new(PathMatch::Regex, "regex", 2, "regex"),
];

impl Describe for ApiPredicate {
    fn describe<F: Fields>(&mut self, f: &mut F) {
        let pattern = Name::new("pattern", "pattern")
            .required()
            .required_in_json("");
        f.string(pattern, &mut self.pattern, "");
        let strategy = Name::new("match_strategy", "matchStrategy");
        f.choice(
            strategy,
            &mut self.match_strategy,
            PathMatch::Exact,
            PATH_MATCHES,
        );
    }
}

impl Describe for ApiDefinition {
    fn describe<F: Fields>(&mut self, f: &mut F) {
        let name = Name::new("name", "apiName")
            .required()
            .required_in_json("")
            .names_rule()
            .first();
        f.string(name, &mut self.name, "");
        let predicates = Name::new("predicates", "predicateItems").required();
        f.list(predicates, &mut self.predicates);
    }
}

impl Describe for GatewayParamItem {
    fn describe<F: Fields>(&mut self, f: &mut F) {
        let parse = Name::new("parse_strategy", "parseStrategy").required();
        f.choice(parse, &mut self.parse, ParseStrategy::ClientIp, PARSES);
        f.optional_string(Name::new("field_name", "fieldName"), &mut self.field_name);
        f.optional_string(Name::new("pattern", "pattern"), &mut self.pattern);
        let strategy = Name::new("match_strategy", "matchStrategy");
        f.choice(
            strategy,
            &mut self.match_strategy,
            ValueMatch::Exact,
            VALUE_MATCHES,
        );
        let missing = Name::new("count_missing_as_one", "countMissingAsOne");
        f.boolean(missing, &mut self.count_missing_as_one, false);
    }
}

impl Describe for GatewayRule {
    fn describe<F: Fields>(&mut self, f: &mut F) {
        let d = GatewayRule::default();
        let resource = Name::new("resource", "resource")
            .required()
            .required_in_json("")
            .names_rule()
            .first();
        f.string(resource, &mut self.resource, "");
        let mode = Name::new("resource_mode", "resourceMode");
        f.choice(mode, &mut self.resource_mode, d.resource_mode, MODES);
        f.choice(
            Name::new("grade", "grade"),
            &mut self.grade,
            d.grade,
            GRADES,
        );
        let count = Name::new("count", "count").required().first();
        f.number(count, &mut self.count, d.count);
        let interval = Name::new("interval_sec", "intervalSec");
        f.whole(interval, &mut self.interval_sec, d.interval_sec);
        let behavior = Name::new("control_behavior", "controlBehavior");
        f.choice(
            behavior,
            &mut self.control_behavior,
            d.control_behavior,
            BEHAVIORS,
        );
        f.whole(Name::new("burst", "burst"), &mut self.burst, d.burst);
        let queueing = Name::new("max_queueing_timeout_ms", "maxQueueingTimeoutMs");
        f.whole(
            queueing,
            &mut self.max_queueing_timeout_ms,
            d.max_queueing_timeout_ms,
        );
        let item = Name::new("param_item", "paramItem");
        f.optional_nested(item, &mut self.param_item);
    }
}

impl DescribeRule for ApiDefinition {
    const KIND: &'static str = super::rule::API_KIND_NAME;
    const SENTINEL_KIND: &'static str = "gatewayApiDefinition";
    const FILE_ORDER: u32 = 6;
    const COMMANDS: Option<Commands> = Some(Commands {
        get: "gateway/getApiDefinitions",
        get_help: "Fetch all customized gateway API groups",
        set: "gateway/updateApiDefinitions",
        set_help: "Update gateway customized API definitions",
    });

    fn problems(&self, index: usize, max_name_len: usize) -> Vec<RuleError> {
        let mut problems = ApiDefinition::problems(self, index);
        problems.extend(self.name_problems(index, max_name_len));
        problems
    }

    fn across(rules: &[Self]) -> Vec<RuleError> {
        ApiDefinition::across(rules)
    }
}

impl DescribeRule for GatewayRule {
    const KIND: &'static str = super::rule::GATEWAY_KIND_NAME;
    const SENTINEL_KIND: &'static str = "gatewayFlow";
    const FILE_ORDER: u32 = 7;
    const COMMANDS: Option<Commands> = Some(Commands {
        get: "gateway/getRules",
        get_help: "Fetch all gateway rules",
        set: "gateway/updateRules",
        set_help: "Update gateway rules",
    });

    fn problems(&self, index: usize, max_name_len: usize) -> Vec<RuleError> {
        let mut problems = GatewayRule::problems(self, index);
        problems.extend(self.name_problems(index, max_name_len));
        problems
    }

    fn across(rules: &[Self]) -> Vec<RuleError> {
        GatewayRule::across(rules)
    }
}
