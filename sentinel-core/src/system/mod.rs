//! System adaptive protection: limits on every inbound entry of an instance
//! together ([`SystemRule`]).
//!
//! Only inbound entries ([`EntryType::Inbound`](crate::EntryType::Inbound))
//! are checked, against the instance's inbound total
//! ([`Sentinel::inbound_node`](crate::Sentinel::inbound_node)), as in
//! Sentinel: inbound QPS, calls inside, average response time, and the
//! machine's load average and CPU usage ([`SystemStatus`], read from
//! `/proc` on Linux). With several rules the strictest value of each limit
//! applies.
//!
//! The load limit follows Sentinel's BBR condition: past the load, an entry
//! is refused only while more calls are inside than the service completes
//! in its best response time (`concurrency > max success QPS × min RT /
//! 1000`); a service that keeps up is not throttled for a load others make.
//!
//! ```
//! use sentinel_flow_core::system::{ManualStatus, SystemRule};
//! use sentinel_flow_core::{BlockKind, EntryType, ManualClock, Sentinel};
//!
//! let status = ManualStatus::new();
//! let sentinel = Sentinel::builder()
//!     .clock(ManualClock::new(0))
//!     .system_status(status.clone())
//!     .build();
//! sentinel.system_rules().load(vec![SystemRule {
//!     max_thread: Some(1),
//!     ..SystemRule::default()
//! }])?;
//!
//! let inbound = || sentinel.entry_builder("GET:/orders").entry_type(EntryType::Inbound).enter();
//! let first = inbound().unwrap();
//! let second = inbound().unwrap(); // one inside: not over the limit yet
//! assert_eq!(inbound().unwrap_err().kind(), BlockKind::System);
//! // Outbound entries are not checked.
//! assert!(sentinel.entry("db:orders").is_ok());
//! # drop((first, second));
//! # Ok::<(), sentinel_flow_core::RuleErrors>(())
//! ```
//!
//! The module is the kind alone: `rule.rs` the rule as loaded, `status.rs`
//! the machine's readings, here the limits compiled from every rule and
//! the check. The instance's rule set, which composes every kind, loads
//! them ([`Sentinel::system_rules`](crate::Sentinel::system_rules)).

mod fields;
mod rule;
mod slot;
mod status;

use std::sync::Arc;

pub use rule::{MAX_SYSTEM_AVG_RT_MS, MAX_SYSTEM_THREADS, SystemRule};
pub(crate) use slot::SystemKind;
pub use status::{ManualStatus, ProcStatus, SystemStatus};

use crate::node::StatisticNode;
use rule::SystemField;

/// One limit in force: its value and the rule (reduced to that limit) that
/// set it, named by a block.
#[derive(Debug)]
struct Limit<T> {
    value: T,
    rule: Arc<SystemRule>,
}

/// The strictest value of each limit over every system rule.
#[derive(Debug, Default)]
pub(crate) struct SystemLimits {
    pub(crate) rules: Vec<SystemRule>,
    load: Option<Limit<f64>>,
    cpu: Option<Limit<f64>>,
    qps: Option<Limit<f64>>,
    avg_rt: Option<Limit<f64>>,
    max_thread: Option<Limit<f64>>,
}

impl SystemLimits {
    /// The strictest value of each limit over `rules`.
    pub(crate) fn compile(rules: Vec<SystemRule>) -> Self {
        fn strictest(
            rules: &[SystemRule],
            field: SystemField,
            value: impl Fn(&SystemRule) -> Option<f64>,
        ) -> Option<Limit<f64>> {
            let (rule, value) = rules
                .iter()
                .filter_map(|rule| Some((rule, value(rule)?)))
                .min_by(|a, b| a.1.total_cmp(&b.1))?;
            Some(Limit {
                value,
                rule: Arc::new(rule.only(field)),
            })
        }
        SystemLimits {
            load: strictest(&rules, SystemField::Load, |r| r.highest_system_load),
            cpu: strictest(&rules, SystemField::Cpu, |r| r.highest_cpu_usage),
            qps: strictest(&rules, SystemField::Qps, |r| r.qps),
            avg_rt: strictest(&rules, SystemField::AvgRt, |r| r.avg_rt.map(|v| v as f64)),
            max_thread: strictest(&rules, SystemField::MaxThread, |r| {
                r.max_thread.map(|v| v as f64)
            }),
            rules,
        }
    }

    /// Whether any limit is set.
    pub(crate) fn is_on(&self) -> bool {
        !self.rules.is_empty()
    }

    /// Checks an inbound entry of `batch` permits against the inbound total
    /// `node` at `now`: `Err(rule)` names the limit it is over, reduced to
    /// that limit.
    pub(crate) fn check(
        &self,
        node: &StatisticNode,
        status: &dyn SystemStatus,
        batch: u32,
        now: u64,
    ) -> Result<(), &Arc<SystemRule>> {
        if let Some(qps) = &self.qps
            && node.pass_qps(now) + f64::from(batch) > qps.value
        {
            return Err(&qps.rule);
        }
        let concurrency = node.cur_concurrency() as f64;
        if let Some(max) = &self.max_thread
            && concurrency > max.value
        {
            return Err(&max.rule);
        }
        if let Some(rt) = &self.avg_rt
            && node.avg_rt(now) > rt.value
        {
            return Err(&rt.rule);
        }
        if let Some(load) = &self.load
            && status
                .load_average()
                .is_some_and(|current| current > load.value)
            && !keeps_up(node, concurrency, now)
        {
            return Err(&load.rule);
        }
        if let Some(cpu) = &self.cpu
            && status
                .cpu_usage()
                .is_some_and(|current| current > cpu.value)
        {
            return Err(&cpu.rule);
        }
        Ok(())
    }
}

/// Sentinel's BBR condition: the service keeps up while no more calls are
/// inside than it completes in its best response time.
fn keeps_up(node: &StatisticNode, concurrency: f64, now: u64) -> bool {
    concurrency <= 1.0
        || concurrency <= node.max_success_qps(now) * node.min_rt(now) as f64 / 1_000.0
}
