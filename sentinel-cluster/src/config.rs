//! `ClusterConfig`: where Redis is and how the client spends its time.

use std::fmt;
use std::time::Duration;

use std::sync::Arc;

use redis::{ConnectionAddr, IntoConnectionInfo};
use sentinel_flow_core::flow::ClusterEndpoint;
use sentinel_flow_core::{Clock, SystemClock};

/// The most permits one lease holds (the lease word keeps 20 bits).
pub const MAX_LEASE_LIMIT: u32 = (1 << 20) - 1;

/// The highest [`ClusterConfig::param_values_cap`].
pub const MAX_PARAM_VALUES_CAP: u32 = 1_000_000;

/// The Redis memory one tracked value of a hot-parameter flow id takes at
/// most, with a window of up to 10 buckets: its field in the counts hash
/// and in the recent sorted set (each at most 64 bytes), its counts, and
/// Redis' own overhead for the two entries. Each bucket past 10 adds up
/// to 20 bytes. A flow id's keys hold at most
/// [`ClusterConfig::param_values_cap`] values: at most `cap x` this (about
/// 2.4 MiB per flow id at the default cap), whatever the number of
/// distinct values the instances see.
pub const PARAM_VALUE_REDIS_BYTES: u64 = 600;

/// Settings of a [`RedisCluster`](crate::RedisCluster) client.
///
/// ```
/// use std::time::Duration;
/// use sentinel_flow_cluster::ClusterConfig;
///
/// let config = ClusterConfig::new("redis://127.0.0.1:6379/")
///     .budget(Duration::from_millis(2))
///     .key_prefix("payments");
/// assert_eq!(config.get_budget(), Duration::from_millis(2));
/// ```
#[derive(Clone)]
pub struct ClusterConfig {
    url: String,
    budget: Duration,
    key_prefix: String,
    instance_id: Option<String>,
    lease_divisor: u32,
    max_lease: u32,
    response_timeout: Duration,
    connect_timeout: Duration,
    backoff_min: Duration,
    backoff_max: Duration,
    instance_ttl: Duration,
    param_values_cap: u32,
    clock: Arc<dyn Clock>,
}

impl fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may carry a password: only its host part is shown.
        let host = self.url.rsplit('@').next().unwrap_or("");
        f.debug_struct("ClusterConfig")
            .field("host", &host)
            .field("budget", &self.budget)
            .field("key_prefix", &self.key_prefix)
            .field("instance_id", &self.instance_id)
            .field("lease_divisor", &self.lease_divisor)
            .field("max_lease", &self.max_lease)
            .field("response_timeout", &self.response_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("backoff", &(self.backoff_min, self.backoff_max))
            .field("instance_ttl", &self.instance_ttl)
            .field("param_values_cap", &self.param_values_cap)
            .finish()
    }
}

impl ClusterConfig {
    /// Redis at `url` (`redis://[:password@]host:port/[db]`), every other
    /// setting at its default.
    pub fn new(url: impl Into<String>) -> Self {
        ClusterConfig {
            url: url.into(),
            budget: Duration::from_millis(2),
            key_prefix: "sentinel".to_owned(),
            instance_id: None,
            lease_divisor: 4,
            max_lease: 1_000,
            response_timeout: Duration::from_millis(250),
            connect_timeout: Duration::from_millis(500),
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            instance_ttl: Duration::from_secs(3),
            param_values_cap: 4_096,
            clock: Arc::new(SystemClock),
        }
    }

    /// The longest an entry waits for Redis when its lease is empty
    /// (default 2 ms); past it the rule's fallback decides.
    pub fn budget(mut self, budget: Duration) -> Self {
        self.budget = budget;
        self
    }

    /// The first part of every key (default `sentinel`): keys are
    /// `{<prefix>:flow:<id>}:window` and `{<prefix>:flow:<id>}:instances`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// This instance's name among the live instances (default: host name,
    /// process id and a random part).
    pub fn instance_id(mut self, id: impl Into<String>) -> Self {
        self.instance_id = Some(id.into());
        self
    }

    /// A lease takes `1 / (divisor x live instances)` of what remains of the
    /// window (default 4), at least what the entry needs.
    pub fn lease_divisor(mut self, divisor: u32) -> Self {
        self.lease_divisor = divisor;
        self
    }

    /// The most permits one lease takes (default 1 000, at most
    /// [`MAX_LEASE_LIMIT`]).
    pub fn max_lease(mut self, max: u32) -> Self {
        self.max_lease = max;
        self
    }

