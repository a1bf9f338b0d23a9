//! `CommandCenter`: the settings of the command server, and `start`.

use std::net::{IpAddr, Ipv4Addr};
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use sentinel_flow_core::describe::DescribeRule;
use sentinel_flow_core::log::{MetricLogConfig, MetricSearcher};

use crate::commands::{self, Ctx};
use crate::handle::{CommandCenterHandle, StartError};
use crate::info::{Machine, hostname};
use crate::net::{bind, callback_ip, default_app};
use crate::security::{self, Guard, Writers};
use crate::server::{self, Limits, descriptor_budget};
use crate::shared::SentinelRef;
use crate::sources::{Scrape, SourceReader};
use crate::store::RuleSink;
use sentinel_flow_core::{Sentinel, UserKind, UserKindRules};
use sentinel_flow_rules::UserKinds;

/// Sentinel's default command port.
pub const DEFAULT_PORT: u16 = 8719;
/// The default heartbeat interval, Sentinel's.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(10);
/// The default cap on a request body (a `setRules` form).
pub const DEFAULT_MAX_BODY_BYTES: usize = 1024 * 1024;
/// The default cap on open connections.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// The default time a connection has to send a request's head.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The default time a request has to send its body.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The command server of one instance: Sentinel's command API (what the
/// dashboard calls), the live page, and the heartbeat to the dashboards.
/// Configure with the methods, then [`start`](Self::start).
///
/// Secure by default: bound to 127.0.0.1, every state-changing command
/// (`setRules`, `setParamFlowRules`, `setSwitch`) refused until
/// [`allow_writes`](Self::allow_writes) and then served only as a POST
/// form, bodies capped at [`DEFAULT_MAX_BODY_BYTES`], connections at
/// [`DEFAULT_MAX_CONNECTIONS`], each request's head and body read within a
/// deadline. See the crate's README for what each guarantees.
pub struct CommandCenter {
    sentinel: SentinelRef,
    port: u16,
    bind: IpAddr,
    app: Option<String>,
    app_type: Option<i32>,
    dashboards: Vec<String>,
    heartbeat_interval: Duration,
    heartbeat_ip: Option<IpAddr>,
    guard: Guard,
    write_peers: Vec<IpAddr>,
    host_names: Vec<String>,
    max_body_bytes: usize,
    max_connections: usize,
    header_read_timeout: Duration,
    body_read_timeout: Duration,
    metric: Option<MetricSearcher>,
    rules: RuleSink,
    user_kinds: UserKinds,
    sources: Vec<SourceReader>,
    live_page: bool,
}

impl std::fmt::Debug for CommandCenter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandCenter")
            .field("port", &self.port)
            .field("bind", &self.bind)
            .field("app", &self.app)
            .field("dashboards", &self.dashboards)
            .field("allow_writes", &self.guard.allow_writes)
            .field("allow_get_writes", &self.guard.get_writes)
            .field("write_peers", &self.write_peers)
            .field("host_names", &self.host_names)
            .field("token", &self.guard.token.as_ref().map(|_| "<set>"))
            .field("protect_reads", &self.guard.protect_reads)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_connections", &self.max_connections)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("body_read_timeout", &self.body_read_timeout)
            .field("rules", &self.rules)
            .field("user_kinds", &self.user_kinds)
            .field("sources", &self.sources.len())
            .finish_non_exhaustive()
    }
}

