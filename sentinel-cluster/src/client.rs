//! `RedisCluster`: the client handle. It starts the worker and gives
//! instances the token service; dropping it stops the worker, after which
//! every cluster rule of the instances it served falls back.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::Ordering::Release;
use std::thread::JoinHandle;

use sentinel_flow_core::Sentinel;
use sentinel_flow_core::flow::{ClusterFlow, ClusterTokens, FlowRule};

use crate::config::{ClusterConfig, ConfigError};
use crate::flow::Params;
use crate::shared::Shared;
use crate::snapshot::ClusterSnapshot;
use crate::tokens::Tokens;
use crate::worker;

/// A client of the Redis that holds the cluster windows.
#[derive(Debug)]
pub struct RedisCluster {
    shared: Arc<Shared>,
    worker: Option<JoinHandle<()>>,
}

impl RedisCluster {
    /// Checks `config` and starts the background worker; returns at once,
    /// without waiting for Redis: until the first connection (and whenever
    /// Redis is unreachable) cluster rules are decided by their fallback.
    pub fn start(config: ClusterConfig) -> Result<Self, ConfigError> {
        let problems = config.problems();
        if !problems.is_empty() {
            return Err(ConfigError(problems));
        }
        let client = redis::Client::open(config.url())
            .map_err(|error| ConfigError(vec![format!("url is not a redis url: {error}")]))?;
        let instance = config
            .get_instance_id()
            .map_or_else(default_instance_id, str::to_owned);
        let shared = Arc::new(Shared::new(config, instance));
        let for_worker = shared.clone();
        let worker = std::thread::Builder::new()
            .name("sentinel-flow-cluster".into())
            .spawn(move || worker::run(for_worker, client))
            .map_err(|error| {
                ConfigError(vec![format!("cannot start the worker thread: {error}")])
            })?;
        tracing::info!(instance = %shared.instance, "sentinel-flow-cluster: started, connecting in the background");
        Ok(RedisCluster {
            shared,
            worker: Some(worker),
        })
    }

    /// The token service, for [`Sentinel::set_cluster_tokens`].
    pub fn tokens(&self) -> Arc<dyn ClusterTokens> {
        Arc::new(Tokens(self.shared.clone()))
    }

    /// Gives `sentinel` this client's token service, and makes the leases
    /// of its cluster rules now and on each reload, so the instance
    /// registers under their flow ids before their first entry.
    pub fn attach(&self, sentinel: &Sentinel) {
        sentinel.set_cluster_tokens(Some(self.tokens()));
        let weak = Arc::downgrade(&self.shared);
        let register = move |rules: &[FlowRule]| {
            if let Some(shared) = weak.upgrade() {
                for rule in rules.iter().filter_map(cluster_flow) {
                    // A reloaded count reaches the next refill at once.
                    let now_ms = shared.config.now_ms();
                    shared.flow(&rule).set_params(Params::of(&rule), now_ms);
                }
                shared.wake.notify_one();
            }
        };
        register(&sentinel.flow_rules().rules());
        sentinel.flow_rules().on_change(register);
    }

    /// The client's state now.
    pub fn snapshot(&self) -> ClusterSnapshot {
        ClusterSnapshot::of(&self.shared)
    }

    /// Whether cluster rules are decided by their fallback now.
    pub fn is_fallback(&self) -> bool {
        !self.shared.is_up()
    }

    /// This instance's id among the live instances.
    pub fn instance_id(&self) -> &str {
        &self.shared.instance
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Release);
        self.shared.wake.notify_one();
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
        self.shared.set_up(false, "the cluster client was dropped");
    }
}

/// A rule's cluster flow, when it is a valid cluster rule.
fn cluster_flow(rule: &FlowRule) -> Option<ClusterFlow> {
    ClusterFlow::of_rule(rule)
}

/// Host name, process id and a random part: unique among instances.
fn default_instance_id() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".to_owned());
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    format!(
        "{host}-{}-{:08x}",
        std::process::id(),
        hasher.finish() as u32
    )
}