    /// How long a Redis call may take before Redis is taken for down
    /// (default 250 ms). Entries never wait this long: see [`budget`](Self::budget).
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// How long one connection attempt may take (default 500 ms).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Reconnection waits from `min`, doubling, up to `max` (default
    /// 100 ms to 5 s).
    pub fn backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff_min = min;
        self.backoff_max = max;
        self
    }

    /// How long an instance counts as live after its last heartbeat
    /// (default 3 s; it beats every third of that).
    pub fn instance_ttl(mut self, ttl: Duration) -> Self {
        self.instance_ttl = ttl;
        self
    }

    /// The most distinct values a hot-parameter flow id tracks in Redis
    /// within its window (default 4 096, in 1..=[`MAX_PARAM_VALUES_CAP`]),
    /// which bounds the flow id's keys to about
    /// [`PARAM_VALUE_REDIS_BYTES`] per value. A value is forgotten once
    /// its window holds no count of it. An entry with a new value while
    /// the window tracks this many is decided by the fallback, as when
    /// Redis does not answer (the instance's share of the value's
    /// threshold, then the rule's local check; or a pass without
    /// `fallback_to_local_when_fail`), and counted in the snapshot's
    /// `overflows`.
    pub fn param_values_cap(mut self, cap: u32) -> Self {
        self.param_values_cap = cap;
        self
    }

    /// The clock the client reads its own time from (default
    /// [`SystemClock`]): how long the fallback remembers the most live
    /// instances of a flow id. Give it the clock the instances it serves
    /// were built with (`Sentinel::builder().clock(..)`), so that a test on
    /// a [`ManualClock`](sentinel_flow_core::ManualClock) moves both. The
    /// time of the cluster's windows is always Redis' own.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The entry budget.
    pub fn get_budget(&self) -> Duration {
        self.budget
    }

    /// The Redis server's host and port (no password), the entry budget
    /// and the connect timeout; `None` for a URL that names no TCP
    /// endpoint (a Unix socket, or one Redis cannot read).
    pub(crate) fn endpoint(&self) -> Option<ClusterEndpoint> {
        let info = self.url.as_str().into_connection_info().ok()?;
        let (host, port) = match info.addr {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                (host, port)
            }
            ConnectionAddr::Unix(_) => return None,
        };
        Some(
            ClusterEndpoint::new(host, port, self.budget)
                .with_connect_timeout(self.connect_timeout),
        )
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    pub(crate) fn prefix(&self) -> &str {
        &self.key_prefix
    }

    pub(crate) fn get_instance_id(&self) -> Option<&str> {
        self.instance_id.as_deref()
    }

    pub(crate) fn divisor(&self) -> u32 {
        self.lease_divisor
    }

    pub(crate) fn lease_cap(&self) -> u32 {
        self.max_lease
    }

    pub(crate) fn timeouts(&self) -> (Duration, Duration) {
        (self.response_timeout, self.connect_timeout)
    }

    pub(crate) fn backoff_range(&self) -> (Duration, Duration) {
        (self.backoff_min, self.backoff_max)
    }

    pub(crate) fn ttl(&self) -> Duration {
        self.instance_ttl
    }

    pub(crate) fn param_cap(&self) -> u32 {
        self.param_values_cap
    }

    /// The client's time now (its clock's ms).
    pub(crate) fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Every problem of the settings, each naming its setting.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut check = |ok: bool, message: String| {
            if !ok {
                problems.push(message);
            }
        };
        check(
            self.url.starts_with("redis://") || self.url.starts_with("rediss://"),
            format!(
                "url must start with redis:// or rediss://, got {:?}",
                self.url.split('@').next_back().unwrap_or("")
            ),
        );
        check(!self.budget.is_zero(), "budget must be > 0".into());
        check(
            !self.key_prefix.is_empty() && !self.key_prefix.contains(['{', '}']),
            format!(
                "key_prefix must be non-empty and without braces, got {:?}",
                self.key_prefix
            ),
        );
        check(self.lease_divisor > 0, "lease_divisor must be > 0".into());
        check(
            (1..=MAX_LEASE_LIMIT).contains(&self.max_lease),
            format!(
                "max_lease must be in 1..={MAX_LEASE_LIMIT}, got {}",
                self.max_lease
            ),
        );
        check(
            !self.response_timeout.is_zero(),
            "response_timeout must be > 0".into(),
        );
        check(
            !self.connect_timeout.is_zero(),
            "connect_timeout must be > 0".into(),
        );
        check(
            !self.backoff_min.is_zero() && self.backoff_min <= self.backoff_max,
            format!(
                "backoff must have 0 < min <= max, got {:?}..{:?}",
                self.backoff_min, self.backoff_max
            ),
        );
        check(
            self.instance_ttl >= Duration::from_millis(30),
            format!("instance_ttl must be >= 30 ms, got {:?}", self.instance_ttl),
        );
        check(
            (1..=MAX_PARAM_VALUES_CAP).contains(&self.param_values_cap),
            format!(
                "param_values_cap must be in 1..={MAX_PARAM_VALUES_CAP}, got {}",
                self.param_values_cap
            ),
        );
        if let Some(id) = &self.instance_id {
            check(!id.is_empty(), "instance_id must not be empty".into());
        }
        problems
    }
}

/// Settings a client cannot start with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError(pub(crate) Vec<String>);

impl ConfigError {
    /// Each problem, naming its setting.
    pub fn problems(&self) -> &[String] {
        &self.0
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid cluster settings: {}", self.0.join("; "))
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::ClusterConfig;

    #[test]
    fn endpoint_names_the_redis_host_and_port_without_the_password() {
        let config = ClusterConfig::new("redis://:secret@10.0.0.7:6380/2")
            .budget(Duration::from_millis(3))
            .connect_timeout(Duration::from_millis(700));
        let endpoint = config.endpoint().unwrap();
        assert_eq!(endpoint.host(), "10.0.0.7");
        assert_eq!(endpoint.port(), 6380);
        assert_eq!(endpoint.request_timeout(), Duration::from_millis(3));
        assert_eq!(endpoint.connect_timeout(), Some(Duration::from_millis(700)));
        assert!(!format!("{endpoint:?}").contains("secret"));

        let default_port = ClusterConfig::new("redis://redis.internal/").endpoint();
        assert_eq!(default_port.map(|e| e.port()), Some(6379));
    }

    #[test]
    fn endpoint_is_none_for_a_unix_socket_or_a_bad_url() {
        assert_eq!(
            ClusterConfig::new("redis+unix:///tmp/redis.sock").endpoint(),
            None
        );
        assert_eq!(ClusterConfig::new("not a url").endpoint(), None);
    }
}
