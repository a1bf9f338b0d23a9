//! Cluster flow control: a flow rule with `cluster_mode` on asks a
//! [`ClusterTokens`] service (given to the instance with
//! [`Sentinel::set_cluster_tokens`](crate::Sentinel::set_cluster_tokens)) for its permits instead of counting
//! locally. The core knows no transport: `sentinel-flow-cluster` implements the
//! service on Redis.
//!
//! A resource without cluster rules pays nothing for this; a cluster rule
//! loads the service once per entry (an `arc_swap` load) and calls it.
//!
//! A concurrency-grade rule in cluster mode (Sentinel's cluster concurrency)
//! asks the service for a token instead ([`ClusterTokens::acquire_concurrent`]):
//! the entry holds it ([`HeldToken`], in the flow kind's hold) and its exit
//! gives it back ([`ClusterTokens::release_concurrent`]).
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
use crate::param_flow::{ClusterParamFlow, ParamToken};

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

/// What a [`ClusterTokens`] service answered for a cluster concurrency
/// token ([`ClusterTokens::acquire_concurrent`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConcurrencyAnswer {
    /// The entry holds the token with this id until its exit, which gives
    /// it back with [`ClusterTokens::release_concurrent`].
    Granted(u64),
    /// The cluster holds its threshold of tokens (or, for a rule that
    /// falls back locally, no answer came and the service's fallback
    /// allowance for this instance is spent): the entry is blocked.
    Refused,
    /// No answer in time: the rule's `fallback_to_local_when_fail` decides
    /// (the rule's count on this instance's nodes, or a pass). `Some(id)`:
    /// the service counted the entry against a fallback allowance of its
    /// own, and gets the token back at the exit as for a granted one.
    Unavailable(Option<u64>),
}

