//! What an operator reads of a client: fallback or not, and each flow id's
//! lease and the window as Redis last reported it; and the same as
//! Prometheus text.

use std::fmt::Write;
use std::sync::atomic::Ordering::{Acquire, Relaxed};

use serde::Serialize;

use crate::shared::Shared;

/// A client's state at one instant.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ClusterSnapshot {
    /// This instance's id among the live instances.
    pub instance: String,
    /// Whether cluster rules are decided by their fallback now (Redis down,
    /// not yet reached, or failing).
    pub fallback: bool,
    /// Why, when in fallback.
    pub fallback_reason: Option<String>,
    /// Switches into fallback and back since start.
    pub fallback_switches: u64,
    /// Entries decided by the fallback since start.
    pub fallback_decisions: u64,
    /// Entries that waited the whole budget and fell back.
    pub over_budget: u64,
    /// Failed Redis calls since start.
    pub errors: u64,
    /// Connections made since start (1 plus reconnections).
    pub connects: u64,
    /// Connection attempts since start, spaced by the backoff.
    pub connect_attempts: u64,
    /// Redis calls in flight now.
    pub in_flight: u64,
    /// Cluster concurrency: token releases queued for Redis now.
    pub pending_releases: u64,
    /// Cluster concurrency: releases dropped past the queue's bound (their
    /// tokens expired in Redis after the rule's `resource_timeout`).
    pub dropped_releases: u64,
    /// Each flow id seen, by id.
    pub flows: Vec<FlowSnapshot>,
    /// Each hot-parameter flow id seen, by id.
    pub param_flows: Vec<ParamFlowSnapshot>,
}

/// One hot-parameter flow id on this instance.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct ParamFlowSnapshot {
    /// The flow id.
    pub flow_id: u64,
    /// Calls of the script (one per entry Redis counted or refused).
    pub round_trips: u64,
    /// Entries whose values Redis counted.
    pub granted: u64,
    /// Entries Redis refused (a value at its threshold).
    pub refused: u64,
    /// Entries with a new value while the window tracked the cap of
    /// values ([`ClusterConfig::param_values_cap`](crate::ClusterConfig::param_values_cap)):
    /// decided by the fallback.
    pub overflows: u64,
    /// Entries decided by the fallback (overflows included).
    pub fallback_decisions: u64,
    /// Entries the fallback admitted that later calls charged to the
    /// cluster's window.
    pub fallback_charged: u64,
    /// Values the flow id tracked in its window at the latest call.
    pub values_tracked: u64,
    /// Live instances of the flow id at the latest call or heartbeat.
    pub instances: u64,
}

/// One flow id on this instance.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct FlowSnapshot {
    /// The flow id.
    pub flow_id: u64,
    /// Permits held in the lease and its threads' sub-leases, not spent
    /// yet (until their expiry).
    pub lease_permits: u64,
    /// Calls of the acquire script.
    pub round_trips: u64,
    /// Permits Redis granted this instance.
    pub granted: u64,
    /// Permits refunded to Redis (expired leases).
    pub refunded: u64,
    /// The window's total after the latest call.
    pub window_total: u64,
    /// The cluster threshold at the latest call (count x instances for
    /// avg_local).
    pub threshold: u64,
    /// Live instances of the flow id at the latest call or heartbeat.
    pub instances: u64,
    /// The most this instance's fallback admits in a window, grants
    /// included: its share of the threshold.
    pub fallback_allowance: u64,
    /// Entries the fallback admitted that acquire calls charged to the
    /// cluster's window.
    pub fallback_charged: u64,
    /// Cluster concurrency: permits of the tokens this instance holds now,
    /// from Redis and from its fallback (`granted` counts the tokens Redis
    /// gave, `refunded` those given back to it; `window_total` is the
    /// cluster's tokens in use at the latest call).
    pub tokens_held: u64,
}

impl ClusterSnapshot {
    pub(crate) fn of(shared: &Shared) -> Self {
        let c = &shared.counters;
        let mut flows: Vec<FlowSnapshot> = shared
            .flows
            .load()
            .values()
            .map(|flow| {
                // Before `last` is held: the allowance reads it too.
                let fallback_allowance = flow.fallback_allowance();
                let last = flow.last.lock();
                let grant = last.grant;
                FlowSnapshot {
                    flow_id: flow.id,
                    lease_permits: flow.lease.held().0 + flow.lease.parked(),
                    round_trips: last.round_trips,
                    granted: last.granted,
                    refunded: last.refunded,
                    window_total: grant.map_or(0, |g| g.total),
                    threshold: grant.map_or(0, |g| g.threshold),
                    instances: flow.instances(),
                    fallback_allowance,
                    fallback_charged: last.charged,
                    tokens_held: flow.concurrent.held.lock().permits,
                }
            })
            .collect();
        flows.sort_by_key(|f| f.flow_id);
        let mut param_flows: Vec<ParamFlowSnapshot> = shared
            .param_flows
            .load()
            .values()
            .map(|flow| {
                let n = &flow.counters;
                ParamFlowSnapshot {
                    flow_id: flow.id,
                    round_trips: n.round_trips.load(Relaxed),
                    granted: n.granted.load(Relaxed),
                    refused: n.refused.load(Relaxed),
                    overflows: n.overflows.load(Relaxed),
                    fallback_decisions: n.fallbacks.load(Relaxed),
                    fallback_charged: n.charged.load(Relaxed),
                    values_tracked: n.tracked.load(Relaxed),
                    instances: flow.instances(),
                }
            })
            .collect();
        param_flows.sort_by_key(|f| f.flow_id);
        ClusterSnapshot {
            instance: shared.instance.clone(),
            fallback: !shared.is_up(),
            fallback_reason: shared.last_error.lock().clone(),
            fallback_switches: c.switches.load(Acquire),
            fallback_decisions: c.fallbacks.load(Relaxed),
            over_budget: c.over_budget.load(Relaxed),
            errors: c.errors.load(Relaxed),
            connects: c.connects.load(Relaxed),
            connect_attempts: c.attempts.load(Relaxed),
            in_flight: c.in_flight.load(Relaxed),
            pending_releases: shared.releases.lock().len() as u64,
            dropped_releases: c.dropped_releases.load(Relaxed),
            flows,
            param_flows,
        }
    }

