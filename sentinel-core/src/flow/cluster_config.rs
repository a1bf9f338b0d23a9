//! A flow rule's cluster settings: plain data the rule holds and its
//! validation reads; the cluster hook (`cluster.rs`) builds on them.

/// How a cluster rule's count becomes the cluster-wide threshold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ClusterThresholdType {
    /// The count is the threshold of all instances together.
    #[default]
    Global,
    /// The count is per instance: the threshold is the count times the
    /// number of live instances.
    AvgLocal,
}

/// A flow rule's cluster settings (Sentinel's `ClusterFlowConfig`), read
/// when `cluster_mode` is on.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterFlowConfig {
    /// The limit's id across the cluster: every rule (on any instance) with
    /// this id shares one window. Required in cluster mode.
    pub flow_id: Option<u64>,
    /// Global (default) or per instance.
    pub threshold_type: ClusterThresholdType,
    /// When the cluster cannot answer: `true` (default) applies the rule's
    /// count locally (a cluster service may hold the instance to a share
    /// of it: `sentinel-flow-cluster` admits this instance's share of a
    /// global count, counted with what the cluster granted it), `false`
    /// lets the entry pass.
    pub fallback_to_local_when_fail: bool,
    /// Buckets of the cluster window (default 10, in
    /// 1..=[`MAX_STAT_SAMPLE_COUNT`](super::MAX_STAT_SAMPLE_COUNT), dividing
    /// `window_interval_ms`).
    pub sample_count: u32,
    /// The cluster window, ms (default 1000, in
    /// 1..=[`MAX_STAT_INTERVAL_MS`](super::MAX_STAT_INTERVAL_MS)); the count
    /// is per this window.
    pub window_interval_ms: u64,
    /// Sentinel's cluster strategy code (`strategy`, default 0, the normal
    /// strategy); kept as given.
    pub strategy: u32,
    /// Cluster concurrency: how long a token may be held before the server
    /// takes it back, ms (Sentinel's `resourceTimeout`, default 2000).
    /// Kept as given; cluster concurrency is not counted across instances
    /// yet (see [`FlowRule::cluster_mode`](super::FlowRule::cluster_mode)).
    pub resource_timeout: u64,
    /// Cluster concurrency: what happens to a token held past
    /// `resource_timeout` (Sentinel's `resourceTimeoutStrategy` code,
    /// default 0); kept as given.
    pub resource_timeout_strategy: u32,
    /// Cluster concurrency: what a refused acquire does (Sentinel's
    /// `acquireRefuseStrategy` code, default 0); kept as given.
    pub acquire_refuse_strategy: u32,
    /// Cluster concurrency: after how long without a heartbeat a client's
    /// tokens are released, ms (Sentinel's `clientOfflineTime`, default
    /// 2000); kept as given.
    pub client_offline_time: u64,
}

impl Default for ClusterFlowConfig {
    fn default() -> Self {
        ClusterFlowConfig {
            flow_id: None,
            threshold_type: ClusterThresholdType::Global,
            fallback_to_local_when_fail: true,
            sample_count: 10,
            window_interval_ms: 1_000,
            strategy: 0,
            resource_timeout: 2_000,
            resource_timeout_strategy: 0,
            acquire_refuse_strategy: 0,
            client_offline_time: 2_000,
        }
    }
}
