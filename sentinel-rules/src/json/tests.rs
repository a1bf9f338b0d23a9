//! Rules to JSON and back: every field, and every problem of a bad list.

use sentinel_flow_core::ParamValue;
use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::{
    ClusterFlowConfig, ClusterThresholdType, ControlBehavior, FlowGrade, FlowRule, FlowStrategy,
};
use sentinel_flow_core::param_flow::{
    ParamControlBehavior, ParamFlowGrade, ParamFlowItem, ParamFlowRule,
};
use sentinel_flow_core::system::SystemRule;

use crate::change::RuleChange;

use sentinel_flow_core::describe::DescribeRule;

use super::{from_json, to_json};

fn round_trip<R: DescribeRule>(rules: Vec<R>) {
    let json = to_json(&rules).to_string();
    let back: Vec<R> = from_json(&json).unwrap_or_else(|e| panic!("{json}: {e:?}"));
    assert_eq!(back, rules, "{json}");
}

#[test]
fn every_field_survives_the_round_trip() {
    round_trip(vec![FlowRule {
        id: Some(7),
        grade: FlowGrade::Qps,
        limit_app: "checkout".into(),
        strategy: FlowStrategy::Relate,
        ref_resource: Some("db".into()),
        control_behavior: ControlBehavior::WarmUpRateLimiter,
        warm_up_period_sec: 20,
        warm_up_cold_factor: 4,
        max_queueing_time_ms: 300,
        stat_interval_ms: 2_000,
        stat_sample_count: 4,
        ..FlowRule::new("GET:/a", 12.5)
    }]);
    round_trip(vec![FlowRule {
        cluster_mode: true,
        cluster_config: ClusterFlowConfig {
            flow_id: Some(42),
            threshold_type: ClusterThresholdType::AvgLocal,
            fallback_to_local_when_fail: false,
            sample_count: 5,
            window_interval_ms: 2_000,
            ..ClusterFlowConfig::default()
        },
        ..FlowRule::new("GET:/pay", 300.0)
    }]);
    round_trip(vec![DegradeRule {
        id: Some(1),
        time_window_sec: 30,
        min_request_amount: 9,
        stat_interval_ms: 5_000,
        probe_num: 3,
        ..DegradeRule::new("GET:/b", DegradeGrade::ErrorRatio, 0.4)
    }]);
    round_trip(vec![SystemRule {
        id: None,
        highest_system_load: Some(8.0),
        highest_cpu_usage: Some(0.9),
        qps: None,
        avg_rt: Some(50),
        max_thread: None,
    }]);
    round_trip(vec![AuthorityRule::new(
        "GET:/c",
        AuthorityStrategy::Black,
        ["crawler", "bot"],
    )]);
    round_trip(vec![ParamFlowRule {
        grade: ParamFlowGrade::Qps,
        control_behavior: ParamControlBehavior::RateLimiter,
        max_queueing_time_ms: 100,
        burst_count: 0,
        duration_in_sec: 2,
        param_flow_item_list: vec![
            ParamFlowItem::new("vip", 100.0),
            ParamFlowItem::new(42i64, 7.0),
            ParamFlowItem::new(5_000_000_000i64, 8.0),
            ParamFlowItem::new(true, 9.0),
            ParamFlowItem::new(7i64, 3.0).with_class_type("short"),
            ParamFlowItem::new(8i64, 3.0).with_class_type("long"),
            ParamFlowItem::new(1.5, 4.0),
            ParamFlowItem::new(0.1f32, 5.0).with_class_type("float"),
            ParamFlowItem::new("c", 6.0).with_class_type("char"),
        ],
        capacity: Some(1_000),
        ..ParamFlowRule::new("GET:/d", 1, 5.0)
    }]);
}

#[test]
fn sentinel_numbers_for_enums() {
    let json = to_json(&[FlowRule {
        grade: FlowGrade::Concurrency,
        ..FlowRule::new("a", 1.0)
    }]);
    assert_eq!(json[0]["grade"], 0);
    assert_eq!(json[0]["controlBehavior"], 0);
    assert_eq!(to_json(&[FlowRule::new("a", 1.0)])[0]["grade"], 1);
    let json = to_json(&[SystemRule::default()]);
    assert_eq!(json[0]["qps"], -1.0);
    assert_eq!(json[0]["maxThread"], -1);
}

