//! Cluster flow control: a flow rule with `cluster_mode` on asks a
//! [`ClusterTokens`] service (given to the instance with
//! [`Sentinel::set_cluster_tokens`](crate::Sentinel::set_cluster_tokens)) for its permits instead of counting
//! locally. The core knows no transport: `sentinel-flow-cluster` implements the
//! service on Redis.
//!
//! A resource without cluster rules pays nothing for this; a cluster rule
//! loads the service once per entry (an `arc_swap` load) and calls it.
//!
//! Two ways a cluster rule ends up decided by its fallback are kept apart: no
//! service attached at all ([`ClusterStatus::NotAttached`], a
//! misconfiguration, warned of and shown per resource; see `unattached.rs`),
//! and a service attached that cannot answer
//! ([`ClusterStatus::Unavailable`], shown by the service's own state, e.g.
//! `sentinel_cluster_fallback`).

use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwapOption;

use super::cluster_config::{ClusterFlowConfig, ClusterThresholdType};
use super::rule::{FlowGrade, FlowRule};

/// What a [`ClusterTokens`] service answered for some permits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum TokenAnswer {
    /// The permits are the entry's.
    Granted,
    /// The cluster window is full, or (for a rule that falls back
    /// locally) no answer came and the service's own fallback allowance
    /// for this instance is spent: the entry is blocked by the rule.
    Refused,
    /// No answer in time (cluster down or slow): the rule's
    /// `fallback_to_local_when_fail` decides (the rule's count on this
    /// instance, or a pass). A service may count the entry against a
    /// fallback allowance of its own before answering this, and refuse
    /// past it.
    Unavailable,
}

/// A cluster rule as a [`ClusterTokens`] service sees it.
#[derive(Debug)]
pub struct ClusterFlow {
    flow_id: u64,
    count: f64,
    config: ClusterFlowConfig,
    /// What [`ClusterTokens::bind`] gave for this rule, with the hook's
    /// generation it was given under.
    binding: OnceLock<Binding>,
}

type Binding = (u64, Option<Arc<dyn ClusterTokens>>);

impl ClusterFlow {
    /// The cluster flow of a rule in cluster mode with a flow id (`None`
    /// for any other rule).
    pub fn of_rule(rule: &FlowRule) -> Option<Self> {
        // Cluster concurrency is not counted across instances: a
        // concurrency-grade rule in cluster mode limits locally.
        let flow_id = rule
            .cluster_config
            .flow_id
            .filter(|_| rule.cluster_mode && rule.grade == FlowGrade::Qps)?;
        Some(ClusterFlow {
            flow_id,
            count: rule.count,
            config: rule.cluster_config.clone(),
            binding: OnceLock::new(),
        })
    }

    /// The id shared across the cluster.
    pub fn flow_id(&self) -> u64 {
        self.flow_id
    }

    /// The rule's count (per instance with [`ClusterThresholdType::AvgLocal`]).
    pub fn count(&self) -> f64 {
        self.count
    }

    /// Global or per instance.
    pub fn threshold_type(&self) -> ClusterThresholdType {
        self.config.threshold_type
    }

    /// The cluster window, ms.
    pub fn window_interval_ms(&self) -> u64 {
        self.config.window_interval_ms
    }

    /// Buckets of the cluster window.
    pub fn sample_count(&self) -> u32 {
        self.config.sample_count
    }

    /// Whether an unanswered request is decided locally
    /// (`fallback_to_local_when_fail`); `false`: the entry passes.
    pub fn falls_back_to_local(&self) -> bool {
        self.config.fallback_to_local_when_fail
    }
}

