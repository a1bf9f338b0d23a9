//! Hot-parameter rules in cluster mode: kept with their settings, but no
//! cluster service counts values across instances yet, so each such rule
//! limits every value on this instance alone. An operator must see it: a
//! warning names their resources when such rules are put in force, and the
//! snapshot and the Prometheus text count them per resource. All of it runs
//! off the entry path.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::rule::ParamFlowRule;

/// The most resources one warning names; the rest are counted.
const MAX_NAMED: usize = 16;

/// The resources of `rules` that have hot-parameter rules in cluster mode,
/// by name, with how many each has.
pub(crate) fn by_resource(rules: &[ParamFlowRule]) -> BTreeMap<&str, usize> {
    let mut found = BTreeMap::new();
    for rule in rules.iter().filter(|rule| rule.cluster_mode) {
        *found.entry(rule.resource.as_str()).or_default() += 1;
    }
    found
}

/// The warning for `rules`, or `None` when none is in cluster mode. At
/// most [`MAX_NAMED`] resources are named.
pub(crate) fn message(rules: &[ParamFlowRule]) -> Option<String> {
    let found = by_resource(rules);
    if found.is_empty() {
        return None;
    }
    let total: usize = found.values().sum();
    let mut text = format!(
        "sentinel: {total} hot-parameter rule(s) in cluster mode count each value on this \
         instance alone (values are not counted across instances); resources: "
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
pub(crate) fn warn(rules: &[ParamFlowRule]) {
    if let Some(message) = message(rules) {
        tracing::warn!("{message}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_each_resource_once_and_counts_the_rest() {
        let cluster = |resource: &str| ParamFlowRule {
            cluster_mode: true,
            ..ParamFlowRule::new(resource, 0, 1.0)
        };
        assert_eq!(message(&[ParamFlowRule::new("local", 0, 1.0)]), None);
        let text = message(&[cluster("a"), cluster("a"), cluster("b")]).unwrap();
        assert!(
            text.starts_with("sentinel: 3 hot-parameter rule(s)"),
            "{text}"
        );
        assert!(text.ends_with("resources: a, b"), "{text}");
        let many: Vec<_> = (0..20).map(|i| cluster(&format!("r{i:02}"))).collect();
        assert!(message(&many).unwrap().ends_with(" and 4 more"));
    }
}