#[test]
fn every_problem_is_reported_with_index_and_field() {
    let data = r#"[
        {"resource": "a", "count": 1, "grade": 7},
        {"resource": "b", "count": "x", "controlBehavior": 1, "grade": 0},
        {"resource": "c", "count": 1, "clusterMode": true},
        {"resource": "", "count": -1},
        5
    ]"#;
    let lines = from_json::<FlowRule>(data).unwrap_err();
    let text = lines.join("\n");
    assert!(
        text.contains("flow[0] (a): grade: must be 0 (thread count) or 1 (QPS), got 7"),
        "{text}"
    );
    assert!(
        text.contains("flow[1] (b): count: must be a number, got \"x\""),
        "{text}"
    );
    // A cluster rule needs its flow id.
    assert!(text.contains("flow[2] (c): clusterConfig.flowId"), "{text}");
    assert!(text.contains("flow[3] ()"), "{text}");
    assert!(
        text.contains("flow[4]: must be a JSON object, got a number"),
        "{text}"
    );
    assert!(lines.len() >= 5, "{text}");
}

#[test]
fn core_checks_use_json_names() {
    let lines =
        from_json::<DegradeRule>(r#"[{"resource":"a","count":1,"timeWindow":0}]"#).unwrap_err();
    assert!(
        lines[0].starts_with("degrade[0] (a): timeWindow"),
        "{lines:?}"
    );
}

#[test]
fn bad_json_and_non_arrays_are_refused() {
    assert!(from_json::<FlowRule>("[{").unwrap_err()[0].starts_with("data: bad JSON"));
    assert!(from_json::<FlowRule>("{}").unwrap_err()[0].contains("must be a JSON array"));
    assert_eq!(from_json::<FlowRule>("[]").unwrap(), vec![]);
}

#[test]
fn sentinel_features_we_lack_are_refused_when_asked_for() {
    let lines = from_json::<ParamFlowRule>(
        r#"[{"resource":"a","paramIdx":0,"count":1,"paramFlowItemList":[{"object":"1.5","count":1,"classType":"java.util.Date"}]}]"#,
    )
    .unwrap_err();
    assert!(
        lines[0].contains("paramFlowItemList[0]: classType: unknown type"),
        "{lines:?}"
    );
    let lines =
        from_json::<DegradeRule>(r#"[{"resource":"a","count":1,"limitApp":"x"}]"#).unwrap_err();
    assert!(lines[0].contains("limitApp"), "{lines:?}");
    let lines = from_json::<ParamFlowRule>(r#"[{"resource":"a","count":1}]"#).unwrap_err();
    assert!(lines[0].contains("paramIdx: is required"), "{lines:?}");
    // The defaults of those fields are accepted.
    from_json::<FlowRule>(
        r#"[{"resource":"a","count":1,"clusterMode":false,"clusterConfig":null,"regex":false}]"#,
    )
    .unwrap();
}

#[test]
fn authority_origins_are_comma_separated() {
    let rules: Vec<AuthorityRule> =
        from_json(r#"[{"resource":"a","limitApp":"x, y,,z","strategy":0}]"#).unwrap();
    assert_eq!(rules[0].limit_app, ["x", " y", "z"]);
}

#[test]
fn cluster_config_reads_as_sentinel_writes_it() {
    let data = r#"[{"resource":"pay","count":500,"clusterMode":true,
        "clusterConfig":{"flowId":9,"thresholdType":1,"fallbackToLocalWhenFail":true,
        "strategy":0,"sampleCount":10,"windowIntervalMs":1000}}]"#;
    let rules = from_json::<FlowRule>(data).unwrap();
    assert!(rules[0].cluster_mode);
    assert_eq!(rules[0].cluster_config.flow_id, Some(9));
    assert_eq!(
        rules[0].cluster_config.threshold_type,
        ClusterThresholdType::Global
    );
    let json = to_json(&rules);
    assert_eq!(json[0]["clusterConfig"]["thresholdType"], 1);
    assert_eq!(json[0]["clusterConfig"]["flowId"], 9);

    let bad = r#"[{"resource":"pay","count":5,"clusterMode":true,
        "clusterConfig":{"flowId":-1,"thresholdType":3}},
        {"resource":"b","count":5,"clusterConfig":7}]"#;
    let text = from_json::<FlowRule>(bad).unwrap_err().join("\n");
    assert!(
        text.contains("flow[0] (pay): clusterConfig.flowId"),
        "{text}"
    );
    assert!(
        text.contains("flow[0] (pay): clusterConfig.thresholdType"),
        "{text}"
    );
    assert!(
        text.contains("flow[1] (b): clusterConfig: must be an object"),
        "{text}"
    );
}

/// The dashboard's JSON for a rule, read and written back: every field it
/// sent comes back with the value it sent.
fn echoes(kind: &str, sent: &str) -> serde_json::Value {
    let change = crate::json::decode(kind, sent).unwrap_or_else(|e| panic!("{kind}: {e:?}"));
    let back: serde_json::Value = serde_json::from_str(&crate::json::encode(&change)).unwrap();
    let sent: serde_json::Value = serde_json::from_str(sent).unwrap();
    assert_sent_fields_come_back(&sent, &back, kind);
    back
}

