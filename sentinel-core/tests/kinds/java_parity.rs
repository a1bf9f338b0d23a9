//! Rules the Sentinel dashboard saves that a Java machine accepts, and how
//! they behave here: a concurrency-grade flow rule with a leftover warm-up
//! or queueing behaviour (ignored), float and double hot-parameter values
//! (matched as Java's `Double.equals`), a hot-parameter rule in cluster
//! mode and a concurrency-grade flow rule in cluster mode (both limit on
//! this instance).
//!
//! Every test builds its own [`Sentinel`] on a `ManualClock`; no test sleeps.

use sentinel_flow_core::flow::{ClusterFlowConfig, ControlBehavior, FlowGrade, FlowRule};
use sentinel_flow_core::param_flow::{
    ParamFlowClusterConfig, ParamFlowGrade, ParamFlowItem, ParamFlowRule,
};
use sentinel_flow_core::{Entry, ParamValue};

use crate::support::instance;

fn threads(resource: &str, count: f64) -> FlowRule {
    FlowRule {
        grade: FlowGrade::Concurrency,
        ..FlowRule::new(resource, count)
    }
}

#[test]
fn a_concurrency_rule_with_a_leftover_behaviour_was_refused_and_now_only_rejects() {
    for behavior in [
        ControlBehavior::WarmUp,
        ControlBehavior::RateLimiter,
        ControlBehavior::WarmUpRateLimiter,
    ] {
        let (_clock, sentinel) = instance();
        let rule = FlowRule {
            control_behavior: behavior,
            // The dashboard sends 0 for the fields of a behaviour not picked.
            warm_up_period_sec: 0,
            max_queueing_time_ms: 0,
            ..threads("r", 2.0)
        };
        sentinel.flow_rules().load(vec![rule]).unwrap();
        let held: Vec<Entry<'_>> = (0..2)
            .map(|_| sentinel.entry("r").expect("under the count"))
            .collect();
        assert!(
            sentinel.entry("r").is_err(),
            "{behavior:?}: a third at once"
        );
        drop(held);
        assert!(sentinel.entry("r").is_ok(), "{behavior:?}");
    }
}

#[test]
fn a_concurrency_rule_in_cluster_mode_was_refused_and_now_limits_locally() {
    let (_clock, sentinel) = instance();
    let rule = FlowRule {
        cluster_mode: true,
        cluster_config: ClusterFlowConfig {
            flow_id: Some(8),
            ..ClusterFlowConfig::default()
        },
        ..threads("r", 1.0)
    };
    sentinel.flow_rules().load(vec![rule]).unwrap();
    let held = sentinel.entry("r").expect("the first");
    assert!(sentinel.entry("r").is_err(), "a second at once");
    drop(held);
    assert!(sentinel.entry("r").is_ok());
}

#[test]
fn float_hot_parameter_items_were_refused_and_now_match_as_java_double_equals() {
    let (_clock, sentinel) = instance();
    let rule = ParamFlowRule {
        param_flow_item_list: vec![
            ParamFlowItem::new(0.0, 1.0).with_class_type("double"),
            ParamFlowItem::new(-0.0, 3.0).with_class_type("double"),
            ParamFlowItem::new(f64::NAN, 2.0).with_class_type("double"),
            ParamFlowItem::new(0.5f32, 0.0).with_class_type("float"),
        ],
        ..ParamFlowRule::new("r", 0, 100.0)
    };
    sentinel.param_flow_rules().load(vec![rule]).unwrap();
    let admit = |value: ParamValue, n: usize| {
        (0..n)
            .filter(|_| {
                sentinel
                    .entry_builder("r")
                    .args(std::slice::from_ref(&value))
                    .enter()
                    .is_ok()
            })
            .count()
    };
    assert_eq!(admit(ParamValue::from(0.0), 5), 1);
    assert_eq!(admit(ParamValue::from(-0.0), 5), 3);
    // Any NaN is the one NaN, as Double.equals has it.
    assert_eq!(admit(ParamValue::from(-f64::NAN), 5), 2);
    assert_eq!(admit(ParamValue::from(0.5f32), 5), 0);
    // A float is not the integer of the same value.
    assert_eq!(admit(ParamValue::from(0), 5), 5);
}

