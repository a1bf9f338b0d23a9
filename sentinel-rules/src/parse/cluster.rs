//! A flow rule's `cluster_mode` settings: the `cluster_config` mapping,
//! each field at its position, and where a rule's `flow_id` is written (the
//! check that rules sharing a flow id share one threshold, run over a
//! file's `flow` list in `kinds.rs`, reports there).

use sentinel_flow_core::RuleError;
use sentinel_flow_core::flow::{ClusterFlowConfig, ClusterThresholdType};
use sentinel_flow_core::param_flow::{ParamClusterThresholdType, ParamFlowClusterConfig};

use super::fields::RuleFields;
use super::scalar::{Scalar, resolve};
use super::tree::{Node, Value};
use crate::error::Position;

const FIELD: &str = "cluster_config";
const KNOWN: &[&str] = &[
    "flow_id",
    "threshold_type",
    "fallback_to_local_when_fail",
    "sample_count",
    "window_interval_ms",
    "strategy",
    "resource_timeout",
    "resource_timeout_strategy",
    "acquire_refuse_strategy",
    "client_offline_time",
];

/// `cluster_config` as read, with where each of its fields was written.
#[derive(Default)]
pub(crate) struct Read {
    pub(crate) config: ClusterFlowConfig,
    positions: Vec<(String, Position)>,
    /// Sub-fields already reported (the core's word on them is dropped).
    bad: Vec<String>,
}

impl Read {
    /// Where a core error on `cluster_config.<field>` points.
    pub(crate) fn position_of(&self, error: &RuleError) -> Option<Position> {
        self.positions
            .iter()
            .find(|(name, _)| name == error.field)
            .map(|(_, pos)| *pos)
    }

    /// Whether the core's `error` is about a sub-field already reported.
    pub(crate) fn reported(&self, error: &RuleError) -> bool {
        self.bad.iter().any(|name| name == error.field)
    }
}

/// Reads the `cluster_config` mapping of a flow rule.
pub(crate) fn config(f: &mut RuleFields<'_>) -> Read {
    let mut read = Read::default();
    let Some(node) = f.take(FIELD) else {
        return read;
    };
    let Value::Map(entries) = &node.value else {
        let message = format!("must be a mapping, got {}", node.value.describe());
        f.report_in(FIELD, FIELD.to_owned(), node.pos, message);
        return read;
    };
    let mut seen: Vec<&str> = Vec::new();
    for (key, value) in entries {
        let name = match &key.value {
            Value::Scalar { text, .. } => text.as_ref(),
            _ => "?",
        };
        let part = format!("{FIELD}.{name}");
        if !KNOWN.contains(&name) || seen.contains(&name) {
            let message = match seen.contains(&name) {
                true => "is written twice".to_owned(),
                false => format!(
                    "is not a field of cluster_config (known: {})",
                    KNOWN.join(", ")
                ),
            };
            f.report_in(FIELD, part, key.pos, message);
            continue;
        }
        seen.push(name);
        read.positions.push((part.clone(), value.pos));
        let c = &mut read.config;
        let result = match name {
            "flow_id" => whole(value, u64::MAX.into()).map(|n| c.flow_id = n.map(|n| n as u64)),
            "sample_count" => whole(value, u32::MAX.into())
                .map(|n| c.sample_count = n.map_or(c.sample_count, |n| n as u32)),
            "window_interval_ms" => whole(value, u64::MAX.into())
                .map(|n| c.window_interval_ms = n.map_or(c.window_interval_ms, |n| n as u64)),
            "strategy" => whole(value, u32::MAX.into())
                .map(|n| c.strategy = n.map_or(c.strategy, |n| n as u32)),
            "resource_timeout" => whole(value, u64::MAX.into())
                .map(|n| c.resource_timeout = n.map_or(c.resource_timeout, |n| n as u64)),
            "resource_timeout_strategy" => whole(value, u32::MAX.into()).map(|n| {
                c.resource_timeout_strategy = n.map_or(c.resource_timeout_strategy, |n| n as u32)
            }),
            "acquire_refuse_strategy" => whole(value, u32::MAX.into()).map(|n| {
                c.acquire_refuse_strategy = n.map_or(c.acquire_refuse_strategy, |n| n as u32)
            }),
            "client_offline_time" => whole(value, u64::MAX.into())
                .map(|n| c.client_offline_time = n.map_or(c.client_offline_time, |n| n as u64)),
            "fallback_to_local_when_fail" => flag(value).map(|b| {
                c.fallback_to_local_when_fail = b.unwrap_or(c.fallback_to_local_when_fail)
            }),
            _ => threshold_type(value).map(|t| c.threshold_type = t.unwrap_or(c.threshold_type)),
        };
        if let Err(message) = result {
            f.report_in(FIELD, part.clone(), value.pos, message);
            read.bad.push(part);
        }
    }
    read
}