impl CommandCenter {
    /// A server for `sentinel` (`sentinel_flow_core::global()` or an
    /// `Arc<Sentinel>`), with the defaults: port 8719, 127.0.0.1, no
    /// dashboard, writes off.
    pub fn new<S>(sentinel: S) -> Self
    where
        S: Deref<Target = Sentinel> + Send + Sync + 'static,
    {
        CommandCenter {
            sentinel: Arc::new(sentinel),
            port: DEFAULT_PORT,
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            app: None,
            app_type: None,
            dashboards: Vec::new(),
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            heartbeat_ip: None,
            guard: Guard::default(),
            write_peers: Vec::new(),
            host_names: Vec::new(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            metric: None,
            rules: RuleSink::Memory,
            user_kinds: UserKinds::new(),
            sources: Vec::new(),
            live_page: true,
        }
    }

    /// The port to try first (default 8719); when it is taken, the next
    /// free one above it is used, as Sentinel does. 0 lets the system pick.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// The address to listen on (default 127.0.0.1). The dashboard must be
    /// able to reach it: `0.0.0.0` or the machine's address for a dashboard
    /// elsewhere.
    pub fn bind(mut self, address: IpAddr) -> Self {
        self.bind = address;
        self
    }

    /// The application name shown in the dashboard (default: the metric
    /// log's app, else the executable's name).
    pub fn app(mut self, name: impl Into<String>) -> Self {
        self.app = Some(name.into());
        self
    }

    /// Sentinel's application type (0 a common application, 1 an API
    /// gateway, whose gateway rules and API definitions the dashboard
    /// manages). By default each heartbeat tells 1 while the instance has
    /// gateway rules or API definitions in force, else 0.
    pub fn app_type(mut self, app_type: i32) -> Self {
        self.app_type = Some(app_type);
        self
    }

    /// A dashboard to send heartbeats to, as `host:port` or
    /// `http://host:port[/prefix]`; call again for several.
    pub fn dashboard(mut self, address: impl Into<String>) -> Self {
        self.dashboards.push(address.into());
        self
    }

    /// The time between heartbeats (default 10 s).
    pub fn heartbeat_interval(mut self, interval: Duration) -> Self {
        self.heartbeat_interval = interval;
        self
    }

    /// The IP the dashboard should call back (default: the bind address,
    /// or when that is unspecified, the local address of the route to the
    /// first dashboard).
    pub fn heartbeat_ip(mut self, ip: IpAddr) -> Self {
        self.heartbeat_ip = Some(ip);
        self
    }

    /// Turns the state-changing commands on (default off). The dashboard
    /// needs this to push rules or flip the switch. They are served only as
    /// a POST with a form body (what the dashboard sends from 1.6.0 on),
    /// never from a browser page of another site; bound beyond loopback
    /// and without a [`token`](Self::token), only from the dashboards'
    /// addresses and [`allow_writes_from`](Self::allow_writes_from).
    pub fn allow_writes(mut self, allow: bool) -> Self {
        self.guard.allow_writes = allow;
        self
    }

    /// Serves the state-changing commands as a GET too (default off), for
    /// a dashboard older than 1.6.0, which sends them so. A GET can be
    /// made by any web page a browser on an allowed machine shows (an
    /// image's address); keep it off unless such a dashboard is used.
    pub fn allow_get_writes(mut self, allow: bool) -> Self {
        self.guard.get_writes = allow;
        self
    }

    /// Accepts state-changing commands from `peer` when bound beyond
    /// loopback without a token, besides the dashboards' addresses (a
    /// dashboard behind a proxy or NAT, an operator's machine); call again
    /// for several.
    pub fn allow_writes_from(mut self, peer: IpAddr) -> Self {
        self.write_peers.push(peer);
        self
    }

    /// A host name this server answers to, besides `localhost`, the
    /// machine's name and its addresses (the `Host` of every request is
    /// checked, against DNS rebinding); call again for several. Needed
    /// when clients reach the server by a DNS name or through a proxy that
    /// keeps the `Host`.
    pub fn host_name(mut self, name: impl Into<String>) -> Self {
        self.host_names.push(name.into());
        self
    }

    /// Requires `token` on state-changing commands (and on every request
    /// with [`protect_reads`](Self::protect_reads)), as
    /// `Authorization: Bearer <token>` or a `token` query parameter. The
    /// Sentinel dashboard sends no token: a server it writes to must have
    /// none.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.guard.token = Some(token.into());
        self
    }

    /// Requires the token on every request, reads and the live page
    /// included (default off; needs [`token`](Self::token)).
    pub fn protect_reads(mut self, protect: bool) -> Self {
        self.guard.protect_reads = protect;
        self
    }

