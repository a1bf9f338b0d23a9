//! The dashboard's gateway pages against this machine: the four commands
//! `SentinelApiClient` (1.8.9) sends to a gateway (`app_type=1`), with the
//! bodies it makes (`JSON.toJSONString` of the `GatewayFlowRule`s and
//! `ApiDefinition`s its entities convert to: fastjson's field order, a
//! `null` left out, `paramItem.index` never set), and the answers read as
//! it reads them (`JSON.parseArray` into the same classes: every field
//! sent comes back). A heartbeat tells `app_type=1` once gateway rules
//! are in force.

mod common;

use std::net::SocketAddr;

use common::{get, instance, post_form, writable_server};
use sentinel_flow_core::gateway::{
    ApiDefinition, ApiPredicate, GatewayBehavior, GatewayGrade, GatewayParamItem, GatewayRule,
    ParseStrategy, ResourceMode, ValueMatch,
};
use serde_json::{Value, json};

/// `modifyApis`: `toApiDefinition()` of each entity, as fastjson writes an
/// `ApiDefinition` (`apiName`, `predicateItems` of `ApiPathPredicateItem`).
const APIS: &str = r#"[{"apiName":"orders","predicateItems":[{"matchStrategy":1,"pattern":"/orders/**"},{"matchStrategy":2,"pattern":"/items/[0-9]+"}]},{"apiName":"health","predicateItems":[{"matchStrategy":0,"pattern":"/health"}]}]"#;

/// `modifyGatewayFlowRules`: `toGatewayFlowRule()` of each entity, as
/// fastjson writes a `GatewayFlowRule` (getters in name order; `burst`,
/// `maxQueueingTimeoutMs` always, as Java `int`s).
const RULES: &str = r#"[{"burst":0,"controlBehavior":2,"count":10.0,"grade":1,"intervalSec":3,"maxQueueingTimeoutMs":250,"paramItem":{"fieldName":"x-api-key","matchStrategy":3,"parseStrategy":2,"pattern":"vip"},"resource":"orders","resourceMode":1},{"burst":5,"controlBehavior":0,"count":2.0,"grade":0,"intervalSec":1,"maxQueueingTimeoutMs":500,"resource":"/health","resourceMode":0},{"burst":0,"controlBehavior":0,"count":100.0,"grade":1,"intervalSec":60,"maxQueueingTimeoutMs":500,"paramItem":{"matchStrategy":0,"parseStrategy":0},"resource":"orders","resourceMode":1}]"#;

fn expected_definitions() -> Vec<ApiDefinition> {
    vec![
        ApiDefinition::new(
            "orders",
            vec![
                ApiPredicate::prefix("/orders/**"),
                ApiPredicate::regex("/items/[0-9]+"),
            ],
        ),
        ApiDefinition::new("health", vec![ApiPredicate::exact("/health")]),
    ]
}

fn expected_rules() -> Vec<GatewayRule> {
    vec![
        GatewayRule {
            resource: "orders".into(),
            resource_mode: ResourceMode::ApiGroup,
            grade: GatewayGrade::Qps,
            count: 10.0,
            interval_sec: 3,
            control_behavior: GatewayBehavior::RateLimiter,
            burst: 0,
            max_queueing_timeout_ms: 250,
            param_item: Some(GatewayParamItem {
                parse: ParseStrategy::Header,
                field_name: Some("x-api-key".into()),
                pattern: Some("vip".into()),
                match_strategy: ValueMatch::Contains,
                count_missing_as_one: false,
            }),
        },
        GatewayRule {
            grade: GatewayGrade::Concurrency,
            burst: 5,
            ..GatewayRule::route("/health", 2.0)
        },
        GatewayRule {
            interval_sec: 60,
            ..GatewayRule::api_group("orders", 100.0).param_item(GatewayParamItem::client_ip())
        },
    ]
}

