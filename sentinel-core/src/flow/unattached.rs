//! Rules in cluster mode on an instance with no cluster service attached:
//! each is decided by its fallback (its count on this instance alone, or a
//! pass), which is a misconfiguration an operator must see. A warning names their resources
//! when such rules are put in force, and when the service is taken away
//! while they are; the snapshot and the Prometheus text show them per
//! resource. All of it runs off the entry path.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::rule::FlowRule;

/// The most resources one warning names; the rest are counted.
pub(crate) const MAX_NAMED: usize = 16;

/// Whether `rule` asks a cluster service for its permits.
pub(crate) fn in_cluster_mode(rule: &FlowRule) -> bool {
    rule.cluster_mode && rule.cluster_config.flow_id.is_some()
}

/// The resources of `rules` that have rules in cluster mode, by name, with
/// how many each has.
pub(crate) fn by_resource(rules: &[FlowRule]) -> BTreeMap<&str, usize> {
    let mut found = BTreeMap::new();
    for rule in rules.iter().filter(|rule| in_cluster_mode(rule)) {
        *found.entry(rule.resource.as_str()).or_default() += 1;
    }
    found
}

/// The warning for `rules` falling back because of `why`, or `None`
/// when none of them is in cluster mode. At most [`MAX_NAMED`] resources
/// are named.
pub(crate) fn message(rules: &[FlowRule], why: &str) -> Option<String> {
    let found = by_resource(rules);
    if found.is_empty() {
        return None;
    }
    let total: usize = found.values().sum();
    let mut text = format!(
        "sentinel: {total} flow rule(s) in cluster mode fall back (their count on this \
         instance alone, or a pass) because {why}; attach one (Sentinel::set_cluster_tokens, \
         RedisCluster::attach) or turn cluster_mode off; resources: "
    );
    for (i, (resource, _)) in found.iter().take(MAX_NAMED).enumerate() {
        if i > 0 {
            text.push_str(", ");
        }
        text.push_str(resource);
    }
    if found.len() > MAX_NAMED {
        let _ = write!(text, " and {} more", found.len() - MAX_NAMED);
    }
    Some(text)
}

/// Logs [`message`] as a warning, when there is one.
pub(crate) fn warn(rules: &[FlowRule], why: &str) {
    if let Some(message) = message(rules, why) {
        tracing::warn!("{message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::ClusterFlowConfig;

    fn cluster_rule(resource: &str) -> FlowRule {
        FlowRule {
            cluster_mode: true,
            cluster_config: ClusterFlowConfig {
                flow_id: Some(1),
                ..ClusterFlowConfig::default()
            },
            ..FlowRule::new(resource, 10.0)
        }
    }

    #[test]
    fn local_rules_make_no_warning() {
        assert_eq!(message(&[FlowRule::new("a", 1.0)], "why"), None);
    }

    #[test]
    fn the_warning_names_each_resource_once_with_the_reason() {
        let rules = [
            cluster_rule("b"),
            FlowRule::new("local", 1.0),
            cluster_rule("a"),
            cluster_rule("b"),
        ];
        let text = message(&rules, "nothing is attached").unwrap();
        assert!(
            text.contains("3 flow rule(s) in cluster mode fall back"),
            "{text}"
        );
        assert!(text.contains("because nothing is attached"), "{text}");
        assert!(text.ends_with("resources: a, b"), "{text}");
    }

    #[test]
    fn the_warning_names_a_bounded_number_of_resources() {
        let rules: Vec<FlowRule> = (0..MAX_NAMED + 5)
            .map(|i| cluster_rule(&format!("r{i:03}")))
            .collect();
        let text = message(&rules, "why").unwrap();
        assert!(text.ends_with(" and 5 more"), "{text}");
        assert!(!text.contains(&format!("r{:03}", MAX_NAMED)), "{text}");
    }
}
