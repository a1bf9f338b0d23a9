//! Hot-parameter rules in cluster mode (Sentinel's cluster param flow): a
//! QPS-grade rule with `cluster_mode` and a flow id asks the instance's
//! [`ClusterTokens`](crate::flow::ClusterTokens) service for each entry's
//! values ([`ClusterTokens::acquire_param`](crate::flow::ClusterTokens::acquire_param)),
//! each with its threshold (its item's count, or the rule's), and the
//! cluster counts every value across instances under the flow id. With no
//! answer (no service attached, the cluster down or past its budget), the
//! rule's `fallback_to_local_when_fail` decides: the rule's local check,
//! or a pass.
//!
//! A concurrency-grade rule in cluster mode limits each value on this
//! instance alone, as in Sentinel (whose cluster check is for the QPS
//! grade only). An operator must see it: a warning names their resources
//! when such rules are put in force, and the snapshot and the Prometheus
//! text count them per resource. All of that report runs off the entry
//! path.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use super::checker::CompiledParamFlow;
use super::cluster_flow::{ClusterParamFlow, ParamToken};
use super::rule::{KIND_NAME, ParamFlowGrade, ParamFlowRule};
use crate::ParamValue;
use crate::flow::{ClusterHook, TokenAnswer};
use crate::param_flow::ParamDecision;
use crate::rule::RuleError;

impl CompiledParamFlow {
    /// The check of a rule in cluster mode: the entry's values (each
    /// element of a collection argument) asked of the cluster together,
    /// admitted only if each is within its threshold; with no answer, the
    /// rule's fallback (its local check, or a pass). Off the path of the
    /// rules not in cluster mode.
    #[cold]
    #[inline(never)]
    pub(crate) fn check_cluster(
        &self,
        hook: &ClusterHook,
        args: &[ParamValue],
        batch: u32,
        now_ms: u64,
        now_ns: impl FnOnce() -> u64,
    ) -> ParamDecision {
        let Some(flow) = self.cluster() else {
            return self.check_locally(args, batch, now_ms, now_ns);
        };
        let Some(value) = self.argument(args) else {
            return ParamDecision::Pass;
        };
        let token = |value| ParamToken::new(value, self.threshold_of(value));
        let asked: Vec<ParamToken<'_>> = match value {
            ParamValue::List(list) => list.iter().map(token).collect(),
            value => vec![token(value)],
        };
        if asked.is_empty() {
            return ParamDecision::Pass;
        }
        match hook.acquire_param(flow, &asked, batch, now_ms) {
            TokenAnswer::Granted => ParamDecision::Pass,
            TokenAnswer::Refused => ParamDecision::Block,
            _ if flow.falls_back_to_local() => self.check_locally(args, batch, now_ms, now_ns),
            _ => ParamDecision::Pass,
        }
    }
}

/// The most resources one warning names; the rest are counted.
const MAX_NAMED: usize = 16;

/// Problems between the rules of one list that the cluster counts
/// ([`ClusterParamFlow::of_rule`]): those sharing a flow id share one
/// window, so they must agree on the window, its buckets, the threshold
/// type and the fallback (each keeps its own count and items: the
/// threshold travels with each value). An error names the later rule's
/// `cluster_config.flow_id`.
pub(crate) fn cluster_problems(rules: &[ParamFlowRule]) -> Vec<RuleError> {
    let mut first: HashMap<u64, (usize, ClusterParamFlow)> = HashMap::new();
    let mut errors = Vec::new();
    for (i, rule) in rules.iter().enumerate() {
        let Some(flow) = ClusterParamFlow::of_rule(rule) else {
            continue;
        };
        let (j, other) = first.entry(flow.flow_id()).or_insert((i, flow.clone()));
        if *other != flow {
            errors.push(RuleError::new(
                KIND_NAME,
                i,
                &rule.resource,
                "cluster_config.flow_id",
                format!(
                    "flow id {} is also rule {j}'s (on {}) with other cluster settings \
                     ({:?} per {} ms / {}, fallback_to_local_when_fail {}); rules sharing a \
                     flow id must agree on threshold_type, window_interval_ms, sample_count \
                     and fallback_to_local_when_fail",
                    flow.flow_id(),
                    rules[*j].resource,
                    other.threshold_type(),
                    other.window_interval_ms(),
                    other.sample_count(),
                    other.falls_back_to_local()
                ),
            ));
        }
    }
    errors
}