/// `JSON.parseArray(body, GatewayFlowRule.class)`: each field of the
/// class, as its setter reads it (a missing `int` stays at its default;
/// unknown fields ignored), for comparing with what was sent.
fn as_java_rules(body: &str) -> Vec<Value> {
    let list: Vec<Value> = serde_json::from_str(body).expect("a JSON array");
    list.iter()
        .map(|rule| {
            let item = match &rule["paramItem"] {
                Value::Null => Value::Null,
                item => json!({
                    "parseStrategy": item["parseStrategy"].as_i64().unwrap_or(0),
                    "fieldName": item["fieldName"],
                    "pattern": item["pattern"],
                    "matchStrategy": item["matchStrategy"].as_i64().unwrap_or(0),
                }),
            };
            json!({
                "resource": rule["resource"],
                "resourceMode": rule["resourceMode"].as_i64().unwrap_or(0),
                "grade": rule["grade"].as_i64().unwrap_or(1),
                "count": rule["count"].as_f64().unwrap_or(0.0),
                "intervalSec": rule["intervalSec"].as_i64().unwrap_or(1),
                "controlBehavior": rule["controlBehavior"].as_i64().unwrap_or(0),
                "burst": rule["burst"].as_i64().unwrap_or(0),
                "maxQueueingTimeoutMs": rule["maxQueueingTimeoutMs"].as_i64().unwrap_or(500),
                "paramItem": item,
            })
        })
        .collect()
}

/// `JSON.parseArray(body, ApiDefinitionEntity.class)`: the name and each
/// predicate's pattern and strategy.
fn as_java_apis(body: &str) -> Vec<Value> {
    let list: Vec<Value> = serde_json::from_str(body).expect("a JSON array");
    list.iter()
        .map(|api| {
            let items: Vec<Value> = api["predicateItems"]
                .as_array()
                .expect("predicateItems")
                .iter()
                .map(|item| {
                    json!({
                        "pattern": item["pattern"],
                        "matchStrategy": item["matchStrategy"].as_i64().unwrap_or(0),
                    })
                })
                .collect();
            json!({"apiName": api["apiName"], "predicateItems": items})
        })
        .collect()
}

async fn basic_info_app_type(addr: SocketAddr) -> String {
    let info = get(addr, "/basicInfo").await.body;
    info.lines()
        .find_map(|line| line.strip_prefix("app_type: "))
        .expect("app_type line")
        .to_owned()
}

#[tokio::test]
async fn the_dashboards_gateway_calls_round_trip_every_field() {
    let (sentinel, _clock) = instance();
    let server = writable_server(&sentinel);
    let addr = server.local_addr();
    assert_eq!(basic_info_app_type(addr).await, "0");

    let answer = post_form(addr, "/gateway/updateApiDefinitions", &[("data", APIS)]).await;
    assert_eq!(answer.body, "success", "{answer:?}");
    let answer = post_form(addr, "/gateway/updateRules", &[("data", RULES)]).await;
    assert_eq!(answer.body, "success", "{answer:?}");
    assert_eq!(sentinel.api_definitions().rules(), expected_definitions());
    assert_eq!(sentinel.gateway_rules().rules(), expected_rules());

    // Read back as the dashboard reads it: every field it sent.
    let rules = get(addr, "/gateway/getRules").await;
    assert_eq!(
        as_java_rules(&rules.body),
        as_java_rules(RULES),
        "{}",
        rules.body
    );
    let apis = get(addr, "/gateway/getApiDefinitions").await;
    assert_eq!(
        as_java_apis(&apis.body),
        as_java_apis(APIS),
        "{}",
        apis.body
    );

    // With gateway rules in force, the machine is a gateway.
    assert_eq!(basic_info_app_type(addr).await, "1");
}

#[tokio::test]
async fn a_bad_gateway_rule_is_refused_and_nothing_changes() {
    let (sentinel, _clock) = instance();
    let server = writable_server(&sentinel);
    let addr = server.local_addr();
    post_form(addr, "/gateway/updateRules", &[("data", RULES)]).await;
    let bad = r#"[{"resource":"orders","resourceMode":1,"count":1.0,"paramItem":{"parseStrategy":2,"matchStrategy":2,"fieldName":"k","pattern":"("}}]"#;
    let answer = post_form(addr, "/gateway/updateRules", &[("data", bad)]).await;
    assert_ne!(answer.body, "success");
    assert!(answer.body.contains("paramItem.pattern"), "{answer:?}");
    assert_eq!(sentinel.gateway_rules().rules(), expected_rules());
}
