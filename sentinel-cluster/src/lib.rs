//! Cluster-wide flow limits for `sentinel-flow-core`, kept in Redis.
//!
//! A flow rule with `cluster_mode` on shares one window across every
//! instance that has a rule with its `cluster_config.flow_id`. Each
//! instance holds a lease of permits per flow id, fetched ahead by a
//! background worker with one Lua script call (atomic on the server, time
//! from Redis' `TIME`), and spends it with one compare-and-swap: the hot
//! path takes no lock and waits for nothing. Only an entry that finds the
//! lease empty waits for Redis, never longer than the budget (default
//! 2 ms); past it, or while Redis is unreachable, the rule's
//! `fallback_to_local_when_fail` decides: by default the entry is
//! admitted within this instance's share of the count, counted together
//! with what the cluster granted the instance in the window, and charged
//! to the cluster's window by the next call to Redis; or it passes.
//!
//! An attached client is the instance's cluster service: the instance
//! reports it available ([`Sentinel::cluster_status`](sentinel_flow_core::Sentinel::cluster_status),
//! and client mode to the dashboard's `getClusterMode`) while Redis
//! answers, and unavailable while in fallback.
//!
//! ```no_run
//! use sentinel_flow_cluster::{ClusterConfig, RedisCluster};
//! use sentinel_flow_core::Sentinel;
//! use sentinel_flow_core::flow::{ClusterFlowConfig, FlowRule};
//!
//! let sentinel = Sentinel::builder().build();
//! // Returns at once; connects in the background (fallback until then).
//! let cluster = RedisCluster::start(ClusterConfig::new("redis://127.0.0.1:6379/"))?;
//! cluster.attach(&sentinel);
//! sentinel.flow_rules().load(vec![FlowRule {
//!     cluster_mode: true,
//!     cluster_config: ClusterFlowConfig {
//!         flow_id: Some(1),
//!         ..ClusterFlowConfig::default()
//!     },
//!     ..FlowRule::new("POST:/pay", 500.0)
//! }])?;
//! if let Ok(_entry) = sentinel.entry("POST:/pay") {
//!     // 500 per second across every instance with flow id 1.
//! }
//! println!("{}", cluster.snapshot().to_prometheus());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod call;
mod client;
mod concurrency;
mod config;
mod flow;
mod handshake;
mod lease;
mod ledger;
mod param;
mod script;
mod shared;
mod snapshot;
mod tokens;
mod worker;

pub use client::RedisCluster;
pub use config::{
    ClusterConfig, ConfigError, MAX_LEASE_LIMIT, MAX_PARAM_VALUES_CAP, PARAM_VALUE_REDIS_BYTES,
};
pub use snapshot::{ClusterSnapshot, FlowSnapshot, ParamFlowSnapshot};
