//! `Sentinel`: one instance owns its clock, its nodes (the resource
//! registry and the invocation tree), its user slots and its rules.
//!
//! This file is the facade: entering, and reading the nodes. The rest of an
//! instance is in the files beside it (`builder.rs` its settings,
//! `rules.rs` its rule managers and the rule set in force, `tree.rs` the
//! invocation tree's readers, `percentiles.rs`, `caps.rs`, `queued.rs`),
//! and what an entry goes through is the slot chain
//! ([`crate::slot`], `slot/chain.rs`).

mod builder;
mod caps;
mod clock;
mod percentiles;
#[cfg(feature = "tokio")]
mod queued;
mod rules;
mod tree;

pub use crate::node::invocation::DEFAULT_CONTEXT;
pub use crate::node::reserved::DEFAULT_MAX_RULE_NAMES;
pub use builder::DEFAULT_RULE_MEMORY_BUDGET;
pub use builder::{
    DEFAULT_MAX_CONTEXTS, DEFAULT_MAX_NAME_LEN, DEFAULT_MAX_ORIGINS, DEFAULT_MAX_ORIGINS_TOTAL,
    DEFAULT_MAX_RESOURCES, SentinelBuilder,
};
pub use caps::{CapUsage, Caps};
#[cfg(feature = "tokio")]
pub use queued::{Entering, Queued};

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use once_cell::sync::Lazy;
use parking_lot::Mutex;

