//! The Sentinel dashboard's rule round trip, byte for byte: every rule
//! kind with every field set, sent as `SentinelApiClient` sends it to a
//! machine announcing a version from 1.7.1 (a POST form in UTF-8 with the
//! form's Content-Type, the headers of Apache's async client, GETs for
//! reads), the JSON made as fastjson writes the Java rules (fields in
//! alphabetical order, nulls left out), and every answer read as fastjson
//! reads it into the Java rule (an absent field takes the Java default,
//! unknown fields are ignored): each field must come back as sent.
//!
//! The rules include what a Java machine accepts and the dashboard's
//! dialogs produce: a thread-grade flow rule with a leftover warm-up or
//! queueing behaviour, a thread-grade flow rule in cluster mode, a
//! hot-parameter rule in cluster mode with `double`, `float` and every
//! other class type of item, a `clusterConfig` with cluster mode off, and
//! an authority list with a space after its comma.

mod common;

use std::net::SocketAddr;

use common::{dashboard_exchange, instance, writable_server};
use serde_json::{Value, json};

/// One request on its own connection, written as Apache's client writes
/// it; the status and the body of the answer.
async fn exchange(addr: SocketAddr, head: &str, body: &str) -> (u16, String) {
    dashboard_exchange(addr, head, body).await
}

/// `SentinelApiClient.executeCommand(app, ip, port, api, params, true)`:
/// the parameters as a UTF-8 form body (`UrlEncodedFormEntity`).
async fn command(addr: SocketAddr, api: &str, params: &[(&str, &str)]) -> (u16, String) {
    let form = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(params)
        .finish();
    let head = format!(
        "POST /{api} HTTP/1.1\r\nContent-Length: {}\r\nContent-Type: application/x-www-form-urlencoded; charset=UTF-8",
        form.len()
    );
    exchange(addr, &head, &form).await
}

/// `fetchItemsAsync`: a GET with the parameters in the query.
async fn fetch(addr: SocketAddr, api: &str, kind: Option<&str>) -> Value {
    let path = match kind {
        Some(kind) => format!("/{api}?type={kind}"),
        None => format!("/{api}"),
    };
    let (status, body) = exchange(addr, &format!("GET {path} HTTP/1.1"), "").await;
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

/// fastjson's `JSON.toJSONString` of a rule: keys in alphabetical order
/// (serde_json's map is ordered), nulls left out.
fn fastjson(rules: &Value) -> String {
    fn strip(value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), strip(v)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(strip).collect()),
            other => other.clone(),
        }
    }
    strip(rules).to_string()
}

/// The Java defaults of each rule class's fields, as a freshly made rule
/// holds them (what fastjson leaves in place for a field not in the JSON).
fn java_default(class: &str, field: &str) -> Value {
    let cluster_flow = json!({
        "thresholdType": 0, "fallbackToLocalWhenFail": true, "strategy": 0,
        "sampleCount": 10, "windowIntervalMs": 1000, "resourceTimeout": 2000,
        "resourceTimeoutStrategy": 0, "acquireRefuseStrategy": 0, "clientOfflineTime": 2000,
    });
    let cluster_param = json!({
        "thresholdType": 0, "fallbackToLocalWhenFail": false, "sampleCount": 10,
        "windowIntervalMs": 1000,
    });
    let defaults = match class {
        "FlowRule" => json!({
            "grade": 1, "count": 0.0, "strategy": 0, "controlBehavior": 0,
            "warmUpPeriodSec": 10, "maxQueueingTimeMs": 500, "clusterMode": false,
            "regex": false,
        }),
        "DegradeRule" => json!({
            "grade": 0, "count": 0.0, "timeWindow": 0, "minRequestAmount": 5,
            "slowRatioThreshold": 1.0, "statIntervalMs": 1000, "regex": false,
        }),
        "SystemRule" => json!({
            "highestSystemLoad": -1.0, "highestCpuUsage": -1.0, "qps": -1.0,
            "avgRt": -1, "maxThread": -1, "regex": false,
        }),
        "AuthorityRule" => json!({ "strategy": 0, "regex": false }),
        "ParamFlowRule" => json!({
            "grade": 1, "paramIdx": null, "count": 0.0, "controlBehavior": 0,
            "maxQueueingTimeMs": 0, "burstCount": 0, "durationInSec": 1,
            "paramFlowItemList": [], "clusterMode": false, "regex": false,
        }),
        "ClusterFlowConfig" => cluster_flow,
        "ParamFlowClusterConfig" => cluster_param,
        // ParamFlowItem: object, count and classType have no default.
        _ => json!({}),
    };
    defaults.get(field).cloned().unwrap_or(Value::Null)
}