fn scalar<'a>(node: &'a Node<'_>) -> Option<Scalar<'a>> {
    match &node.value {
        Value::Scalar { text, plain } => Some(resolve(text, *plain)),
        _ => None,
    }
}

/// A whole number in `0..=max`, `None` for null.
fn whole(node: &Node<'_>, max: i128) -> Result<Option<i128>, String> {
    match scalar(node) {
        Some(Scalar::Null) => Ok(None),
        Some(Scalar::Int(i)) if (0..=max).contains(&i) => Ok(Some(i)),
        Some(Scalar::Int(i)) => Err(format!("must be a whole number in 0..={max}, got {i}")),
        _ => Err(format!(
            "must be a whole number in 0..={max}, got {}",
            node.value.describe()
        )),
    }
}

fn flag(node: &Node<'_>) -> Result<Option<bool>, String> {
    match scalar(node) {
        Some(Scalar::Null) => Ok(None),
        Some(Scalar::Bool(b)) => Ok(Some(b)),
        _ => Err(format!(
            "must be true or false, got {}",
            node.value.describe()
        )),
    }
}

fn threshold_type(node: &Node<'_>) -> Result<Option<ClusterThresholdType>, String> {
    match &node.value {
        Value::Scalar { text, .. } if text == "global" => Ok(Some(ClusterThresholdType::Global)),
        Value::Scalar { text, .. } if text == "avg_local" => {
            Ok(Some(ClusterThresholdType::AvgLocal))
        }
        _ if matches!(scalar(node), Some(Scalar::Null)) => Ok(None),
        other => Err(format!(
            "must be one of global, avg_local, got {}",
            other.describe()
        )),
    }
}

impl Read {
    /// Whether `cluster_config.<name>` was written.
    pub(crate) fn written(&self, name: &str) -> bool {
        self.positions
            .iter()
            .any(|(part, _)| part.strip_prefix("cluster_config.") == Some(name))
    }

    /// The settings as a hot-parameter rule's: the fields written, the
    /// others at that kind's defaults.
    pub(crate) fn param_config(&self) -> ParamFlowClusterConfig {
        let d = ParamFlowClusterConfig::default();
        let c = &self.config;
        let pick = |name: &str| self.written(name);
        ParamFlowClusterConfig {
            flow_id: c.flow_id,
            threshold_type: match (pick("threshold_type"), c.threshold_type) {
                (false, _) => d.threshold_type,
                (true, ClusterThresholdType::Global) => ParamClusterThresholdType::Global,
                (true, _) => ParamClusterThresholdType::AvgLocal,
            },
            fallback_to_local_when_fail: if pick("fallback_to_local_when_fail") {
                c.fallback_to_local_when_fail
            } else {
                d.fallback_to_local_when_fail
            },
            sample_count: c.sample_count,
            window_interval_ms: c.window_interval_ms,
        }
    }
}

/// Where `cluster_config.flow_id` is written in a rule's mapping.
pub(crate) fn flow_id_position(rule: &Node<'_>) -> Option<Position> {
    let field = |node: &Node<'_>, name: &str| -> Option<Position> {
        let Value::Map(entries) = &node.value else {
            return None;
        };
        entries.iter().find_map(|(key, value)| match &key.value {
            Value::Scalar { text, .. } if text == name => Some(value.pos),
            _ => None,
        })
    };
    let Value::Map(entries) = &rule.value else {
        return None;
    };
    let config = entries.iter().find_map(|(key, value)| match &key.value {
        Value::Scalar { text, .. } if text == FIELD => Some(value),
        _ => None,
    })?;
    field(config, "flow_id")
}
