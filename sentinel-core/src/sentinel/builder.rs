//! `SentinelBuilder`: the settings of an instance of its own (clock, caps,
//! windows, machine status, user slots).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use super::Sentinel;
use crate::Clock;
use crate::clock::instance::InstanceClock;
use crate::degrade::StateListeners;
use crate::engine::Engine;
use crate::engine::parts::Parts;
use crate::engine::rules::InstanceRules;
use crate::flow::ClusterHook;
use crate::log::BlockLedger;
use crate::node::StatisticNode;
use crate::node::invocation::InvocationTree;
use crate::node::nodes::Nodes;
use crate::node::overflow::{OriginCap, Overflow};
use crate::node::registry::Registry;
use crate::node::reserved::{DEFAULT_MAX_RULE_NAMES, RuleNames};
use crate::rules::{AllListeners, UserKind, UserKindRules, UserKindSlot};
use crate::slot::rule_chain::{RuleChain, RuleChecks};
use crate::slot::{Slot, UserSlots};
use crate::stat::StatConfig;
use crate::system::{ProcStatus, SystemStatus};

/// The default cap on resources.
pub const DEFAULT_MAX_RESOURCES: usize = 6_000;
/// The default cap on named contexts.
pub const DEFAULT_MAX_CONTEXTS: usize = 2_000;
/// The default cap on origins per resource.
pub const DEFAULT_MAX_ORIGINS: usize = 1_000;
/// The default budget of origins over every resource.
pub const DEFAULT_MAX_ORIGINS_TOTAL: usize = 50_000;
/// The default limit on the length of a name (resource, context, origin),
/// in bytes.
pub const DEFAULT_MAX_NAME_LEN: usize = 1_024;

/// The default rule memory budget: 256 MiB.
pub const DEFAULT_RULE_MEMORY_BUDGET: usize = 256 << 20;

/// Settings for a [`Sentinel`] of its own.
#[derive(Default)]
pub struct SentinelBuilder {
    clock: Option<Arc<dyn Clock>>,
    max_resources: Option<usize>,
    max_contexts: Option<usize>,
    max_origins: Option<usize>,
    max_origins_total: Option<usize>,
    max_name_len: Option<usize>,
    max_rule_names: Option<usize>,
    rule_memory_budget: Option<usize>,
    stat: StatConfig,
    slots: Vec<Arc<dyn Slot>>,
    status: Option<Arc<dyn SystemStatus>>,
}

