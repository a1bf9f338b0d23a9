//! What the entries and the worker share: the flows, whether Redis is
//! reachable, the counters, and the hit path the
//! [`ClusterTokens`](sentinel_flow_core::flow::ClusterTokens) service
//! (`tokens.rs`) runs.

mod concurrent;
mod param_values;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Instant;

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use sentinel_flow_core::flow::{ClusterFlow, TokenAnswer};
use sentinel_flow_core::param_flow::ClusterParamFlow;

use crate::config::ClusterConfig;
use crate::flow::{Flow, Params, Waited};
use crate::lease::Take;
use crate::param::ParamFlow;

pub(crate) type Flows = HashMap<u64, Arc<Flow>, foldhash::fast::RandomState>;
pub(crate) type ParamFlows = HashMap<u64, Arc<ParamFlow>, foldhash::fast::RandomState>;

/// Counters of the client's life, for the snapshot and Prometheus.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Entries decided by the fallback (Redis down or over budget).
    pub(crate) fallbacks: AtomicU64,
    /// Entries that waited the whole budget.
    pub(crate) over_budget: AtomicU64,
    /// Switches into fallback mode and back out.
    pub(crate) switches: AtomicU64,
    /// Redis calls that failed.
    pub(crate) errors: AtomicU64,
    /// Calls to Redis in flight now.
    pub(crate) in_flight: AtomicU64,
    /// Connections made.
    pub(crate) connects: AtomicU64,
    /// Connection attempts, made or not (spaced by the backoff).
    pub(crate) attempts: AtomicU64,
    /// Cluster concurrency: releases dropped past the queue's bound (their
    /// tokens expire in Redis).
    pub(crate) dropped_releases: AtomicU64,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: ClusterConfig,
    pub(crate) instance: String,
    pub(crate) flows: ArcSwap<Flows>,
    flows_lock: Mutex<()>,
    /// Hot-parameter flow ids, apart from the flow rules' ids.
    pub(crate) param_flows: ArcSwap<ParamFlows>,
    /// Redis answered lately (false: every cluster rule falls back).
    up: AtomicBool,
    /// A call failed: the worker drops the connection and reconnects.
    pub(crate) broken: AtomicBool,
    /// A refill or a registration went through: the worker's backoff goes
    /// back to its minimum.
    pub(crate) answered: AtomicBool,
    pub(crate) stopping: AtomicBool,
    /// The first failure to reach Redis was logged (or Redis was reached).
    start_logged: AtomicBool,
    /// Wakes the worker: a lease wants refilling, or it should stop.
    pub(crate) wake: tokio::sync::Notify,
    pub(crate) counters: Counters,
    /// Why Redis is taken for down, for the snapshot.
    pub(crate) last_error: Mutex<Option<String>>,
    /// Cluster concurrency: the next token's sequence number.
    pub(crate) next_token: AtomicU64,
    /// Cluster concurrency: token releases for the worker, bounded by
    /// [`MAX_PENDING_RELEASES`](crate::concurrency::MAX_PENDING_RELEASES).
    pub(crate) releases: Mutex<VecDeque<(Arc<Flow>, u64)>>,
}

impl Shared {
    pub(crate) fn new(config: ClusterConfig, instance: String) -> Self {
        Shared {
            config,
            instance,
            flows: ArcSwap::from_pointee(Flows::default()),
            flows_lock: Mutex::new(()),
            param_flows: ArcSwap::from_pointee(ParamFlows::default()),
            up: AtomicBool::new(false),
            broken: AtomicBool::new(false),
            answered: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            start_logged: AtomicBool::new(false),
            wake: tokio::sync::Notify::new(),
            counters: Counters::default(),
            last_error: Mutex::new(None),
            next_token: AtomicU64::new(1),
            releases: Mutex::new(VecDeque::new()),
        }
    }

    /// How long a flow's fallback remembers the most live instances Redis
    /// counted (three instance TTLs), ms.
    pub(crate) fn peak_memory_ms(&self) -> u64 {
        (self.config.ttl() * 3).as_millis() as u64
    }

    pub(crate) fn is_up(&self) -> bool {
        self.up.load(Acquire)
    }

    /// Records that Redis is reachable or not; a change is logged once and
    /// counted, and wakes every waiting entry (so none waits for an answer
    /// that will not come).
    pub(crate) fn set_up(&self, up: bool, why: &str) {
        if !up {
            *self.last_error.lock() = Some(why.to_owned());
        }
        if self.up.swap(up, AcqRel) == up {
            if !up && !self.start_logged.swap(true, AcqRel) {
                tracing::warn!(instance = %self.instance, reason = why, "sentinel-flow-cluster: redis not reached yet, cluster rules fall back");
            }
            return;
        }
        self.start_logged.store(true, Release);
        self.counters.switches.fetch_add(1, Relaxed);
        if up {
            *self.last_error.lock() = None;
            tracing::info!(instance = %self.instance, "sentinel-flow-cluster: redis reachable, cluster limits back on");
        } else if self.stopping.load(Acquire) {
            // The client was dropped: a shutdown, not a failure.
            tracing::info!(instance = %self.instance, "sentinel-flow-cluster: cluster client stopped, cluster rules fall back");
        } else {
            tracing::warn!(instance = %self.instance, reason = why, "sentinel-flow-cluster: redis unavailable, cluster rules fall back");
            for flow in self.flows.load().values() {
                flow.answer();
            }
        }
    }

