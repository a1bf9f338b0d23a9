//! parse(render(rules)) == rules, for every kind and field: proptest over
//! generated valid rules, and names chosen to trip a YAML writer.

use proptest::prelude::*;
use sentinel_flow_core::ParamValue;
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::{FlowRule, FlowStrategy};
use sentinel_flow_core::param_flow::{ParamFlowItem, ParamFlowRule};

use super::generate::{EDGES, authority, degrade, flow, param_flow, system};
use super::section;
use crate::change::RuleChange;
use crate::options::LoadOptions;
use crate::parse::parse;

/// The rules of `change`'s kind, read back from its rendered section.
fn read_back(change: &RuleChange) -> sentinel_flow_core::RuleBook {
    let text = section(change).expect("a valid rule renders");
    match parse(&text, "rules.yaml", &LoadOptions::default()) {
        Ok(file) => file.book,
        Err(error) => panic!("{error}\n--- rendered:\n{text}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn flow_rules_read_back(rules in prop::collection::vec(flow(), 0..4)) {
        prop_assert_eq!(read_back(&RuleChange::Flow(rules.clone())).flow, rules);
    }

    #[test]
    fn degrade_rules_read_back(rules in prop::collection::vec(degrade(), 0..4)) {
        prop_assert_eq!(read_back(&RuleChange::Degrade(rules.clone())).degrade, rules);
    }

    #[test]
    fn system_rules_read_back(rules in prop::collection::vec(system(), 0..4)) {
        prop_assert_eq!(read_back(&RuleChange::System(rules.clone())).system, rules);
    }

    #[test]
    fn authority_rules_read_back(rules in prop::collection::vec(authority(), 0..4)) {
        prop_assert_eq!(read_back(&RuleChange::Authority(rules.clone())).authority, rules);
    }

    #[test]
    fn param_flow_rules_read_back(rules in prop::collection::vec(param_flow(), 0..4)) {
        prop_assert_eq!(read_back(&RuleChange::ParamFlow(rules.clone())).param_flow, rules);
    }
}

#[test]
fn every_edge_name_reads_back_in_every_place_a_name_goes() {
    for &edge in EDGES {
        // A blank resource is refused; the name goes after a letter then.
        let resource = match edge.trim().is_empty() {
            true => format!("r{edge}"),
            false => edge.to_owned(),
        };
        let flow = FlowRule {
            limit_app: if edge.trim() == edge
                && !edge.contains(',')
                && !edge.chars().any(char::is_control)
            {
                edge.to_owned()
            } else {
                "default".to_owned()
            },
            strategy: FlowStrategy::Relate,
            ref_resource: Some(resource.clone()),
            ..FlowRule::new(&resource, 2.5)
        };
        let change = RuleChange::Flow(vec![flow.clone()]);
        assert_eq!(read_back(&change).flow, vec![flow], "{edge:?}");
        let param = ParamFlowRule {
            param_flow_item_list: vec![ParamFlowItem::new(edge, 1.0)],
            ..ParamFlowRule::new(&resource, -1, 3.0)
        };
        let change = RuleChange::ParamFlow(vec![param.clone()]);
        assert_eq!(read_back(&change).param_flow, vec![param], "{edge:?}");
    }
}

#[test]
fn defaults_are_left_out_and_words_are_the_readmes() {
    let text = section(&RuleChange::Flow(vec![FlowRule::new("GET:/orders", 20.0)])).unwrap();
    assert_eq!(text, "flow:\n  - resource: GET:/orders\n    count: 20\n");
    let rule = DegradeRule::new("a", DegradeGrade::ErrorRatio, 0.5);
    let text = section(&RuleChange::Degrade(vec![rule])).unwrap();
    assert_eq!(
        text,
        "degrade:\n  - resource: a\n    grade: error_ratio\n    count: 0.5\n"
    );
    assert_eq!(
        section(&RuleChange::System(vec![])).unwrap(),
        "system: []\n"
    );
    let rule = ParamFlowRule {
        param_flow_item_list: vec![ParamFlowItem::new(ParamValue::list([1, 2]), 1.0)],
        ..ParamFlowRule::new("a", 0, 1.0)
    };
    let change = RuleChange::ParamFlow(vec![rule]);
    let text = section(&change).unwrap();
    assert!(
        text.ends_with("      - {value: [1, 2], count: 1}\n"),
        "{text}"
    );
    // ... which the load refuses, naming the item.
    let error = parse(&text, "rules.yaml", &LoadOptions::default()).unwrap_err();
    assert_eq!(
        error.lines(),
        [
            "rules.yaml:6:17: param_flow[0] (a): param_flow_item_list[0].value must be a string, \
          a number or a boolean, got a list"
        ]
    );
}

#[test]
fn cluster_fields_are_written_as_one_flow_mapping() {
    let rule = FlowRule {
        cluster_mode: true,
        cluster_config: sentinel_flow_core::flow::ClusterFlowConfig {
            flow_id: Some(7),
            threshold_type: sentinel_flow_core::flow::ClusterThresholdType::AvgLocal,
            ..Default::default()
        },
        ..FlowRule::new("pay", 500.0)
    };
    let change = RuleChange::Flow(vec![rule.clone()]);
    assert_eq!(
        section(&change).unwrap(),
        "flow:\n  - resource: pay\n    count: 500\n    cluster_mode: true\n    \
         cluster_config: {flow_id: 7, threshold_type: avg_local}\n"
    );
    assert_eq!(read_back(&change).flow, vec![rule]);
}

#[test]
fn what_the_dashboard_saves_reads_back_from_the_rule_file() {
    use sentinel_flow_core::flow::{ClusterFlowConfig, ControlBehavior, FlowGrade};
    use sentinel_flow_core::param_flow::{ParamClusterThresholdType, ParamFlowClusterConfig};

    let flow = vec![
        FlowRule {
            grade: FlowGrade::Concurrency,
            control_behavior: ControlBehavior::WarmUp,
            warm_up_period_sec: 0,
            ..FlowRule::new("threads", 5.0)
        },
        FlowRule {
            grade: FlowGrade::Concurrency,
            cluster_mode: true,
            cluster_config: ClusterFlowConfig {
                flow_id: Some(4),
                strategy: 1,
                resource_timeout: 3_000,
                resource_timeout_strategy: 1,
                acquire_refuse_strategy: 1,
                client_offline_time: 5_000,
                ..ClusterFlowConfig::default()
            },
            ..FlowRule::new("cluster-threads", 10.0)
        },
    ];
    let change = RuleChange::Flow(flow.clone());
    assert_eq!(read_back(&change).flow, flow);

    let param = vec![ParamFlowRule {
        cluster_mode: true,
        cluster_config: ParamFlowClusterConfig {
            flow_id: Some(9),
            threshold_type: ParamClusterThresholdType::Global,
            fallback_to_local_when_fail: true,
            sample_count: 5,
            window_interval_ms: 2_000,
        },
        param_flow_item_list: vec![
            ParamFlowItem::new(2.5, 1.0),
            ParamFlowItem::new(3.0, 2.0),
            ParamFlowItem::new(-0.0, 3.0),
            ParamFlowItem::new(0.0, 4.0),
            ParamFlowItem::new(f64::NAN, 5.0),
            ParamFlowItem::new(f64::NEG_INFINITY, 6.0),
            ParamFlowItem::new(0.1f32, 7.0).with_class_type("float"),
            ParamFlowItem::new(7, 8.0).with_class_type("short"),
            ParamFlowItem::new("c", 9.0).with_class_type("char"),
        ],
        ..ParamFlowRule::new("hot", 0, 1.0)
    }];
    let change = RuleChange::ParamFlow(param.clone());
    let text = section(&change).unwrap();
    assert!(text.contains("{value: 3.0, count: 2}"), "{text}");
    assert!(text.contains("class_type: short"), "{text}");
    let back = read_back(&change).param_flow;
    // NaN != NaN as an f64 but the same value as a parameter.
    assert_eq!(format!("{back:?}"), format!("{param:?}"));
    assert_eq!(
        back[0].param_flow_item_list[4].value,
        ParamValue::from(f64::NAN)
    );
}