/// Hands out a cluster rule's permits. Called on the entry's thread for
/// each entry a cluster rule applies to: an implementation answers from a
/// local lease without blocking when it can, and must bound any wait.
pub trait ClusterTokens: Send + Sync + fmt::Debug + 'static {
    /// `permits` of `flow` for an entry at `now_ms` (the instance's clock).
    fn acquire(&self, flow: &ClusterFlow, permits: u32, now_ms: u64) -> TokenAnswer;

    /// A service for `flow` alone, which the compiled rule keeps and asks
    /// from then on instead of this one (sparing a lookup per entry), until
    /// the instance is given another service. `None` (the default): ask
    /// this one.
    fn bind(&self, flow: &ClusterFlow) -> Option<Arc<dyn ClusterTokens>> {
        let _ = flow;
        None
    }

    /// Appends the service's own metric families (Prometheus text format,
    /// each with its `# HELP` and `# TYPE`) to a scrape of the instance
    /// (`prometheus::render_prometheus`), so that an operator sees the
    /// cluster's state (fallback, round trips) beside the instance's
    /// counters. The default appends nothing.
    fn render_prometheus(&self, out: &mut String) {
        let _ = out;
    }

    /// Whether the service can answer now (connected to what holds the
    /// cluster windows). `false` while it cannot: its rules are then
    /// decided by their fallback, and the command API's `getClusterMode`
    /// reports the instance as not started. Read off the entry path, by
    /// [`Sentinel::cluster_status`](crate::Sentinel::cluster_status). The default: always (an in-process
    /// service).
    fn is_available(&self) -> bool {
        true
    }

    /// Where the service asks for permits and how long it waits, for
    /// operators (the command API's `cluster/client/fetchConfig`). Read
    /// off the entry path. `None` (the default): the service does not say.
    fn endpoint(&self) -> Option<ClusterEndpoint> {
        None
    }
}

/// Where a [`ClusterTokens`] service asks for permits
/// ([`ClusterTokens::endpoint`]): the host and port of what holds the
/// cluster windows (for `sentinel-flow-cluster`, the Redis server), the
/// longest an entry waits for an answer before its rule falls back, and,
/// if the service has one, how long it waits to connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterEndpoint {
    host: String,
    port: u16,
    request_timeout: Duration,
    connect_timeout: Option<Duration>,
}

impl ClusterEndpoint {
    /// `host:port`, answering an entry within `request_timeout`.
    pub fn new(host: impl Into<String>, port: u16, request_timeout: Duration) -> Self {
        ClusterEndpoint {
            host: host.into(),
            port,
            request_timeout,
            connect_timeout: None,
        }
    }

    /// The same endpoint, connected to within `timeout`.
    #[must_use]
    pub fn with_connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// The host (a name or an address) of what holds the cluster windows.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The longest an entry waits for an answer before its rule falls back.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// How long the service waits to connect, if it says.
    pub fn connect_timeout(&self) -> Option<Duration> {
        self.connect_timeout
    }
}

/// Where an instance's cluster service stands ([`Sentinel::cluster_status`](crate::Sentinel::cluster_status)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClusterStatus {
    /// No service attached: rules in cluster mode are decided by their
    /// fallback (their count on this instance alone, or a pass).
    /// A misconfiguration, warned of when such rules are loaded or the
    /// service is taken away, and shown by
    /// [`ResourceSnapshot::cluster_rules_unattached`](crate::snapshot::ResourceSnapshot::cluster_rules_unattached).
    NotAttached,
    /// A service is attached but cannot answer now
    /// ([`ClusterTokens::is_available`] is false): rules in cluster mode
    /// are decided by their fallback until it can.
    Unavailable,
    /// A service is attached and answers.
    Available,
}

/// The instance's service, if any (in an `Arc` of its own: `arc_swap`
/// holds sized types), and how many times it was set: a rule's binding of
/// another generation is not used.
pub(crate) struct ClusterHook {
    tokens: ArcSwapOption<Arc<dyn ClusterTokens>>,
    generation: AtomicU64,
    /// When a service was last given or taken away (the instance's clock,
    /// ms; `NEVER` before the first time).
    changed_ms: AtomicU64,
}

/// `changed_ms` before any service was given.
const NEVER: u64 = u64::MAX;

impl Default for ClusterHook {
    fn default() -> Self {
        ClusterHook {
            tokens: ArcSwapOption::empty(),
            generation: AtomicU64::new(0),
            changed_ms: AtomicU64::new(NEVER),
        }
    }
}

impl fmt::Debug for ClusterHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterHook")
            .field("tokens", &self.tokens.load().as_deref())
            .field("generation", &self.generation.load(Ordering::Relaxed))
            .finish()
    }
}

impl ClusterHook {
    /// The families of the instance's service, if it has one.
    #[cfg(feature = "prometheus")]
    pub(crate) fn render_prometheus(&self, out: &mut String) {
        if let Some(tokens) = &*self.tokens.load() {
            tokens.render_prometheus(out);
        }
    }

