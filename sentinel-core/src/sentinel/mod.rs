//! `Sentinel`: the facade. One instance owns an [`Engine`] (what entries
//! and exits run on: its components, its user slots, its rules in force;
//! see `crate::engine`) and the control plane: the rule listeners, the
//! names the rules mention and the loads refused for them.
//!
//! The instance's API lives here and nowhere else, as thin methods over
//! the components: this file entering and reading the nodes; beside it
//! `builder.rs` (settings; it assembles the engine), `rules.rs` (rule
//! loads, the managers' accessors), `manager.rs` (`RuleManager`),
//! `book.rs`, `blocks.rs`, `metric.rs`, `cluster.rs`, `snapshot.rs`,
//! `tree.rs`, `percentiles.rs`, `caps.rs`. What an entry goes through is
//! the slot chain ([`crate::slot`], `slot/chain.rs`).

mod blocks;
mod book;
mod builder;
mod caps;
mod cluster;
mod manager;
mod metric;
mod percentiles;
mod rules;
mod snapshot;
mod tree;

pub use crate::node::invocation::DEFAULT_CONTEXT;
pub use crate::node::reserved::DEFAULT_MAX_RULE_NAMES;
pub use builder::DEFAULT_RULE_MEMORY_BUDGET;
pub use builder::{
    DEFAULT_MAX_CONTEXTS, DEFAULT_MAX_NAME_LEN, DEFAULT_MAX_ORIGINS, DEFAULT_MAX_ORIGINS_TOTAL,
    DEFAULT_MAX_RESOURCES, SentinelBuilder,
};
pub use caps::{CapUsage, Caps};
pub use manager::RuleManager;

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use crate::engine::Engine;
use crate::entry::Request;
use crate::node::{ResourceNode, StatisticNode};
use crate::rules::AllListeners;
use crate::slot::chain;
use crate::stat::tally;
use crate::system::SystemStatus;
use crate::{BlockError, Entry, EntryBuilder, Resource};

/// A flow-control instance: clock, resources, invocation tree, slot chain.
///
/// Most services use the [`global`](crate::global) instance through
/// [`entry`](crate::entry) and [`Resource`]; tests and embedders build their
/// own, which share nothing:
///
/// ```
/// use sentinel_flow_core::{ManualClock, Sentinel};
///
/// let clock = ManualClock::new(1_000_000);
/// let sentinel = Sentinel::builder().clock(clock.clone()).max_resources(100).build();
///
/// let entry = sentinel.entry("GET:/orders")?;
/// clock.advance_ms(7);
/// drop(entry);
///
/// let node = sentinel.resource_node("GET:/orders").unwrap();
/// let now = sentinel.now_ms();
/// assert_eq!(node.stats().total_success(now), 1);
/// assert_eq!(node.stats().avg_rt(now), 7.0);
/// # Ok::<(), sentinel_flow_core::BlockError>(())
/// ```
pub struct Sentinel {
    /// What entries and exits run on: the components, the user slots, the
    /// rules in force.
    pub(crate) engine: Engine,
    /// The most distinct names the rules in force may mention.
    pub(crate) max_rule_names: usize,
    /// Loads refused for mentioning more.
    pub(crate) refused_rule_loads: AtomicU64,
    /// The resources the rules in force mention (their node ids).
    pub(crate) named_by_rules: Mutex<Vec<u32>>,
    /// The rule listeners, per kind.
    pub(crate) listeners: AllListeners,
}

static GLOBAL: Lazy<Sentinel> = Lazy::new(|| Sentinel::builder().build());

/// The default instance, made on first use with the default settings and
/// the [`SystemClock`](crate::SystemClock).
pub fn global() -> &'static Sentinel {
    &GLOBAL
}

impl Sentinel {
    /// A builder for an instance of its own.
    pub fn builder() -> SentinelBuilder {
        SentinelBuilder::default()
    }

    // ---- entering ----

    /// Enters `resource` with the default settings (outbound, one permit,
    /// default context, no origin).
    #[inline]
    pub fn entry(&self, resource: &str) -> Result<Entry<'_>, BlockError> {
        chain::enter(&self.engine, Request::new(resource))
    }

    /// A builder for an entry with more settings.
    pub fn entry_builder<'a>(&self, resource: &'a str) -> EntryBuilder<'a, '_> {
        EntryBuilder::on(&self.engine, resource)
    }

    /// A handle on `resource` that finds its node once.
    pub fn resource(&self, name: &str) -> Resource<'_> {
        Resource::on(&self.engine, name)
    }

    // ---- the resource registry ----

    /// The node of resource `name`, if it has been entered.
    pub fn resource_node(&self, name: &str) -> Option<&ResourceNode> {
        self.engine.parts.nodes.resource_node(name)
    }

    /// Every resource entered so far, in order of first entry.
    pub fn resource_nodes(&self) -> impl Iterator<Item = &ResourceNode> + '_ {
        self.engine.parts.nodes.resources.iter()
    }

    /// The statistics of every inbound entry, over all resources (system
    /// rules read it).
    pub fn inbound_node(&self) -> &StatisticNode {
        &self.engine.parts.nodes.inbound
    }

    // ---- time, the switch, the machine ----

    /// The instance clock's time, in milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.engine.parts.clock.now_ms()
    }

    /// Turns checking and counting on or off. While off, every entry passes
    /// and nothing is counted (entries made before keep counting their exit).
    pub fn set_enabled(&self, enabled: bool) {
        self.engine.enabled.store(enabled, Ordering::Relaxed);
        tracing::info!(enabled, "sentinel: switched");
    }

    /// Whether checking and counting are on.
    #[inline]
    pub fn is_enabled(&self) -> bool {
        self.engine.is_enabled()
    }

    /// The machine status the system rules read (load average, CPU usage):
    /// the one given to [`SentinelBuilder::system_status`], or `/proc`.
    pub fn system_status(&self) -> &dyn SystemStatus {
        &*self.engine.parts.status
    }

    /// This instance among all.
    pub(crate) fn uid(&self) -> u64 {
        self.engine.parts.uid
    }
}

impl<'a> EntryBuilder<'a, 'static> {
    /// An entry of `resource` on the [`global`](crate::global) instance.
    pub fn new(resource: &'a str) -> Self {
        EntryBuilder::on(&global().engine, resource)
    }
}

impl Resource<'static> {
    /// A handle on `name` in the [`global`](crate::global) instance.
    pub fn new(name: &str) -> Self {
        Resource::on(&global().engine, name)
    }
}

impl fmt::Debug for Sentinel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sentinel")
            .field("enabled", &self.is_enabled())
            .field("resources", &self.engine.parts.nodes.resources)
            .field("contexts", &self.engine.parts.nodes.tree.contexts)
            .field("slots", &self.engine.slots)
            .finish_non_exhaustive()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        // Nothing enters the instance any more: its blocks not taken are
        // of no use.
        tally::forget(self.uid());
    }
}