/// Whether `rule` is in cluster mode but limits on this instance alone
/// (the concurrency grade).
fn limits_locally(rule: &ParamFlowRule) -> bool {
    rule.cluster_mode && rule.grade != ParamFlowGrade::Qps
}

/// The resources of `rules` that have hot-parameter rules in cluster mode
/// limiting on this instance alone, by name, with how many each has.
pub(crate) fn by_resource(rules: &[ParamFlowRule]) -> BTreeMap<&str, usize> {
    let mut found = BTreeMap::new();
    for rule in rules.iter().filter(|rule| limits_locally(rule)) {
        *found.entry(rule.resource.as_str()).or_default() += 1;
    }
    found
}

/// The warning for `rules`, or `None` when none in cluster mode limits
/// locally. At most [`MAX_NAMED`] resources are named.
pub(crate) fn message(rules: &[ParamFlowRule]) -> Option<String> {
    let found = by_resource(rules);
    if found.is_empty() {
        return None;
    }
    let total: usize = found.values().sum();
    let mut text = format!(
        "sentinel: {total} concurrency-grade hot-parameter rule(s) in cluster mode count each \
         value on this instance alone (the cluster counts values of qps-grade rules only); \
         resources: "
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
    fn rules_sharing_a_flow_id_must_agree_on_its_window_and_fallback() {
        let cluster = |resource: &str, flow_id, window_interval_ms| ParamFlowRule {
            cluster_mode: true,
            cluster_config: super::super::ParamFlowClusterConfig {
                flow_id: Some(flow_id),
                window_interval_ms,
                ..Default::default()
            },
            ..ParamFlowRule::new(resource, 0, 1.0)
        };
        // Counts may differ; another flow id may have another window.
        let fine = [
            cluster("a", 1, 1_000),
            ParamFlowRule {
                count: 7.0,
                ..cluster("b", 1, 1_000)
            },
            cluster("c", 2, 2_000),
            ParamFlowRule {
                grade: ParamFlowGrade::Concurrency,
                ..cluster("d", 1, 2_000)
            },
        ];
        assert!(cluster_problems(&fine).is_empty());
        let errors = cluster_problems(&[cluster("a", 1, 1_000), cluster("b", 1, 2_000)]);
        assert_eq!(errors.len(), 1);
        let text = errors[0].to_string();
        assert!(text.contains("cluster_config.flow_id"), "{text}");
        assert!(text.contains("flow id 1 is also rule 0's (on a)"), "{text}");
    }

    #[test]
    fn the_message_names_each_resource_once_and_counts_the_rest() {
        let cluster = |resource: &str| ParamFlowRule {
            cluster_mode: true,
            grade: ParamFlowGrade::Concurrency,
            ..ParamFlowRule::new(resource, 0, 1.0)
        };
        assert_eq!(message(&[ParamFlowRule::new("local", 0, 1.0)]), None);
        let qps = ParamFlowRule {
            cluster_mode: true,
            ..ParamFlowRule::new("counted", 0, 1.0)
        };
        assert_eq!(message(&[qps]), None, "counted by the cluster");
        let text = message(&[cluster("a"), cluster("a"), cluster("b")]).unwrap();
        assert!(
            text.starts_with("sentinel: 3 concurrency-grade hot-parameter rule(s)"),
            "{text}"
        );
        assert!(text.ends_with("resources: a, b"), "{text}");
        let many: Vec<_> = (0..20).map(|i| cluster(&format!("r{i:02}"))).collect();
        assert!(message(&many).unwrap().ends_with(" and 4 more"));
    }
}