#[test]
fn a_hot_parameter_rule_in_cluster_mode_was_refused_and_now_limits_locally() {
    let (_clock, sentinel) = instance();
    let rule = ParamFlowRule {
        cluster_mode: true,
        cluster_config: ParamFlowClusterConfig {
            flow_id: Some(12),
            // With no cluster service attached the rule falls back: to its
            // local check here (the default, as Sentinel's, passes).
            fallback_to_local_when_fail: true,
            ..ParamFlowClusterConfig::default()
        },
        ..ParamFlowRule::new("r", 0, 2.0)
    };
    sentinel
        .param_flow_rules()
        .load(vec![rule.clone()])
        .unwrap();
    let passed = (0..5)
        .filter(|_| {
            sentinel
                .entry_builder("r")
                .args(&[ParamValue::from("u")])
                .enter()
                .is_ok()
        })
        .count();
    assert_eq!(passed, 2);
    // Without its flow id it is refused, naming the field.
    let no_id = ParamFlowRule {
        cluster_config: ParamFlowClusterConfig::default(),
        ..rule
    };
    let error = sentinel.param_flow_rules().load(vec![no_id]).unwrap_err();
    assert!(
        format!("{error:?}").contains("cluster_config.flow_id"),
        "{error:?}"
    );
}

#[test]
fn hot_parameter_rules_in_cluster_mode_are_shown_as_limiting_locally() {
    let (_clock, sentinel) = instance();
    let rule = ParamFlowRule {
        cluster_mode: true,
        cluster_config: ParamFlowClusterConfig {
            flow_id: Some(3),
            ..ParamFlowClusterConfig::default()
        },
        // The concurrency grade: the cluster counts only QPS rules' values.
        grade: ParamFlowGrade::Concurrency,
        ..ParamFlowRule::new("hot", 0, 2.0)
    };
    sentinel
        .param_flow_rules()
        .load(vec![
            rule,
            ParamFlowRule::new("hot", 1, 2.0),
            // Counted by the cluster: not local.
            ParamFlowRule {
                cluster_mode: true,
                cluster_config: ParamFlowClusterConfig {
                    flow_id: Some(4),
                    ..ParamFlowClusterConfig::default()
                },
                ..ParamFlowRule::new("hot", 2, 2.0)
            },
        ])
        .unwrap();
    drop(
        sentinel
            .entry_builder("hot")
            .args(&[ParamValue::from("u")])
            .enter(),
    );
    let resources = sentinel.resources();
    let hot = resources
        .iter()
        .find(|r| &*r.name == "hot")
        .expect("named by rules");
    assert_eq!(hot.cluster_param_rules_local, 1);
}

#[cfg(feature = "prometheus")]
#[test]
fn hot_parameter_rules_in_cluster_mode_show_in_prometheus() {
    use crate::support::prometheus::{key, parse};
    use sentinel_flow_core::prometheus::render_prometheus;

    let (_clock, sentinel) = instance();
    let cluster = ParamFlowRule {
        cluster_mode: true,
        cluster_config: ParamFlowClusterConfig {
            flow_id: Some(3),
            ..ParamFlowClusterConfig::default()
        },
        // The concurrency grade: the cluster counts only QPS rules' values.
        grade: ParamFlowGrade::Concurrency,
        ..ParamFlowRule::new("hot", 0, 2.0)
    };
    sentinel
        .param_flow_rules()
        .load(vec![cluster, ParamFlowRule::new("cold", 0, 2.0)])
        .unwrap();
    let gauge = "sentinel_cluster_param_rules_local";
    let (samples, types) = parse(&render_prometheus(&sentinel));
    assert_eq!(types[gauge], "gauge");
    assert_eq!(samples[&key(gauge, &[("resource", "hot")])], 1.0);
    assert!(!samples.contains_key(&key(gauge, &[("resource", "cold")])));
}