fn assert_sent_fields_come_back(sent: &serde_json::Value, back: &serde_json::Value, at: &str) {
    match (sent, back) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (key, value) in a {
                let got = b.get(key).unwrap_or(&serde_json::Value::Null);
                assert_sent_fields_come_back(value, got, &format!("{at}.{key}"));
            }
        }
        (serde_json::Value::Array(a), serde_json::Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{at}");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert_sent_fields_come_back(x, y, &format!("{at}[{i}]"));
            }
        }
        (serde_json::Value::Number(a), serde_json::Value::Number(b)) => {
            assert_eq!(a.as_f64(), b.as_f64(), "{at}");
        }
        (a, b) => assert_eq!(a, b, "{at}"),
    }
}

#[test]
fn a_thread_grade_flow_rule_with_a_leftover_warm_up_was_refused() {
    for behavior in [1, 2, 3] {
        let sent = format!(
            r#"[{{"resource":"a","limitApp":"default","grade":0,"count":5,"strategy":0,
            "controlBehavior":{behavior},"warmUpPeriodSec":0,"maxQueueingTimeMs":0,"clusterMode":false,
            "clusterConfig":{{"thresholdType":0,"fallbackToLocalWhenFail":true}}}}]"#
        );
        echoes("flow", &sent);
    }
}

#[test]
fn a_hot_parameter_rule_with_double_and_float_items_was_refused() {
    let back = echoes(
        "param_flow",
        r#"[{"resource":"a","limitApp":"default","grade":1,"paramIdx":0,"count":5,
        "durationInSec":1,"controlBehavior":0,"maxQueueingTimeMs":0,"burstCount":0,"clusterMode":false,
        "clusterConfig":{"thresholdType":0,"fallbackToLocalWhenFail":false},
        "paramFlowItemList":[{"object":"2.5","count":1,"classType":"double"},
        {"object":"0.1","count":2,"classType":"float"},{"object":"-0.0","count":3,"classType":"double"},
        {"object":"0.0","count":4,"classType":"double"},{"object":"NaN","count":5,"classType":"double"},
        {"object":"7","count":6,"classType":"long"},{"object":"1","count":7,"classType":"short"},
        {"object":"2","count":8,"classType":"byte"},{"object":"x","count":9,"classType":"char"}]}]"#,
    );
    assert_eq!(back[0]["paramFlowItemList"].as_array().unwrap().len(), 9);
    // Matching is Java's Double.equals: 0.0 and -0.0 are two values.
    let RuleChange::ParamFlow(rules) =
        crate::json::decode("param_flow", &back.to_string()).unwrap()
    else {
        unreachable!()
    };
    let items = &rules[0].param_flow_item_list;
    assert_eq!(items[1].value, ParamValue::from(0.1f32));
    assert_ne!(items[2].value, items[3].value);
    assert_eq!(items[4].value, ParamValue::from(f64::NAN));
}

#[test]
fn a_hot_parameter_rule_in_cluster_mode_was_refused() {
    echoes(
        "param_flow",
        r#"[{"resource":"a","limitApp":"default","grade":1,"paramIdx":0,"count":5,
        "durationInSec":1,"clusterMode":true,
        "clusterConfig":{"flowId":77,"thresholdType":1,"fallbackToLocalWhenFail":true,
        "sampleCount":10,"windowIntervalMs":1000},"paramFlowItemList":[]}]"#,
    );
}

#[test]
fn a_thread_grade_flow_rule_in_cluster_mode_was_refused() {
    echoes(
        "flow",
        r#"[{"resource":"a","limitApp":"default","grade":0,"count":10,"strategy":0,
        "controlBehavior":0,"clusterMode":true,
        "clusterConfig":{"flowId":5,"thresholdType":1,"fallbackToLocalWhenFail":true,
        "strategy":0,"sampleCount":10,"windowIntervalMs":1000,"resourceTimeout":3000,
        "resourceTimeoutStrategy":1,"acquireRefuseStrategy":1,"clientOfflineTime":4000}}]"#,
    );
}

#[test]
fn a_cluster_config_sent_with_cluster_mode_off_was_dropped() {
    echoes(
        "flow",
        r#"[{"resource":"a","count":1,"clusterMode":false,"clusterConfig":{"thresholdType":0,
        "fallbackToLocalWhenFail":true,"sampleCount":10,"windowIntervalMs":1000}}]"#,
    );
    // Without thresholdType, Java reads the average per instance.
    let back = echoes(
        "flow",
        r#"[{"resource":"a","count":1,"clusterMode":true,"clusterConfig":{"flowId":3}}]"#,
    );
    assert_eq!(back[0]["clusterConfig"]["thresholdType"], 0);
}