    /// When a service was last given or taken away (instance clock's
    /// ms); `None` if never.
    pub(crate) fn changed_ms(&self) -> Option<u64> {
        Some(self.changed_ms.load(Ordering::Relaxed)).filter(|&ms| ms != NEVER)
    }

    /// Asks the rule's bound service, or the instance's; `Unavailable`
    /// when there is none. Bound: two atomic loads and a call.
    #[inline]
    pub(crate) fn acquire(&self, flow: &ClusterFlow, permits: u32, now_ms: u64) -> TokenAnswer {
        let generation = self.generation.load(Ordering::Acquire);
        if let Some((bound_in, Some(bound))) = flow.binding.get()
            && *bound_in == generation
        {
            return ask(&**bound, flow, permits, now_ms);
        }
        self.acquire_unbound(flow, generation, permits, now_ms)
    }

    #[cold]
    fn acquire_unbound(
        &self,
        flow: &ClusterFlow,
        generation: u64,
        permits: u32,
        now_ms: u64,
    ) -> TokenAnswer {
        let tokens = self.tokens.load();
        let Some(tokens) = &*tokens else {
            return TokenAnswer::Unavailable;
        };
        let bound = match flow.binding.get() {
            Some((bound_in, bound)) if *bound_in == generation => bound.clone(),
            // Bound to a service the instance no longer has: asked through
            // the instance's (a lookup per entry, no binding per entry)
            // until the rule is compiled again (a changed rule on reload).
            Some(_) => None,
            None => {
                let bound = panic::catch_unwind(AssertUnwindSafe(|| tokens.bind(flow)))
                    .unwrap_or_else(|_| {
                        service_panicked("bind");
                        None
                    });
                let _ = flow.binding.set((generation, bound.clone()));
                bound
            }
        };
        match bound {
            Some(bound) => ask(&*bound, flow, permits, now_ms),
            None => ask(&***tokens, flow, permits, now_ms),
        }
    }

    /// Puts `tokens` in place at `now_ms`; whether a service was in place
    /// before.
    pub(crate) fn set(&self, tokens: Option<Arc<dyn ClusterTokens>>, now_ms: u64) -> bool {
        let before = self.tokens.swap(tokens.map(Arc::new));
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.changed_ms.store(now_ms, Ordering::Relaxed);
        before.is_some()
    }

    /// Whether a service is attached.
    pub(crate) fn is_attached(&self) -> bool {
        self.tokens.load().is_some()
    }

    /// What the instance's service says of its endpoint; `None` without a
    /// service, when it does not say, or when it panics saying it.
    pub(crate) fn endpoint(&self) -> Option<ClusterEndpoint> {
        let tokens = self.tokens.load();
        let tokens = (*tokens).as_ref()?;
        panic::catch_unwind(AssertUnwindSafe(|| tokens.endpoint())).unwrap_or_else(|_| {
            service_panicked("endpoint");
            None
        })
    }

    pub(crate) fn status(&self) -> ClusterStatus {
        match &*self.tokens.load() {
            None => ClusterStatus::NotAttached,
            Some(tokens) if tokens.is_available() => ClusterStatus::Available,
            Some(_) => ClusterStatus::Unavailable,
        }
    }
}

/// `service.acquire(..)`, with a panic in the service taken as no answer:
/// the entry's checks so far (leases, reservations) are then given back by
/// the check as for any other outcome, and the rule falls back as its
/// `fallback_to_local_when_fail` says.
#[inline]
fn ask(service: &dyn ClusterTokens, flow: &ClusterFlow, permits: u32, now_ms: u64) -> TokenAnswer {
    panic::catch_unwind(AssertUnwindSafe(|| service.acquire(flow, permits, now_ms))).unwrap_or_else(
        |_| {
            service_panicked("acquire");
            TokenAnswer::Unavailable
        },
    )
}

/// Logs the first panic of a cluster token service in the process (a bug
/// in the service, which would otherwise log on every entry).
#[cold]
fn service_panicked(call: &str) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        tracing::error!(
            call,
            "sentinel: the cluster token service panicked; its answers count as unavailable"
        );
    });
}
