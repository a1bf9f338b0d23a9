//! The cluster fields of flow rules in a rule file: the format, each
//! error at its line and column (alone and between rules sharing a flow
//! id), and writing them back.

use sentinel_flow_core::flow::{ClusterFlowConfig, ClusterThresholdType, FlowRule};
use sentinel_flow_rules::parse_str;

fn errors(text: &str) -> Vec<String> {
    parse_str(text, "rules.yaml")
        .expect_err("the file should be refused")
        .lines()
}

#[test]
fn cluster_fields_read_with_the_core_defaults() {
    let text = "\
flow:
  - resource: pay
    count: 500
    cluster_mode: true
    cluster_config:
      flow_id: 7
      threshold_type: avg_local
      fallback_to_local_when_fail: false
      sample_count: 5
      window_interval_ms: 2000
  - {resource: orders, count: 10, cluster_mode: true, cluster_config: {flow_id: 8}}
  - {resource: local, count: 1}
";
    let book = parse_str(text, "rules.yaml").unwrap().book;
    assert_eq!(
        book.flow[0],
        FlowRule {
            cluster_mode: true,
            cluster_config: ClusterFlowConfig {
                flow_id: Some(7),
                threshold_type: ClusterThresholdType::AvgLocal,
                fallback_to_local_when_fail: false,
                sample_count: 5,
                window_interval_ms: 2_000,
                ..ClusterFlowConfig::default()
            },
            ..FlowRule::new("pay", 500.0)
        }
    );
    let second = &book.flow[1].cluster_config;
    assert!(book.flow[1].cluster_mode);
    assert_eq!(second.flow_id, Some(8));
    assert_eq!(second.threshold_type, ClusterThresholdType::Global);
    assert!(second.fallback_to_local_when_fail, "defaults to true");
    assert_eq!(
        (second.sample_count, second.window_interval_ms),
        (10, 1_000)
    );
    assert!(!book.flow[2].cluster_mode);
}

#[test]
fn each_cluster_error_is_at_its_position() {
    let cases: &[(&str, &str)] = &[
        (
            "flow:\n  - {resource: r, count: 1, cluster_mode: true}\n",
            "rules.yaml:2:5: flow[0] (r): cluster_config.flow_id is required when cluster_mode is on",
        ),
        (
            "flow:\n  - {resource: r, count: 1, cluster_mode: yes}\n",
            "rules.yaml:2:43: flow[0] (r): cluster_mode must be true or false, got \"yes\"",
        ),
        (
            "flow:\n  - {resource: r, count: 1, cluster_config: 3}\n",
            "rules.yaml:2:45: flow[0] (r): cluster_config must be a mapping, got 3",
        ),
        (
            "flow:\n  - resource: r\n    count: 1\n    cluster_mode: true\n    cluster_config:\n      flow_id: -1\n",
            "rules.yaml:6:16: flow[0] (r): cluster_config.flow_id must be a whole number in 0..=18446744073709551615, got -1",
        ),
        (
            "flow:\n  - {resource: r, count: 1, cluster_config: {flow_id: 1, threshold_type: local}}\n",
            "rules.yaml:2:74: flow[0] (r): cluster_config.threshold_type must be one of global, avg_local, got \"local\"",
        ),
        (
            "flow:\n  - {resource: r, count: 1, cluster_config: {flow_id: 1, fallback: true}}\n",
            "rules.yaml:2:58: flow[0] (r): cluster_config.fallback is not a field of cluster_config (known: flow_id, threshold_type, fallback_to_local_when_fail, sample_count, window_interval_ms, strategy, resource_timeout, \
             resource_timeout_strategy, acquire_refuse_strategy, client_offline_time)",
        ),
        (
            "flow:\n  - {resource: r, count: 1, cluster_mode: true, cluster_config: {flow_id: 1, sample_count: 3}}\n",
            "rules.yaml:2:92: flow[0] (r): cluster_config.sample_count must divide window_interval_ms (1000 ms into 3 buckets)",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(errors(text), [*expected], "{text}");
    }
}

#[test]
fn rules_sharing_a_flow_id_need_one_threshold() {
    let text = "\
flow:
  - {resource: a, count: 10, cluster_mode: true, cluster_config: {flow_id: 7}}
  - {resource: b, count: 10, cluster_mode: true, cluster_config: {flow_id: 7}}
  - resource: c
    count: 20
    cluster_mode: true
    cluster_config:
      flow_id: 7
";
    assert_eq!(
        errors(text),
        [
            "rules.yaml:8:16: flow[2] (c): cluster_config.flow_id flow id 7 is also rule 0's \
          (on a) with another threshold (count 10 Global per 1000 ms / 10); rules sharing a \
          flow id must agree on count, threshold_type, window_interval_ms and sample_count"
        ]
    );
    // Out of cluster mode the id is not shared.
    let off = text.replace(
        "    cluster_mode: true\n    cluster_config",
        "    cluster_config",
    );
    assert!(parse_str(&off, "rules.yaml").is_ok());
}