    /// Marks a failed call: down, and the worker reconnects.
    pub(crate) fn fail(&self, why: &str) {
        self.counters.errors.fetch_add(1, Relaxed);
        self.broken.store(true, Release);
        self.set_up(false, why);
        self.wake.notify_one();
    }

    /// The flow of `flow`'s id, made on first use (a lock, off the hit path).
    pub(crate) fn flow(&self, flow: &ClusterFlow) -> Arc<Flow> {
        if let Some(found) = self.flows.load().get(&flow.flow_id()) {
            return found.clone();
        }
        let _guard = self.flows_lock.lock();
        let current = self.flows.load_full();
        if let Some(found) = current.get(&flow.flow_id()) {
            return found.clone();
        }
        let made = Arc::new(Flow::new(self.config.prefix(), flow));
        let mut next = (*current).clone();
        next.insert(flow.flow_id(), made.clone());
        self.flows.store(Arc::new(next));
        made
    }

    /// The hot-parameter flow of `flow`'s id, made on first use (a lock,
    /// once per flow id).
    pub(crate) fn param_flow(&self, flow: &ClusterParamFlow) -> Arc<ParamFlow> {
        if let Some(found) = self.param_flows.load().get(&flow.flow_id()) {
            return found.clone();
        }
        let _guard = self.flows_lock.lock();
        let current = self.param_flows.load_full();
        if let Some(found) = current.get(&flow.flow_id()) {
            return found.clone();
        }
        let made = Arc::new(ParamFlow::new(self.config.prefix(), flow));
        let mut next = (*current).clone();
        next.insert(flow.flow_id(), made.clone());
        self.param_flows.store(Arc::new(next));
        made
    }

    /// Takes the rule's settings for the flow's next calls, if they changed.
    pub(crate) fn keep_params(&self, flow: &Flow, rule: &ClusterFlow) {
        if flow.set_params(Params::of(rule), self.config.now_ms()) {
            self.wake.notify_one();
        }
    }

    /// Asks the worker for permits of `flow`, once until it answers.
    fn ask(&self, flow: &Flow, now_ms: u64, need: u32) {
        flow.lease.need.fetch_max(need, Relaxed);
        flow.lease.asked_at_ms.store(now_ms, Relaxed);
        if flow.lease.handshake.ask() {
            self.wake.notify_one();
        }
    }

    /// No answer for the entry: a rule that falls back locally admits it
    /// only within the instance's fallback allowance, counted with what
    /// the cluster granted the instance in the window (`ledger.rs`), and
    /// the rule's own local check runs after (`Unavailable`); a rule that
    /// does not fall back lets it pass.
    fn unavailable(
        &self,
        flow: &Flow,
        rule: &ClusterFlow,
        permits: u32,
        now_ms: u64,
    ) -> TokenAnswer {
        self.counters.fallbacks.fetch_add(1, Relaxed);
        if !rule.falls_back_to_local() || flow.admit_fallback(permits, now_ms) {
            TokenAnswer::Unavailable
        } else {
            TokenAnswer::Refused
        }
    }

    /// The lease could not serve the entry: ask Redis, and wait for the
    /// answer no longer than the budget.
    #[cold]
    pub(crate) fn miss(
        &self,
        flow: &Flow,
        rule: &ClusterFlow,
        permits: u32,
        now_ms: u64,
    ) -> TokenAnswer {
        self.keep_params(flow, rule);
        if !self.is_up() {
            return self.unavailable(flow, rule, permits, now_ms);
        }
        let deadline = Instant::now() + self.config.get_budget();
        loop {
            let seen = flow.answers();
            match flow.lease.take(permits, now_ms) {
                Take::Taken { .. } => return TokenAnswer::Granted,
                Take::Full => return TokenAnswer::Refused,
                Take::Empty => {}
            }
            if !self.is_up() {
                return self.unavailable(flow, rule, permits, now_ms);
            }
            self.ask(flow, now_ms, permits);
            if flow.wait(seen, deadline) == Waited::TimedOut {
                return match flow.lease.take(permits, now_ms) {
                    Take::Taken { .. } => TokenAnswer::Granted,
                    Take::Full => TokenAnswer::Refused,
                    Take::Empty => {
                        self.counters.over_budget.fetch_add(1, Relaxed);
                        self.unavailable(flow, rule, permits, now_ms)
                    }
                };
            }
        }
    }
}

impl Shared {
    /// The hit path: the lease, or a miss.
    #[inline]
    pub(crate) fn decide(
        &self,
        flow: &Flow,
        rule: &ClusterFlow,
        permits: u32,
        now_ms: u64,
    ) -> TokenAnswer {
        match flow.lease.take(permits, now_ms) {
            Take::Taken { refill: false } => TokenAnswer::Granted,
            Take::Taken { refill: true } => {
                if self.is_up() {
                    self.ask(flow, now_ms, 1);
                }
                TokenAnswer::Granted
            }
            Take::Full => TokenAnswer::Refused,
            Take::Empty => self.miss(flow, rule, permits, now_ms),
        }
    }
}

/// Bounds a call by the response timeout (the manager has one too; this
/// one also covers a script load after a restart).
pub(crate) async fn with_timeout<T>(
    shared: &Shared,
    call: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, String> {
    let limit = shared.config.timeouts().0;
    shared.counters.in_flight.fetch_add(1, Relaxed);
    let result = tokio::time::timeout(limit, call).await;
    shared.counters.in_flight.fetch_sub(1, Relaxed);
    match result {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(format!("redis call failed: {error}")),
        Err(_) => Err(format!("redis did not answer within {limit:?}")),
    }
}