/// The Java class a nested field of `class` is read into.
fn nested_class(class: &str, field: &str) -> &'static str {
    match (class, field) {
        ("FlowRule", "clusterConfig") => "ClusterFlowConfig",
        ("ParamFlowRule", "clusterConfig") => "ParamFlowClusterConfig",
        ("ParamFlowRule", "paramFlowItemList") => "ParamFlowItem",
        _ => "",
    }
}

/// Checks that every field `sent` of a `class` comes back in `answer` as
/// fastjson would read it: absent means the Java default, numbers compare
/// as the Java field holds them.
fn assert_read_back(class: &str, sent: &Value, answer: &Value, at: &str) {
    let (Value::Object(sent), Value::Object(answer)) = (sent, answer) else {
        panic!("{at}: {class} must be an object: sent {sent}, got {answer}");
    };
    for (field, value) in sent {
        let place = format!("{at}.{field}");
        let got = answer
            .get(field)
            .filter(|v| !v.is_null())
            .cloned()
            .unwrap_or_else(|| java_default(class, field));
        match (value, &got) {
            (Value::Object(_), _) => {
                assert_read_back(nested_class(class, field), value, &got, &place);
            }
            (Value::Array(items), Value::Array(back)) => {
                assert_eq!(items.len(), back.len(), "{place}: {got}");
                for (i, (item, again)) in items.iter().zip(back).enumerate() {
                    let item_class = nested_class(class, field);
                    assert_read_back(item_class, item, again, &format!("{place}[{i}]"));
                }
            }
            (Value::Number(a), Value::Number(b)) => {
                assert_eq!(a.as_f64(), b.as_f64(), "{place}");
            }
            (a, b) => assert_eq!(a, b, "{place}"),
        }
    }
}

/// Pushes `rules` of `kind` as the dashboard does, reads them back as it
/// does, and checks every field.
async fn round_trip(addr: SocketAddr, kind: &str, class: &str, rules: Value) {
    let data = fastjson(&rules);
    let (status, body) = if kind == "param_flow" {
        command(addr, "setParamFlowRules", &[("data", &data)]).await
    } else {
        command(addr, "setRules", &[("type", kind), ("data", &data)]).await
    };
    assert_eq!((status, body.as_str()), (200, "success"), "{kind}: {data}");
    let answer = if kind == "param_flow" {
        fetch(addr, "getParamFlowRules", None).await
    } else {
        fetch(addr, "getRules", Some(kind)).await
    };
    let (Value::Array(sent), Value::Array(back)) = (&rules, &answer) else {
        panic!("{kind}: not a list: {answer}");
    };
    assert_eq!(sent.len(), back.len(), "{kind}: {answer}");
    for (i, (rule, again)) in sent.iter().zip(back).enumerate() {
        assert_read_back(class, rule, again, &format!("{kind}[{i}]"));
    }
}

