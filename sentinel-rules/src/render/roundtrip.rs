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
          a whole number or a boolean, got a list"
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