    /// Prometheus text exposition (version 0.0.4) of the snapshot, to
    /// append to an instance's metrics: `sentinel_cluster_fallback` (1 in
    /// fallback) and counters of decisions, calls and permits.
    pub fn to_prometheus(&self) -> String {
        let mut out = String::new();
        let instance = escape(&self.instance);
        let mut gauge = |name: &str, kind: &str, help: &str, value: u64| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            let _ = writeln!(out, "{name}{{instance=\"{instance}\"}} {value}");
        };
        gauge(
            "sentinel_cluster_fallback",
            "gauge",
            "1 while cluster rules are decided by their local fallback",
            u64::from(self.fallback),
        );
        gauge(
            "sentinel_cluster_fallback_switches_total",
            "counter",
            "switches into fallback and back",
            self.fallback_switches,
        );
        gauge(
            "sentinel_cluster_fallback_decisions_total",
            "counter",
            "entries decided by the fallback",
            self.fallback_decisions,
        );
        gauge(
            "sentinel_cluster_over_budget_total",
            "counter",
            "entries that waited the whole budget for redis",
            self.over_budget,
        );
        gauge(
            "sentinel_cluster_redis_errors_total",
            "counter",
            "failed redis calls",
            self.errors,
        );
        gauge(
            "sentinel_cluster_dropped_releases_total",
            "counter",
            "concurrency token releases dropped past the queue bound",
            self.dropped_releases,
        );
        let per_flow: [(&str, &str, &str, FlowFigure); 7] = [
            (
                "sentinel_cluster_round_trips_total",
                "counter",
                "acquire script calls",
                |f| f.round_trips,
            ),
            (
                "sentinel_cluster_granted_total",
                "counter",
                "permits granted by redis",
                |f| f.granted,
            ),
            (
                "sentinel_cluster_lease_permits",
                "gauge",
                "permits held in the lease",
                |f| f.lease_permits,
            ),
            (
                "sentinel_cluster_instances",
                "gauge",
                "live instances of the flow id",
                |f| f.instances,
            ),
            (
                "sentinel_cluster_fallback_allowance",
                "gauge",
                "the most the fallback admits in a window, grants included",
                |f| f.fallback_allowance,
            ),
            (
                "sentinel_cluster_fallback_charged_total",
                "counter",
                "fallback admissions charged to the cluster window",
                |f| f.fallback_charged,
            ),
            (
                "sentinel_cluster_tokens_held",
                "gauge",
                "permits of the concurrency tokens this instance holds",
                |f| f.tokens_held,
            ),
        ];
        for (name, kind, help, value) in per_flow {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for flow in &self.flows {
                let _ = writeln!(
                    out,
                    "{name}{{instance=\"{instance}\",flow_id=\"{}\"}} {}",
                    flow.flow_id,
                    value(flow)
                );
            }
        }
        let per_param_flow: [(&str, &str, &str, ParamFigure); 5] = [
            (
                "sentinel_cluster_param_round_trips_total",
                "counter",
                "hot-parameter script calls",
                |f| f.round_trips,
            ),
            (
                "sentinel_cluster_param_refused_total",
                "counter",
                "hot-parameter entries refused by redis",
                |f| f.refused,
            ),
            (
                "sentinel_cluster_param_overflows_total",
                "counter",
                "hot-parameter entries with a new value past the cap on values tracked",
                |f| f.overflows,
            ),
            (
                "sentinel_cluster_param_fallback_decisions_total",
                "counter",
                "hot-parameter entries decided by the fallback",
                |f| f.fallback_decisions,
            ),
            (
                "sentinel_cluster_param_values_tracked",
                "gauge",
                "values the hot-parameter flow id tracked in its window at the latest call",
                |f| f.values_tracked,
            ),
        ];
        for (name, kind, help, value) in per_param_flow {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for flow in &self.param_flows {
                let _ = writeln!(
                    out,
                    "{name}{{instance=\"{instance}\",flow_id=\"{}\"}} {}",
                    flow.flow_id,
                    value(flow)
                );
            }
        }
        out
    }
}

/// One figure of a flow's snapshot.
type FlowFigure = fn(&FlowSnapshot) -> u64;

/// One figure of a hot-parameter flow's snapshot.
type ParamFigure = fn(&ParamFlowSnapshot) -> u64;

/// A label value with `\`, `"` and newlines escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
