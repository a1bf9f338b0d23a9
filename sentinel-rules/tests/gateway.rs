//! The `api_definitions:` and `gateway:` sections: a file with both puts
//! them in force (and a request through the gateway layer is limited by
//! them), a bad field is reported at its place with nothing changed, the
//! store writes them back as they read, and a load of another kind (a
//! file's flow section replaced, code, a race of both) leaves them in
//! force with their state.

mod support;

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};

use http::{Request, Response, StatusCode};
use sentinel_flow_core::ParamValue;
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::gateway::{
    ApiDefinition, ApiPredicate, GatewayBehavior, GatewayGrade, GatewayParamItem, GatewayRule,
    ParseStrategy, ResourceMode, ValueMatch,
};
use sentinel_flow_rules::{RuleChange, RuleFileStore, apply, parse_str};
use sentinel_flow_tower::gateway::{Gateway, GatewayLayer};
use support::{book, sentinel, temp_file};
use tower::{Layer, ServiceExt};

const GATEWAY: &str = "\
api_definitions:
  - name: orders
    predicates:
      - {pattern: /orders/**, match_strategy: prefix}
      - {pattern: '/items/[0-9]+', match_strategy: regex}
gateway:
  - resource: orders
    resource_mode: api_group
    count: 2
    param_item: {parse_strategy: header, field_name: x-api-key, count_missing_as_one: true}
  - resource: /health
    count: 1
    interval_sec: 60
";

fn orders() -> ApiDefinition {
    ApiDefinition::new(
        "orders",
        vec![
            ApiPredicate::prefix("/orders/**"),
            ApiPredicate::regex("/items/[0-9]+"),
        ],
    )
}

fn per_key() -> GatewayRule {
    GatewayRule::api_group("orders", 2.0)
        .param_item(GatewayParamItem::header("x-api-key").count_missing_as_one(true))
}

/// Every field away from its default.
fn every_field() -> GatewayRule {
    GatewayRule {
        resource: "/pay".into(),
        resource_mode: ResourceMode::Route,
        grade: GatewayGrade::Qps,
        count: 7.0,
        interval_sec: 3,
        control_behavior: GatewayBehavior::RateLimiter,
        burst: 0,
        max_queueing_timeout_ms: 250,
        param_item: Some(GatewayParamItem {
            parse: ParseStrategy::UrlParam,
            field_name: Some("user".into()),
            pattern: Some("vip-.*".into()),
            match_strategy: ValueMatch::Regex,
            count_missing_as_one: true,
        }),
    }
}

/// The status of a GET of `path` with `key` as its API key, through a
/// gateway layer on `gateway`.
fn status(gateway: &Gateway, path: &str, key: Option<&str>) -> StatusCode {
    let inner = tower::service_fn(|_: Request<()>| async {
        Ok::<_, Infallible>(Response::new(String::new()))
    });
    let service = GatewayLayer::new(gateway).layer(inner);
    let mut request = Request::get(path);
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let mut request = request.body(()).unwrap();
    let peer = SocketAddr::from((Ipv4Addr::new(192, 0, 2, 1), 4000));
    request.extensions_mut().insert(peer);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    runtime.block_on(service.oneshot(request)).unwrap().status()
}

#[test]
fn a_file_with_both_sections_loads_and_limits_requests_through_the_layer() {
    let file = parse_str(GATEWAY, "rules.yaml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(file.book.api_definitions, [orders()]);
    let health = GatewayRule {
        interval_sec: 60,
        ..GatewayRule::route("/health", 1.0)
    };
    assert_eq!(file.book.gateway, [per_key(), health.clone()]);
    let sentinel: &'static _ = Box::leak(Box::new(sentinel()));
    apply(sentinel, file).unwrap();
    assert_eq!(sentinel.gateway_rules().rules(), [per_key(), health]);

    let gateway = Gateway::new(sentinel);
    // Each key twice a second on the group, both paths counted together.
    assert_eq!(status(&gateway, "/orders/1", Some("k1")), StatusCode::OK);
    assert_eq!(status(&gateway, "/items/7", Some("k1")), StatusCode::OK);
    assert_eq!(
        status(&gateway, "/orders/2", Some("k1")),
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(status(&gateway, "/orders/1", Some("k2")), StatusCode::OK);
    // Requests without a key share one count.
    assert_eq!(status(&gateway, "/orders/1", None), StatusCode::OK);
    assert_eq!(status(&gateway, "/orders/1", None), StatusCode::OK);
    assert_eq!(
        status(&gateway, "/orders/1", None),
        StatusCode::TOO_MANY_REQUESTS
    );
    // Outside the group's predicates: not limited.
    for _ in 0..3 {
        assert_eq!(status(&gateway, "/items/x", Some("k1")), StatusCode::OK);
    }
}

#[test]
fn a_bad_field_is_reported_at_its_line_and_column_and_nothing_changes() {
    let sentinel = sentinel();
    apply(&sentinel, parse_str(GATEWAY, "rules.yaml").unwrap()).unwrap();
    let bad = GATEWAY
        .replace("'/items/[0-9]+'", "'/items/[0-9+'")
        .replace("field_name: x-api-key", "field_name: 'x api key'")
        .replace("count: 1\n", "count: 1\n    grade: fast\n");
    let error = parse_str(&bad, "rules.yaml").unwrap_err().to_string();
    let lines: Vec<&str> = error.lines().collect();
    assert_eq!(lines.len(), 3, "{error}");
    // A predicate's problem at the list, naming the predicate.
    assert!(
        lines[0].starts_with(
            "rules.yaml:4:7: api_definitions[0] (orders): predicates pattern 1: \
             invalid regular expression"
        ),
        "{error}"
    );
    assert_eq!(
        lines[1],
        "rules.yaml:10:54: gateway[0] (orders): param_item.field_name not a valid header name: \"x api key\"",
        "{error}"
    );
    assert_eq!(
        lines[2],
        "rules.yaml:13:12: gateway[1] (/health): grade must be one of qps, thread, got \"fast\"",
        "{error}"
    );
    assert_eq!(sentinel.gateway_rules().rules()[0], per_key());
    assert_eq!(sentinel.api_definitions().rules(), [orders()]);
}

#[test]
fn the_store_writes_the_sections_back_and_reads_them_the_same() {
    let (_dir, path) = temp_file("flow:\n  - {resource: a, count: 1}\n");
    let sentinel = sentinel();
    let store = RuleFileStore::open(&path).unwrap();
    store.reload(&sentinel).unwrap();
    let definitions = vec![
        orders(),
        ApiDefinition::new("all", vec![ApiPredicate::exact("/")]),
    ];
    let rules = vec![every_field(), per_key(), GatewayRule::route("/x", 0.0)];
    store
        .replace(&sentinel, RuleChange::ApiDefinitions(definitions.clone()))
        .unwrap();
    store
        .replace(&sentinel, RuleChange::Gateway(rules.clone()))
        .unwrap();
    let written = book(&path);
    assert_eq!(written.api_definitions, definitions);
    assert_eq!(written.gateway, rules);
    assert_eq!(written.flow, [FlowRule::new("a", 1.0)]);
    assert_eq!(sentinel.gateway_rules().rules(), rules);
    assert_eq!(sentinel.api_definitions().rules(), definitions);
    // Read again from the text it wrote: the same rules.
    let text = std::fs::read_to_string(&path).unwrap();
    let again = parse_str(&text, "rules.yaml").unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(again.book, written);
}

#[test]
fn replacing_flow_rules_from_a_file_keeps_the_gateway_rules_in_force() {
    let (_dir, path) = temp_file(GATEWAY);
    let sentinel = sentinel();
    let store = RuleFileStore::open(&path).unwrap();
    store.reload(&sentinel).unwrap();
    let enter = |key: &str| {
        sentinel
            .entry_builder("orders")
            .args(&[ParamValue::from(key)])
            .enter()
            .map(drop)
    };
    enter("k1").unwrap();
    enter("k1").unwrap();
    assert!(enter("k1").is_err());
    // The flow section replaced: the gateway's rules stay, with their
    // state (the key's spent count).
    store
        .replace(&sentinel, RuleChange::Flow(vec![FlowRule::new("b", 5.0)]))
        .unwrap();
    assert_eq!(sentinel.gateway_rules().rules()[0], per_key());
    assert!(enter("k1").is_err(), "the spent count was kept");
    assert!(enter("k2").is_ok());
    // Code replacing the flow kind, racing gateway loads: every gateway
    // load lands, the last one stays.
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for n in 0..200 {
                sentinel
                    .flow_rules()
                    .load(vec![FlowRule::new("b", f64::from(n))])
                    .unwrap();
            }
        });
        scope.spawn(|| {
            for n in 0..200 {
                sentinel
                    .load_gateway(vec![orders()], vec![GatewayRule::route("/r", f64::from(n))])
                    .unwrap();
                assert_eq!(
                    sentinel.gateway_rules().rules(),
                    [GatewayRule::route("/r", f64::from(n))]
                );
            }
        });
    });
    assert_eq!(
        sentinel.gateway_rules().rules(),
        [GatewayRule::route("/r", 199.0)]
    );
    assert_eq!(sentinel.flow_rules().rules(), [FlowRule::new("b", 199.0)]);
}