    /// The largest request body accepted (default 1 MiB); a larger one is
    /// refused with 413 and changes nothing, at once (before reading it)
    /// when its `Content-Length` says so.
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// The most connections open at once (default 256, and at most half
    /// the process's file-descriptor limit). A new connection past it
    /// closes the one that has waited longest without a request being
    /// answered (a slow or silent client); when every connection is being
    /// answered, the new one is closed.
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections;
        self
    }

    /// The time a connection has to send a complete request head, from
    /// when it opens or its previous answer is done (default 10 s): this
    /// is also how long a kept-alive connection may stay idle. Past it,
    /// the connection is closed.
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// The time a request has to send its body once its head is read
    /// (default 10 s); past it, 408 and the connection is closed.
    pub fn body_read_timeout(mut self, timeout: Duration) -> Self {
        self.body_read_timeout = timeout;
        self
    }

    /// Answers `metric` from the metric log that `config` describes (the
    /// instance's [`metric_writer`](Sentinel::metric_writer) writes it).
    /// Without it, `metric` has only the CPU and load lines and the
    /// dashboard's charts stay empty.
    pub fn metric_log(mut self, config: &MetricLogConfig) -> Self {
        self.metric = Some(MetricSearcher::new(config.directory(), config.app()));
        if self.app.is_none() {
            self.app = Some(config.app().to_owned());
        }
        self
    }

    /// Writes rule changes (`setRules`, `setParamFlowRules`) to the rule
    /// file of `store` before they take effect, so that the file, its
    /// watcher and a restart agree. Without it, changes live in memory
    /// only, as in Sentinel. A change that conflicts with an edit of the
    /// file on disk is refused with 409.
    pub fn rule_file(mut self, store: sentinel_flow_rules::RuleFileStore) -> Self {
        self.rules = RuleSink::File(store);
        self
    }

    /// Writes rule changes (`setRules`, `setParamFlowRules`) to the
    /// configuration store of a rule source (a Redis key, say; see
    /// [`sentinel_flow_rules::source`]) before they take effect here; the
    /// other instances following the store take them from it. A write
    /// over a value this instance has not read yet (another writer came
    /// first) is refused with 409, a store that cannot be reached with 503.
    pub fn rule_source(mut self, store: sentinel_flow_rules::source::SourceStore) -> Self {
        self.rules = RuleSink::Source(store);
        self
    }

    /// Serves the rules of `rules`' kind, a kind the application adds,
    /// by `getRules?type=<KIND>` and `setRules?type=<KIND>&data=<JSON>`
    /// (its rule's [`DescribeRule::KIND`]), read and written as Sentinel's
    /// JSON by its description, with the problems and limits of a
    /// built-in kind. A change goes where the built-in kinds' go: to the
    /// rules themselves, or first to the [`rule_file`](Self::rule_file)
    /// or [`rule_source`](Self::rule_source), whose
    /// [`LoadOptions`](sentinel_flow_rules::LoadOptions) must register the
    /// kind too ([`LoadOptions::kind`](sentinel_flow_rules::LoadOptions::kind)).
    ///
    /// ```no_run
    /// # use sentinel_flow_core::{Sentinel, UserKind, UserKindRules};
    /// # use sentinel_flow_core::describe::DescribeRule;
    /// # fn serve<K: UserKind>(rules: UserKindRules<K>) -> Result<(), Box<dyn std::error::Error>>
    /// # where K::Rule: DescribeRule {
    /// let sentinel = std::sync::Arc::new(Sentinel::builder().kind(&rules).build());
    /// let _server = sentinel_flow_transport::CommandCenter::new(sentinel)
    ///     .kind(&rules)
    ///     .allow_writes(true)
    ///     .start_with_own_runtime()?;
    /// # Ok(()) }
    /// ```
    pub fn kind<K>(mut self, rules: &UserKindRules<K>) -> Self
    where
        K: UserKind,
        K::Rule: DescribeRule,
    {
        self.user_kinds = self.user_kinds.kind(rules);
        self
    }

    /// Shows a rule source's state (connected or not, the revision in
    /// force and when it was applied, the last error, counts of applies,
    /// refusals and lost connections) on the live page and in the
    /// Prometheus text at `GET /metrics`; call again for several. `state`
    /// is read at each request: a watcher's
    /// [`state_reader`](sentinel_flow_rules::WatchHandle::state_reader)
    /// (a rule file) or a source's
    /// [`state_reader`](sentinel_flow_rules::source::SourceHandle::state_reader).
    ///
    /// ```no_run
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let sentinel = sentinel_flow_core::global();
    /// let watch = sentinel_flow_rules::RuleWatcher::new("rules.yaml").start(sentinel)?;
    /// let _server = sentinel_flow_transport::CommandCenter::new(sentinel)
    ///     .rule_file(watch.store())
    ///     .source_state(watch.state_reader())
    ///     .start_with_own_runtime()?;
    /// # Ok(()) }
    /// ```
    pub fn source_state(
        mut self,
        state: impl Fn() -> sentinel_flow_rules::source::SourceState + Send + Sync + 'static,
    ) -> Self {
        self.sources.push(Arc::new(state));
        self
    }

    /// Serves the live page at `/` (default on).
    pub fn live_page(mut self, serve: bool) -> Self {
        self.live_page = serve;
        self
    }

    /// Starts the server (and the heartbeat, when a dashboard is set) on
    /// the current tokio runtime; call it inside one. Dropping the handle
    /// stops both.
    pub fn start(self) -> Result<CommandCenterHandle, StartError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| StartError::NoRuntime)?;
        self.start_on(&runtime, None)
    }

    /// Starts the server on a runtime of its own (one worker thread), for
    /// programs without tokio. Dropping the handle stops it; do not drop it
    /// inside an async context.
    pub fn start_with_own_runtime(self) -> Result<CommandCenterHandle, StartError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("sentinel-flow-transport")
            .enable_io()
            .enable_time()
            .build()
            .map_err(StartError::Runtime)?;
        let handle = runtime.handle().clone();
        self.start_on(&handle, Some(runtime))
    }

    fn check(&self) -> Result<(), StartError> {
        if self
            .guard
            .token
            .as_deref()
            .is_some_and(|t| t.trim().is_empty())
        {
            return Err(StartError::Invalid("the token must not be empty".into()));
        }
        if self.guard.protect_reads && self.guard.token.is_none() {
            return Err(StartError::Invalid(
                "protect_reads needs a token (CommandCenter::token)".into(),
            ));
        }
        if self.heartbeat_interval.is_zero() && !self.dashboards.is_empty() {
            return Err(StartError::Invalid(
                "the heartbeat interval must be > 0".into(),
            ));
        }
        if self.max_body_bytes == 0 {
            return Err(StartError::Invalid("max_body_bytes must be > 0".into()));
        }
        if self.max_connections == 0 {
            return Err(StartError::Invalid("max_connections must be > 0".into()));
        }
        if self.header_read_timeout.is_zero() || self.body_read_timeout.is_zero() {
            return Err(StartError::Invalid(
                "header_read_timeout and body_read_timeout must be > 0".into(),
            ));
        }
        Ok(())
    }

    fn start_on(
        mut self,
        runtime: &tokio::runtime::Handle,
        own: Option<tokio::runtime::Runtime>,
    ) -> Result<CommandCenterHandle, StartError> {
        self.check()?;
        if !self.dashboards.is_empty() && self.metric.is_none() {
            tracing::warn!(
                "sentinel command center: no metric log (CommandCenter::metric_log); the dashboard's charts will stay empty"
            );
        }
        let listener = bind(self.bind, self.port)?;
        let addr = listener.local_addr().map_err(StartError::Runtime)?;
        let machine = Machine {
            app: self.app.clone().unwrap_or_else(default_app),
            app_type: self.app_type,
            hostname: hostname(),
            ip: self
                .heartbeat_ip
                .unwrap_or_else(|| callback_ip(self.bind, self.dashboards.first())),
            port: addr.port(),
            pid: std::process::id(),
        };
        let dashboards = std::mem::take(&mut self.dashboards);
        let writers = Arc::new(Writers::new(
            std::mem::take(&mut self.write_peers),
            dashboards.len(),
        ));
        for (index, dashboard) in dashboards.iter().enumerate() {
            // An address given as an IP is known at once; a name is
            // resolved before each heartbeat.
            let authority = crate::heartbeat::authority(dashboard);
            if let Ok(at) = authority.parse::<std::net::SocketAddr>() {
                writers.set_dashboard(index, vec![at.ip()]);
            }
        }
        let limits = self.limits();
        let interval = self.heartbeat_interval;
        let app_type = self.app_type;
        let sentinel = Arc::clone(&self.sentinel);
        let router = self.router(machine.clone(), Arc::clone(&writers));
        let listener = {
            let _entered = runtime.enter();
            listener
                .set_nonblocking(true)
                .map_err(StartError::Runtime)?;
            tokio::net::TcpListener::from_std(listener).map_err(StartError::Runtime)?
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = runtime.spawn(server::serve(listener, router, limits, stopped));
        let heartbeat = (!dashboards.is_empty()).then(|| {
            runtime.spawn(crate::heartbeat::run(
                machine,
                dashboards,
                interval,
                writers,
                {
                    let sentinel = Arc::clone(&sentinel);
                    move || wall_clock_ms(&sentinel)
                },
                move || crate::info::app_type(app_type, &sentinel),
            ))
        });
        tracing::info!(%addr, "sentinel command center listening");
        Ok(CommandCenterHandle::new(addr, stop, server, heartbeat, own))
    }

    /// The server's bounds, the connection cap within the descriptor
    /// budget.
    fn limits(&self) -> Limits {
        let budget = descriptor_budget().unwrap_or(usize::MAX).max(1);
        if budget < self.max_connections {
            tracing::warn!(
                asked = self.max_connections,
                allowed = budget,
                "sentinel command center: connections capped at half the file-descriptor limit"
            );
        }
        Limits {
            max_connections: self.max_connections.min(budget),
            header_read_timeout: self.header_read_timeout,
            body_read_timeout: self.body_read_timeout,
            max_body_bytes: self.max_body_bytes,
        }
    }

    fn router(self, machine: Machine, writers: Arc<Writers>) -> Router {
        let (machine_name, machine_ip) = (machine.hostname.clone(), machine.ip);
        let ctx = Arc::new(Ctx {
            sentinel: Arc::clone(&self.sentinel),
            machine,
            metric: self.metric,
            rules: self.rules,
            user_kinds: self.user_kinds,
        });
        let sources: crate::sources::Sources = self.sources.into();
        let scrape = Scrape {
            #[cfg(feature = "prometheus")]
            sentinel: Arc::clone(&self.sentinel),
            sources: Arc::clone(&sources),
        };
        let metrics = Router::new()
            .route("/metrics", axum::routing::get(crate::sources::metrics))
            .with_state(scrape);
        let mut router = commands::router(ctx).merge(metrics);
        if self.live_page {
            router = router.merge(crate::live::live_router(self.sentinel, sources));
        }
        let mut host_names = self.host_names;
        host_names.push(machine_name.clone());
        let mut host_ips = vec![machine_ip];
        if !self.bind.is_unspecified() {
            host_ips.push(self.bind);
        }
        let guard = Guard {
            loopback: self.bind.is_loopback(),
            host_names,
            host_ips: host_ips.into_iter().map(|ip| ip.to_canonical()).collect(),
            writers,
            ..self.guard
        };
        router
            .layer(axum::middleware::from_fn_with_state(
                Arc::new(guard),
                security::guard,
            ))
            .layer(DefaultBodyLimit::max(self.max_body_bytes))
    }
}

/// The heartbeat's timestamp: the instance's clock, so tests stay on their
/// manual time.
fn wall_clock_ms(sentinel: &SentinelRef) -> u64 {
    sentinel.now_ms()
}