use crate::entry::{Active, Request};
use crate::flow::ClusterHook;
use crate::log::BlockLedger;
use crate::node::invocation::InvocationTree;
use crate::node::overflow::OriginCap;
use crate::node::registry::Registry;
use crate::node::reserved::RuleNames;
use crate::node::{ResourceNode, StatisticNode};
use crate::rules::AllListeners;
use crate::slot::{UserSlots, chain};
use crate::stat::{StatConfig, tally};
use crate::system::SystemStatus;
use crate::{BlockError, Entry, EntryBuilder, Resource};
use clock::InstanceClock;
use rules::InstanceRules;

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
    pub(crate) clock: InstanceClock,
    pub(crate) config: StatConfig,
    pub(crate) resources: Registry<ResourceNode>,
    pub(crate) tree: InvocationTree,
    /// Every inbound entry's statistics (system rules read them).
    pub(crate) inbound: StatisticNode,
    pub(crate) user_slots: UserSlots,
    enabled: AtomicBool,
    pub(crate) origin_cap: Arc<OriginCap>,
    max_name_len: usize,
    /// The names the rules in force mention, consulted when a node is made.
    pub(crate) names: RuleNames,
    /// The most distinct names the rules in force may mention.
    pub(crate) max_rule_names: usize,
    /// Loads refused for mentioning more.
    pub(crate) refused_rule_loads: AtomicU64,
    /// The resources the rules in force mention (their node ids).
    pub(crate) named_by_rules: Mutex<Vec<u32>>,
    /// The rule set in force, swapped as one.
    pub(crate) rules: InstanceRules,
    pub(crate) listeners: AllListeners,
    /// Load and CPU readings for system rules.
    pub(crate) status: Arc<dyn SystemStatus>,
    /// Blocks per resource and kind, and per second for the block log.
    pub(crate) blocks: BlockLedger,
    /// The service cluster flow rules ask for permits.
    pub(crate) cluster: ClusterHook,
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
        self.enter(Request::new(resource))
    }

    /// A builder for an entry with more settings.
    pub fn entry_builder<'a>(&self, resource: &'a str) -> EntryBuilder<'a, '_> {
        EntryBuilder::on(self, resource)
    }

    /// A handle on `resource` that finds its node once.
    pub fn resource(&self, name: &str) -> Resource<'_> {
        Resource::on(self, name)
    }

    /// Enters through the slot chain.
    #[inline(always)]
    pub(crate) fn enter<'s>(&'s self, request: Request<'_, 's>) -> Result<Entry<'s>, BlockError> {
        chain::enter(self, request)
    }

    /// As [`enter`](Self::enter), waiting in a rate limiter's queue with
    /// `tokio::time::sleep` instead of sleeping the thread.
    #[cfg(feature = "tokio")]
    pub(crate) async fn enter_async<'s>(
        &'s self,
        request: Request<'_, 's>,
    ) -> Result<Entry<'s>, BlockError> {
        chain::enter_async(self, request).await
    }

    /// Completes an entry that passed.
    #[inline]
    pub(crate) fn exit(&self, active: &mut Active<'_>) {
        chain::exit(self, active);
    }

    // ---- the resource registry ----

    /// The node of `name`, made if new; `None` past the resource cap (which
    /// is counted and logged once).
    pub(crate) fn resolve(&self, name: &str) -> Option<&ResourceNode> {
        let node = self.resolve_quietly(name);
        if node.is_none() {
            self.resources.refuse(name);
        }
        node
    }

    /// As [`resolve`](Self::resolve), without counting a refusal (a handle
    /// counts one per entry instead).
    pub(crate) fn resolve_quietly(&self, name: &str) -> Option<&ResourceNode> {
        let (config, origin_cap) = (&self.config, &self.origin_cap);
        let named = |name: &str| self.names.load().resource(name);
        self.resources
            .try_get_or_create(
                name,
                |id, named| ResourceNode::new(name, id, config, origin_cap, named),
                named,
            )
            .map(|(_, node)| node)
    }

    /// The node of a handle made past the resource cap: a rule loaded since
    /// may name it (then it is made now). Otherwise the entry is refused a
    /// node (counted).
    #[cold]
    fn resolve_late(&self, name: &str) -> Option<&ResourceNode> {
        self.resolve(name)
    }

    /// The node of a request's resource: the handle's, or found (made if
    /// new) by name; `None` past the resource cap.
    #[inline(always)]
    pub(crate) fn resource_of<'s>(&'s self, request: &Request<'_, 's>) -> Option<&'s ResourceNode> {
        match request.resource {
            Some(Some(resolved)) => Some(resolved),
            Some(None) => self.resolve_late(request.name),
            None => self.resolve(request.name),
        }
    }

    pub(crate) fn resource_id(&self, name: &str) -> Option<u32> {
        self.resources.find(name)
    }

    pub(crate) fn resource_by_id(&self, id: u32) -> Option<&ResourceNode> {
        self.resources.get(id)
    }

    /// The node of resource `name`, if it has been entered.
    pub fn resource_node(&self, name: &str) -> Option<&ResourceNode> {
        self.resources.get(self.resources.find(name)?)
    }

    /// Every resource entered so far, in order of first entry.
    pub fn resource_nodes(&self) -> impl Iterator<Item = &ResourceNode> + '_ {
        self.resources.iter()
    }

    /// The statistics of every inbound entry, over all resources (system
    /// rules read it).
    pub fn inbound_node(&self) -> &StatisticNode {
        &self.inbound
    }

    // ---- time, the switch, the machine ----

    /// The instance clock's time, in milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// The instance clock's time, in nanoseconds (rate limiters pace with it).
    pub(crate) fn now_nanos(&self) -> u64 {
        self.clock.now_nanos()
    }

    /// Turns checking and counting on or off. While off, every entry passes
    /// and nothing is counted (entries made before keep counting their exit).
    pub fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::Relaxed);
        tracing::info!(enabled, "sentinel: switched");
    }

    /// Whether checking and counting are on.
    #[inline]
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// The machine status the system rules read (load average, CPU usage):
    /// the one given to [`SentinelBuilder::system_status`], or `/proc`.
    pub fn system_status(&self) -> &dyn SystemStatus {
        &*self.status
    }
}

impl fmt::Debug for Sentinel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sentinel")
            .field("enabled", &self.is_enabled())
            .field("resources", &self.resources)
            .field("contexts", &self.tree.contexts)
            .field("slots", &self.user_slots)
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