impl SentinelBuilder {
    /// The clock (default: [`SystemClock`](crate::SystemClock)). Tests pass a
    /// [`ManualClock`](crate::ManualClock); a clock that goes backwards is
    /// read as standing still.
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Some(Arc::new(clock));
        self
    }

    /// At most this many resources that no rule names are counted and
    /// checked (default [`DEFAULT_MAX_RESOURCES`]); entries of new names
    /// past it pass unchecked, are counted in
    /// [`Sentinel::refused_resources`], and the first is logged. A resource
    /// that a loaded rule names (every kind, a relate rule's `ref_resource`
    /// included) has its node made when the rule is loaded, outside the
    /// cap: a cap filled by other names never switches a rule off.
    pub fn max_resources(mut self, max: usize) -> Self {
        self.max_resources = Some(max);
        self
    }

    /// At most this many named contexts that no rule names (default
    /// [`DEFAULT_MAX_CONTEXTS`]); an entry naming a new context past it is
    /// counted and checked in the default context instead, and counted in
    /// [`Sentinel::refused_contexts`]. Contexts of chain rules are made
    /// when the rule is loaded, outside the cap.
    pub fn max_contexts(mut self, max: usize) -> Self {
        self.max_contexts = Some(max);
        self
    }

    /// At most this many origins per resource that no rule names (default
    /// [`DEFAULT_MAX_ORIGINS`]); past it an entry counts on its resource and
    /// on one origin node that every origin past the cap shares
    /// ([`ResourceNode::origins_past_cap`](crate::node::ResourceNode::origins_past_cap)), so a `limit_app: other` flow
    /// rule limits them together (counted in [`Sentinel::refused_origins`]).
    /// Origins named by flow `limit_app` and authority lists are made when
    /// the rule is loaded, outside the cap.
    pub fn max_origins(mut self, max: usize) -> Self {
        self.max_origins = Some(max);
        self
    }

    /// At most this many origin nodes made by entries over every resource
    /// of the instance together (default [`DEFAULT_MAX_ORIGINS_TOTAL`]):
    /// with [`max_origins`](Self::max_origins) per resource alone, origins
    /// chosen by callers could cost `max_origins` times `max_resources`
    /// nodes. Past it an entry with a new origin counts on its resource's
    /// shared node, as past `max_origins` (counted in
    /// [`Sentinel::refused_origins`] and in
    /// [`Caps::origins_total`](crate::Caps::origins_total), logged once).
    /// An origin node costs at most 1 KiB (its name aside; no minute
    /// window until one is asked for), so the default bounds caller-chosen
    /// origins to about 50 MiB. Origins that rules in force name are made
    /// outside it.
    pub fn max_origins_total(mut self, max: usize) -> Self {
        self.max_origins_total = Some(max);
        self
    }

    /// At most this many distinct names (resources, contexts, and origins
    /// per resource) may the rules in force mention, every kind together
    /// (default [`DEFAULT_MAX_RULE_NAMES`]). A load that would put more in
    /// force is refused whole with an error naming the first rule past it;
    /// the rules in force stay. Each name in force costs a set entry (its
    /// bytes and about 40 more); a node only once an entry uses the name.
    pub fn max_rule_names(mut self, max: usize) -> Self {
        self.max_rule_names = Some(max);
        self
    }

    /// The longest name, in bytes, of a resource, context or origin
    /// (default [`DEFAULT_MAX_NAME_LEN`]). A rule naming a longer one is
    /// refused when loaded; an entry with a longer name is treated as past
    /// the cap (passes unchecked, counted as refused, never stored).
    pub fn max_name_len(mut self, bytes: usize) -> Self {
        self.max_name_len = Some(bytes);
        self
    }

    /// The most memory the rules in force may take, every kind together, in
    /// bytes (default [`DEFAULT_RULE_MEMORY_BUDGET`], 256 MiB). Each rule
    /// counts what it may take at worst: itself and its names, a flow
    /// rule's own window with every bucket contended, a hot-parameter
    /// rule's value table full at its capacity
    /// ([`PARAM_VALUE_BYTES`](crate::param_flow::PARAM_VALUE_BYTES) per
    /// value: a default rule of 4 000 values counts about 94 KiB), the
    /// lists. A load (a kind's [`RuleManager::load`](crate::RuleManager::load)
    /// with the other kinds in force, or a whole
    /// [`RuleBook`](crate::RuleBook)) that would take the rules past it is
    /// refused whole, before anything is allocated, with an error naming
    /// the rule that takes it past and the figures; the rules in force
    /// stay. [`Sentinel::rule_memory`] tells what the rules in force count.
    /// The nodes of the names rules mention are bounded by the caps, not
    /// by this budget.
    pub fn rule_memory_budget(mut self, bytes: usize) -> Self {
        self.rule_memory_budget = Some(bytes);
        self
    }

    /// The windows of every node (default: 1 s in 2 buckets, 60 s in 60).
    pub fn stat_config(mut self, config: StatConfig) -> Self {
        self.stat = config;
        self
    }

    /// Where system rules read the machine's load and CPU usage (default:
    /// [`ProcStatus`], `/proc` on Linux); tests pass a
    /// [`ManualStatus`](crate::system::ManualStatus).
    pub fn system_status(mut self, status: impl SystemStatus) -> Self {
        self.status = Some(Arc::new(status));
        self
    }

    /// Adds a user slot, placed by its [`order`](Slot::order).
    pub fn slot(mut self, slot: impl Slot) -> Self {
        self.slots.push(Arc::new(slot));
        self
    }

    /// Adds a rule kind of the application's: `rules` are checked at the
    /// kind's [`ORDER`](UserKind::ORDER) for every entry of this instance
    /// (see [`UserKind`]).
    pub fn kind<K: UserKind>(self, rules: &UserKindRules<K>) -> Self {
        self.slot(UserKindSlot(rules.clone()))
    }

    /// The instance.
    pub fn build(self) -> Sentinel {
        let max_name_len = self.max_name_len.unwrap_or(DEFAULT_MAX_NAME_LEN);
        let names = RuleNames::default();
        let uid = NEXT_UID.fetch_add(1, Ordering::Relaxed);
        let mut orders = Vec::new();
        RuleChain::orders(&mut orders);
        let nodes = Nodes {
            resources: Registry::new(
                self.max_resources.unwrap_or(DEFAULT_MAX_RESOURCES),
                max_name_len,
                Overflow::new("resources"),
            ),
            tree: InvocationTree::new(
                self.max_contexts.unwrap_or(DEFAULT_MAX_CONTEXTS),
                max_name_len,
                &names,
            ),
            inbound: StatisticNode::new(&self.stat),
            origin_cap: Arc::new(OriginCap::new(
                self.max_origins.unwrap_or(DEFAULT_MAX_ORIGINS),
                self.max_origins_total.unwrap_or(DEFAULT_MAX_ORIGINS_TOTAL),
                max_name_len,
                &names,
            )),
            max_name_len,
            names,
            config: self.stat,
        };
        let parts = Parts {
            clock: InstanceClock::new(self.clock),
            nodes,
            status: self.status.unwrap_or_else(|| Arc::new(ProcStatus)),
            ledger: BlockLedger::default(),
            cluster: ClusterHook::default(),
            states: StateListeners::default(),
            uid,
        };
        Sentinel {
            engine: Engine {
                parts,
                slots: UserSlots::new(self.slots, &orders),
                rules: InstanceRules::new(
                    uid,
                    self.rule_memory_budget
                        .unwrap_or(DEFAULT_RULE_MEMORY_BUDGET) as u64,
                ),
                enabled: AtomicBool::new(true),
            },
            max_rule_names: self.max_rule_names.unwrap_or(DEFAULT_MAX_RULE_NAMES),
            refused_rule_loads: AtomicU64::new(0),
            named_by_rules: Mutex::new(Vec::new()),
            listeners: AllListeners::default(),
        }
    }
}

/// Instance ids (the per-thread rule cache and block tally key on them).
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

impl fmt::Debug for SentinelBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelBuilder")
            .field("clock", &self.clock)
            .field("max_resources", &self.max_resources)
            .field("max_contexts", &self.max_contexts)
            .field("max_origins", &self.max_origins)
            .field("max_origins_total", &self.max_origins_total)
            .field("max_name_len", &self.max_name_len)
            .field("max_rule_names", &self.max_rule_names)
            .field("rule_memory_budget", &self.rule_memory_budget)
            .field("stat", &self.stat)
            .field("slots", &self.slots)
            .finish()
    }
}
