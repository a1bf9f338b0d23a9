//! Flow control, circuit breaking and overload protection per named
//! resource, in the model of Alibaba Sentinel: one dependency, with the
//! parts beyond the core behind features.
//!
//! ```toml
//! [dependencies]
//! sentinel-flow = { version = "0.1", features = ["axum", "rules"] }
//! ```
//!
//! Everything of [`sentinel-flow-core`](https://docs.rs/sentinel-flow-core)
//! is here at the root: [`entry`], [`Sentinel`], the rule kinds ([`flow`],
//! [`degrade`], [`system`], [`authority`], [`param_flow`]), the statistics. The
//! other crates are modules, each behind the feature of the same name:
//!
//! | feature | what it adds |
//! | --- | --- |
//! | `macros` (default) | [`sentinel_resource`]: a function as a resource |
//! | `rules` | [`rules`]: YAML rule files, hot reload, the rule store |
//! | `rules-redis` | `rules` plus rules kept in Redis (`rules::source::RedisSource`) |
//! | `rules-etcd` | `rules` plus rules kept in etcd v3 (`rules::source::EtcdSource`) |
//! | `rules-zookeeper` | `rules` plus rules kept in ZooKeeper (`rules::source::ZooKeeperSource`) |
//! | `tower` | [`tower`]: middleware for tower, hyper and tonic services |
//! | `axum` | `tower` plus resource names from axum's `MatchedPath` |
//! | `transport` | [`transport`]: Sentinel's command API, the dashboard heartbeat, the live page |
//! | `cluster` | [`cluster`]: cluster-wide flow limits on Redis |
//! | `tokio` | [`EntryBuilder::enter_async`]: rate-limiter queues wait on a tokio timer |
//! | `prometheus` | [`prometheus`]: Prometheus text exposition |
//! | `full` | all of the above |
//!
//! ```
//! use sentinel_flow::flow::FlowRule;
//! use sentinel_flow::{BlockKind, ManualClock, Sentinel};
//!
//! let clock = ManualClock::new(1_700_000_000_000);
//! let sentinel = Sentinel::builder().clock(clock).build();
//! sentinel.flow_rules().load(vec![FlowRule::new("orders", 2.0)])?;
//!
//! let first = sentinel.entry("orders").expect("within the limit");
//! let second = sentinel.entry("orders").expect("within the limit");
//! let third = sentinel.entry("orders").unwrap_err();
//! assert_eq!(third.kind(), BlockKind::Flow);
//! drop((first, second));
//! # Ok::<(), sentinel_flow::RuleErrors>(())
//! ```
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use sentinel_flow_core::*;

/// Marks a function as a resource: each call enters it, and a refused call
/// returns the block instead of running the body.
#[cfg(feature = "macros")]
pub use sentinel_flow_macros::sentinel_resource;

/// YAML rule files: the schema, validation, hot reload and the rule store
/// (the crate `sentinel-flow-rules`).
#[cfg(feature = "rules")]
pub use sentinel_flow_rules as rules;

/// Middleware for tower, hyper, axum and tonic services (the crate
/// `sentinel-flow-tower`).
#[cfg(feature = "tower")]
pub use sentinel_flow_tower as tower;

/// Sentinel's command API, the dashboard heartbeat and the live page (the
/// crate `sentinel-flow-transport`).
#[cfg(feature = "transport")]
pub use sentinel_flow_transport as transport;

/// Cluster-wide flow limits on Redis (the crate `sentinel-flow-cluster`).
#[cfg(feature = "cluster")]
pub use sentinel_flow_cluster as cluster;

/// The Rust blocks of the README, the guide under `docs/` and the crate
/// READMEs, each file compiled and run as this crate's doctests, so that no
/// snippet a user copies can rot. They use every feature, so they run with
/// `--all-features` (or `--features full`).
#[cfg(all(doctest, feature = "full"))]
mod readme_doctests {
    #[doc = include_str!("../../README.md")]
    struct Readme;
    #[doc = include_str!("../../docs/README.md")]
    struct Guide;
    #[doc = include_str!("../../docs/rules.md")]
    struct GuideRules;
    #[doc = include_str!("../../docs/embedding.md")]
    struct GuideEmbedding;
    #[doc = include_str!("../../docs/gateway.md")]
    struct GuideGateway;
    #[doc = include_str!("../../docs/dashboard.md")]
    struct GuideDashboard;
    #[doc = include_str!("../../docs/cluster.md")]
    struct GuideCluster;
    #[doc = include_str!("../../docs/adaptive.md")]
    struct GuideAdaptive;
    #[doc = include_str!("../../docs/observability.md")]
    struct GuideObservability;
    #[doc = include_str!("../../docs/testing.md")]
    struct GuideTesting;
    #[doc = include_str!("../../docs/limits.md")]
    struct GuideLimits;
    #[doc = include_str!("../../docs/exactness.md")]
    struct GuideExactness;
    #[doc = include_str!("../README.md")]
    struct UmbrellaReadme;
    #[doc = include_str!("../../sentinel-core/README.md")]
    struct CoreReadme;
    #[doc = include_str!("../../sentinel-macros/README.md")]
    struct MacrosReadme;
    #[doc = include_str!("../../sentinel-rules/README.md")]
    struct RulesReadme;
    #[doc = include_str!("../../sentinel-tower/README.md")]
    struct TowerReadme;
    #[doc = include_str!("../../sentinel-transport/README.md")]
    struct TransportReadme;
    #[doc = include_str!("../../sentinel-cluster/README.md")]
    struct ClusterReadme;
}