/// A cluster rule as a [`ClusterTokens`] service sees it.
#[derive(Debug)]
pub struct ClusterFlow {
    flow_id: u64,
    count: f64,
    /// A concurrency-grade rule: tokens held from entry to exit.
    concurrency: bool,
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
        let flow_id = rule.cluster_config.flow_id.filter(|_| rule.cluster_mode)?;
        Some(ClusterFlow {
            flow_id,
            count: rule.count,
            concurrency: rule.grade == FlowGrade::Concurrency,
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

    /// Whether the rule limits concurrency (Sentinel's cluster concurrency):
    /// its entries take a token with [`ClusterTokens::acquire_concurrent`]
    /// and give it back at their exit; `false`: a QPS rule, whose entries
    /// take permits with [`ClusterTokens::acquire`].
    pub fn is_concurrency(&self) -> bool {
        self.concurrency
    }

    /// Cluster concurrency: how long a token may be held, ms
    /// (`resource_timeout`).
    pub fn resource_timeout_ms(&self) -> u64 {
        self.config.resource_timeout
    }

    /// Cluster concurrency: Sentinel's `resource_timeout_strategy` code (0:
    /// the server takes back a token held past twice `resource_timeout`;
    /// 1: past `resource_timeout`).
    pub fn resource_timeout_strategy(&self) -> u32 {
        self.config.resource_timeout_strategy
    }

    /// Cluster concurrency: after how long without a sign of life an
    /// instance's tokens are taken back, ms (`client_offline_time`).
    pub fn client_offline_ms(&self) -> u64 {
        self.config.client_offline_time
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

    /// A cluster concurrency token of `permits` for an entry of `flow` (a
    /// concurrency-grade rule, [`ClusterFlow::is_concurrency`]) at `now_ms`
    /// (the instance's clock). As [`acquire`](Self::acquire), any wait is
    /// bounded. The default: [`ConcurrencyAnswer::Unavailable`] with no
    /// token (the rule's fallback decides), for a service that does not
    /// count concurrency.
    fn acquire_concurrent(
        &self,
        flow: &ClusterFlow,
        permits: u32,
        now_ms: u64,
    ) -> ConcurrencyAnswer {
        let _ = (flow, permits, now_ms);
        ConcurrencyAnswer::Unavailable(None)
    }

    /// Gives back a token this service granted for `flow`, at the exit of
    /// the entry that held it (or when a later check refused the entry).
    /// Called on the exiting thread: it must not wait for the cluster (a
    /// service queues the release and sends it in the background). The
    /// default does nothing.
    fn release_concurrent(&self, flow: &ClusterFlow, token: u64) {
        let _ = (flow, token);
    }

    /// Permits for the values of an entry of a hot-parameter rule in
    /// cluster mode ([`ClusterParamFlow`]) at `now_ms` (the instance's
    /// clock): `permits` of each of `values`, granted only if every one of
    /// them is within its threshold in the cluster's window (and then
    /// counted for each), as Sentinel's token server does. As
    /// [`acquire`](Self::acquire), any wait is bounded;
    /// [`TokenAnswer::Unavailable`] lets the rule's
    /// `fallback_to_local_when_fail` decide. The default: unavailable, for
    /// a service that does not count parameter values.
    fn acquire_param(
        &self,
        flow: &ClusterParamFlow,
        values: &[ParamToken<'_>],
        permits: u32,
        now_ms: u64,
    ) -> TokenAnswer {
        let _ = (flow, values, permits, now_ms);
        TokenAnswer::Unavailable
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

    /// A cluster concurrency token for an entry of `flow` from the rule's
    /// bound service, or the instance's: what the service answered, each
    /// token with the service that gets it back. No service: no answer.
    #[cold]
    pub(crate) fn acquire_concurrent(
        &self,
        flow: &ClusterFlow,
        permits: u32,
        now_ms: u64,
    ) -> Concurrency {
        let Some(service) = self.service(flow) else {
            return Concurrency::Unavailable(None);
        };
        let answer = panic::catch_unwind(AssertUnwindSafe(|| {
            service.acquire_concurrent(flow, permits, now_ms)
        }))
        .unwrap_or_else(|_| {
            service_panicked("acquire_concurrent");
            ConcurrencyAnswer::Unavailable(None)
        });
        let held = |token| HeldToken {
            service: service.clone(),
            token,
        };
        match answer {
            ConcurrencyAnswer::Granted(token) => Concurrency::Granted(held(token)),
            ConcurrencyAnswer::Refused => Concurrency::Refused,
            ConcurrencyAnswer::Unavailable(token) => Concurrency::Unavailable(token.map(held)),
        }
    }

    /// The service that answers for `flow`: its binding of this
    /// generation, or the instance's.
    fn service(&self, flow: &ClusterFlow) -> Option<Arc<dyn ClusterTokens>> {
        let generation = self.generation.load(Ordering::Acquire);
        if let Some((bound_in, Some(bound))) = flow.binding.get()
            && *bound_in == generation
        {
            return Some(bound.clone());
        }
        let tokens = self.tokens.load();
        let tokens = (*tokens).as_ref()?;
        if flow.binding.get().is_none() {
            let bound =
                panic::catch_unwind(AssertUnwindSafe(|| tokens.bind(flow))).unwrap_or_else(|_| {
                    service_panicked("bind");
                    None
                });
            let _ = flow.binding.set((generation, bound.clone()));
            if let Some(bound) = bound {
                return Some(bound);
            }
        }
        Some(Arc::clone(tokens))
    }

    /// Permits for the values of a hot-parameter rule in cluster mode,
    /// from the instance's service; `Unavailable` when there is none (or
    /// it panics).
    #[cold]
    pub(crate) fn acquire_param(
        &self,
        flow: &ClusterParamFlow,
        values: &[ParamToken<'_>],
        permits: u32,
        now_ms: u64,
    ) -> TokenAnswer {
        let tokens = self.tokens.load();
        let Some(tokens) = &*tokens else {
            return TokenAnswer::Unavailable;
        };
        panic::catch_unwind(AssertUnwindSafe(|| {
            tokens.acquire_param(flow, values, permits, now_ms)
        }))
        .unwrap_or_else(|_| {
            service_panicked("acquire_param");
            TokenAnswer::Unavailable
        })
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

/// What the hook answered for a cluster concurrency token.
pub(crate) enum Concurrency {
    /// Held until the exit.
    Granted(HeldToken),
    /// Blocked.
    Refused,
    /// No answer: the rule's fallback decides; a token the service counted
    /// against its own fallback allowance, held until the exit.
    Unavailable(Option<HeldToken>),
}

/// A cluster concurrency token an entry holds, with the service that
/// granted it: [`release`](Self::release) gives it back.
pub(crate) struct HeldToken {
    service: Arc<dyn ClusterTokens>,
    token: u64,
}

impl fmt::Debug for HeldToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldToken")
            .field("token", &self.token)
            .finish()
    }
}

impl HeldToken {
    /// Gives the token back to its service (a panic in the service is
    /// logged once and taken as given back: the cluster reclaims the token
    /// after the rule's `resource_timeout`).
    pub(crate) fn release(self, flow: &ClusterFlow) {
        let HeldToken { service, token } = self;
        if panic::catch_unwind(AssertUnwindSafe(|| service.release_concurrent(flow, token)))
            .is_err()
        {
            service_panicked("release_concurrent");
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