#[tokio::test]
async fn every_rule_the_dashboard_saves_comes_back_as_it_was_sent() {
    let (sentinel, _) = instance();
    let server = writable_server(&sentinel);
    let addr = server.local_addr();

    let cluster_off = json!({
        "flowId": 11, "thresholdType": 1, "fallbackToLocalWhenFail": false, "strategy": 0,
        "sampleCount": 5, "windowIntervalMs": 2000, "resourceTimeout": 3000,
        "resourceTimeoutStrategy": 1, "acquireRefuseStrategy": 1, "clientOfflineTime": 4000,
    });
    let flow = json!([
        // QPS, warm up then pace, relate, a clusterConfig with cluster mode off.
        {"resource": "GET:/a", "limitApp": "app-a", "grade": 1, "count": 12.5, "strategy": 1,
         "refResource": "GET:/b", "controlBehavior": 3, "warmUpPeriodSec": 20,
         "maxQueueingTimeMs": 300, "clusterMode": false, "clusterConfig": cluster_off,
         "regex": false},
        // Thread grade with the warm up picked before the grade changed.
        {"resource": "GET:/threads", "limitApp": "default", "grade": 0, "count": 4.0,
         "strategy": 0, "controlBehavior": 1, "warmUpPeriodSec": 10, "maxQueueingTimeMs": 500,
         "clusterMode": false, "clusterConfig": {"thresholdType": 0, "fallbackToLocalWhenFail": true},
         "regex": false},
        // Thread grade with queueing left over.
        {"resource": "GET:/threads-q", "limitApp": "default", "grade": 0, "count": 4.0,
         "strategy": 0, "controlBehavior": 2, "warmUpPeriodSec": 10, "maxQueueingTimeMs": 800,
         "clusterMode": false, "regex": false},
        // Cluster concurrency: thread grade in cluster mode.
        {"resource": "GET:/cluster-threads", "limitApp": "default", "grade": 0, "count": 10.0,
         "strategy": 0, "controlBehavior": 0, "warmUpPeriodSec": 10, "maxQueueingTimeMs": 500,
         "clusterMode": true, "clusterConfig": {
            "flowId": 12, "thresholdType": 1, "fallbackToLocalWhenFail": true, "strategy": 0,
            "sampleCount": 10, "windowIntervalMs": 1000, "resourceTimeout": 5000,
            "resourceTimeoutStrategy": 1, "acquireRefuseStrategy": 1, "clientOfflineTime": 6000},
         "regex": false},
        // Cluster QPS on a chain, without thresholdType (Java's: per instance).
        {"resource": "GET:/pay", "limitApp": "other", "grade": 1, "count": 300.0, "strategy": 2,
         "refResource": "checkout", "controlBehavior": 0, "warmUpPeriodSec": 10,
         "maxQueueingTimeMs": 500, "clusterMode": true,
         "clusterConfig": {"flowId": 13, "fallbackToLocalWhenFail": false}, "regex": false},
    ]);
    round_trip(addr, "flow", "FlowRule", flow).await;
    // The thread-grade rules ignore their behaviour: the count is a cap on
    // calls inside, at once.
    let held: Vec<_> = (0..4)
        .map(|_| sentinel.entry("GET:/threads").unwrap())
        .collect();
    assert!(sentinel.entry("GET:/threads").is_err());
    drop(held);

    let degrade = json!([
        {"resource": "GET:/slow", "limitApp": "default", "grade": 0, "count": 200.0,
         "timeWindow": 15, "minRequestAmount": 7, "slowRatioThreshold": 0.4,
         "statIntervalMs": 120000, "regex": false},
        {"resource": "GET:/err", "limitApp": "default", "grade": 1, "count": 0.3,
         "timeWindow": 5, "minRequestAmount": 3, "slowRatioThreshold": 1.0,
         "statIntervalMs": 30000, "regex": false},
        {"resource": "GET:/errs", "limitApp": "default", "grade": 2, "count": 9.0,
         "timeWindow": 60, "minRequestAmount": 2, "slowRatioThreshold": 1.0,
         "statIntervalMs": 60000, "regex": false},
    ]);
    round_trip(addr, "degrade", "DegradeRule", degrade).await;

    // The dashboard's system dialog saves one threshold per rule, -1 for
    // the others.
    let system = json!([
        {"highestSystemLoad": 8.5, "highestCpuUsage": -1.0, "qps": -1.0, "avgRt": -1, "maxThread": -1},
        {"highestSystemLoad": -1.0, "highestCpuUsage": 0.9, "qps": -1.0, "avgRt": -1, "maxThread": -1},
        {"highestSystemLoad": -1.0, "highestCpuUsage": -1.0, "qps": 3000.0, "avgRt": -1, "maxThread": -1},
        {"highestSystemLoad": -1.0, "highestCpuUsage": -1.0, "qps": -1.0, "avgRt": 250, "maxThread": -1},
        {"highestSystemLoad": -1.0, "highestCpuUsage": -1.0, "qps": -1.0, "avgRt": -1, "maxThread": 400},
    ]);
    round_trip(addr, "system", "SystemRule", system).await;

    let authority = json!([
        {"resource": "GET:/admin", "limitApp": "crawler, bot", "strategy": 1, "regex": false},
        {"resource": "GET:/ops", "limitApp": "ops-console", "strategy": 0, "regex": false},
    ]);
    round_trip(addr, "authority", "AuthorityRule", authority).await;

    let item = |object: &str, count: i64, class: &str| json!({"object": object, "count": count, "classType": class});
    let param = json!([
        {"resource": "GET:/items", "limitApp": "default", "grade": 1, "paramIdx": 0,
         "count": 5.0, "controlBehavior": 0, "maxQueueingTimeMs": 0, "burstCount": 3,
         "durationInSec": 2, "clusterMode": false,
         "clusterConfig": {"thresholdType": 0, "fallbackToLocalWhenFail": false,
                           "sampleCount": 10, "windowIntervalMs": 1000},
         "paramFlowItemList": [
            item("vip", 100, "java.lang.String"), item("42", 7, "int"),
            item("5000000000", 8, "long"), item("9", 9, "long"), item("3", 1, "short"),
            item("4", 2, "byte"), item("c", 3, "char"), item("true", 4, "boolean"),
            item("2.5", 5, "double"), item("0.1", 6, "float"), item("-0.0", 7, "double"),
            item("0.0", 8, "double"),
         ],
         "regex": false},
        // Cluster mode on, with the items the dialog offers.
        {"resource": "GET:/hot", "limitApp": "default", "grade": 1, "paramIdx": 1,
         "count": 50.0, "controlBehavior": 2, "maxQueueingTimeMs": 400, "burstCount": 0,
         "durationInSec": 1, "clusterMode": true,
         "clusterConfig": {"flowId": 21, "thresholdType": 1, "fallbackToLocalWhenFail": true,
                           "sampleCount": 5, "windowIntervalMs": 2000},
         "paramFlowItemList": [item("1.25", 5, "double"), item("7", 6, "int")],
         "regex": false},
        // Thread grade.
        {"resource": "GET:/hot-threads", "limitApp": "default", "grade": 0, "paramIdx": -1,
         "count": 2.0, "controlBehavior": 0, "maxQueueingTimeMs": 0, "burstCount": 0,
         "durationInSec": 1, "clusterMode": false,
         "clusterConfig": {"thresholdType": 0, "fallbackToLocalWhenFail": false},
         "paramFlowItemList": [], "regex": false},
    ]);
    round_trip(addr, "param_flow", "ParamFlowRule", param).await;
    // A double item limits the double argument, and -0.0 is not 0.0.
    let args = |v: f64| [sentinel_flow_core::ParamValue::from(v)];
    let passed = |v: f64| {
        (0..12)
            .filter(|_| {
                sentinel
                    .entry_builder("GET:/items")
                    .args(&args(v))
                    .enter()
                    .is_ok()
            })
            .count()
    };
    assert_eq!(passed(2.5), 5 + 3);
    assert_eq!(passed(-0.0), 7 + 3);
    assert_eq!(passed(0.0), 8 + 3);
}
