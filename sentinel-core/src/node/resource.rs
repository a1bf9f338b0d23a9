//! `ResourceNode`: the statistics of one resource over every context and
//! origin (Sentinel's `ClusterNode`), and the nodes hanging off it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use arc_swap::ArcSwapOption;
use once_cell::race::OnceBox;
use once_cell::sync::OnceCell;

use super::overflow::OriginCap;
use super::registry::{NameHasher, Registry};
use super::statistic::StatisticNode;
use crate::stat::{Percentiles, RtPercentiles, StatConfig, Tally};

/// One resource: its statistics over every context and origin, its origin
/// nodes, and its nodes in the invocation tree.
///
/// Resource nodes are created once per name by the instance and live as long
/// as it does, so an [`Entry`](crate::Entry) borrows one instead of counting
/// references.
pub struct ResourceNode {
    name: Arc<str>,
    id: u32,
    stats: StatisticNode,
    /// The node of this resource in the default context, made on first use.
    pub(crate) default_node: OnceCell<u32>,
    /// The same, once it hangs under the default entrance (a top-level
    /// entry has used it): the hot path's one load.
    pub(crate) default_top: OnceCell<u32>,
    /// Its nodes in named contexts: context id -> tree node id.
    pub(crate) context_nodes: ArcSwapOption<HashMap<u32, u32, NameHasher>>,
    /// Per-origin statistics, made when the first caller names an origin.
    origins: OnceBox<Origins>,
    origin_cap: Arc<OriginCap>,
    /// A loaded rule mentions the resource (its node was reserved).
    named_by_rules: AtomicBool,
    config: StatConfig,
    /// Where this resource's rules sit in the instance's rule set: the set's
    /// version (high half) and position + 1 (low half, 0: no rules).
    pub(crate) rules_hint: AtomicU64,
    /// The response-time percentile recorder, made when tracking is first
    /// turned on: one word while it never is.
    percentiles: OnceBox<Percentiles>,
}

/// The name of the node that the origins past `max_origins` of a resource
/// share ([`ResourceNode::origins_past_cap`]).
pub const PAST_MAX_ORIGINS: &str = "(past max_origins)";

/// A resource's origin nodes: one per origin under the cap or named by a
/// rule, and one that the origins past the cap share.
struct Origins {
    registry: Registry<OriginNode>,
    past_cap: OnceBox<OriginNode>,
}

/// The statistics of one resource for one origin (the caller's name).
///
/// Callers choose origins, so an origin node is small: at most 1 KiB, its
/// name aside. It keeps no minute window until one is asked for
/// ([`StatisticNode::keep_minute`], or a warm-up flow rule that reads the
/// origin's previous second): until then its minute totals and history
/// hold what its second window does, and its second-window figures (what
/// rules check) and lifetime totals are whole.
pub struct OriginNode {
    name: Arc<str>,
    stats: StatisticNode,
    /// The node that origins past the cap share.
    past_cap: bool,
}

impl OriginNode {
    fn new(name: &str, config: &StatConfig) -> Self {
        OriginNode {
            name: name.into(),
            stats: StatisticNode::without_minute(config),
            past_cap: false,
        }
    }

    /// Whether this is the node that the origins past `max_origins` of its
    /// resource share (named [`PAST_MAX_ORIGINS`]).
    pub fn is_past_cap(&self) -> bool {
        self.past_cap
    }

    /// The origin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn name_arc(&self) -> &Arc<str> {
        &self.name
    }

    /// What this origin did with the resource.
    pub fn stats(&self) -> &StatisticNode {
        &self.stats
    }
}

impl fmt::Debug for OriginNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OriginNode")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl ResourceNode {
    pub(crate) fn new(
        name: &str,
        id: u32,
        config: &StatConfig,
        origin_cap: &Arc<OriginCap>,
        named_by_rules: bool,
    ) -> Self {
        ResourceNode {
            name: name.into(),
            id,
            stats: StatisticNode::new(config),
            default_node: OnceCell::new(),
            default_top: OnceCell::new(),
            context_nodes: ArcSwapOption::empty(),
            origins: OnceBox::new(),
            origin_cap: Arc::clone(origin_cap),
            named_by_rules: AtomicBool::new(named_by_rules),
            config: *config,
            rules_hint: AtomicU64::new(0),
            percentiles: OnceBox::new(),
        }
    }

    /// The resource's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn name_arc(&self) -> &Arc<str> {
        &self.name
    }

    /// The resource's index in its instance (stable, dense from 0).
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The resource's statistics over every context and origin.
    pub fn stats(&self) -> &StatisticNode {
        &self.stats
    }

    fn origin_registry(&self) -> &Registry<OriginNode> {
        &self
            .origins
            .get_or_init(|| {
                let cap = &self.origin_cap;
                Box::new(Origins {
                    registry: Registry::with_budget(
                        cap.max,
                        cap.max_name_len,
                        cap.overflow(),
                        &cap.budget,
                    ),
                    past_cap: OnceBox::new(),
                })
            })
            .registry
    }

    /// The node of `origin`, made on first use. Past the cap or the
    /// instance's origin budget (or over the name length limit) the node
    /// that every such origin of the resource shares, unless a rule in
    /// force names the origin on this resource: a `limit_app: other` flow
    /// rule then limits them together, more strictly than one by one,
    /// rather than not at all.
    pub(crate) fn origin_node(&self, origin: &str) -> Option<&OriginNode> {
        let config = &self.config;
        let named = |origin: &str| self.origin_cap.names.load().origin(&self.name, origin);
        match self.origin_registry().get_or_create(
            origin,
            |_, _| OriginNode::new(origin, config),
            named,
        ) {
            Some((_, node)) => Some(node),
            None => self.past_cap_origin(),
        }
    }

    #[cold]
    fn past_cap_origin(&self) -> Option<&OriginNode> {
        let origins = self.origins.get()?;
        Some(origins.past_cap.get_or_init(|| {
            Box::new(OriginNode {
                past_cap: true,
                ..OriginNode::new(PAST_MAX_ORIGINS, &self.config)
            })
        }))
    }

    /// The node that the origins past `max_origins` (or over the name
    /// length limit) of this resource share, named [`PAST_MAX_ORIGINS`];
    /// `None` until one came. It is not among [`origins`](Self::origins).
    pub fn origins_past_cap(&self) -> Option<&OriginNode> {
        self.origins.get()?.past_cap.get()
    }

    /// Whether a loaded rule mentions this resource (see
    /// [`Sentinel::is_reserved`](crate::Sentinel::is_reserved)).
    pub fn is_named_by_rules(&self) -> bool {
        self.named_by_rules.load(Ordering::Relaxed)
    }

    pub(crate) fn set_named_by_rules(&self, named: bool) {
        self.named_by_rules.store(named, Ordering::Relaxed);
    }

    /// The node of `origin`, if a caller with that origin has entered.
    pub fn find_origin(&self, origin: &str) -> Option<&OriginNode> {
        let registry = &self.origins.get()?.registry;
        registry.get(registry.find(origin)?)
    }

    /// Every origin that has entered, in order of first entry.
    pub fn origins(&self) -> impl Iterator<Item = &OriginNode> + '_ {
        self.origins
            .get()
            .into_iter()
            .flat_map(|origins| origins.registry.iter())
    }

    /// How many entries were refused an origin node of their own because
    /// the resource had `max_origins` already, the instance its
    /// `max_origins_total` (or the origin's name was over the length
    /// limit); they counted on [`origins_past_cap`](Self::origins_past_cap).
    /// Origins that rules in force name on the resource are made outside
    /// both.
    pub fn refused_origins(&self) -> u64 {
        self.origins.get().map_or(0, |o| o.registry.refused())
    }

    /// How many origins entries made within the caps, and how many were
    /// made outside them because rules named them.
    pub(crate) fn origin_counts(&self) -> (usize, usize) {
        self.origins.get().map_or((0, 0), |o| {
            let r = &o.registry;
            (r.len() - r.reserved(), r.reserved())
        })
    }

    /// The percentile recorder, if tracking was ever turned on.
    #[inline(always)]
    pub(crate) fn percentiles(&self) -> Option<&Percentiles> {
        self.percentiles.get()
    }

    /// Turns tracking on or off for `source`; returns whether it is on
    /// after (for any source).
    pub(crate) fn track_percentiles_by(&self, source: u8, on: bool) -> bool {
        match (on, self.percentiles.get()) {
            (true, _) => self
                .percentiles
                .get_or_init(|| Box::new(Percentiles::new()))
                .set(source, true),
            (false, Some(percentiles)) => percentiles.set(source, false),
            (false, None) => false,
        }
    }

    /// Whether response-time percentiles are tracked for this resource (see
    /// [`Sentinel::track_percentiles`](crate::Sentinel::track_percentiles)).
    pub fn tracks_percentiles(&self) -> bool {
        self.percentiles.get().is_some_and(Percentiles::is_on)
    }

    /// Response-time percentiles over the minute up to `now` (milliseconds
    /// on the instance clock); `None` while they are not tracked. Reading
    /// merges every thread's counts into a histogram (about 14 KiB, made
    /// for the call); nothing is taken from entries.
    pub fn rt_percentiles(&self, now: u64) -> Option<RtPercentiles> {
        self.rt_percentiles_in(now, &mut None)
    }

    /// As [`rt_percentiles`](Self::rt_percentiles), adding up in `tally`
    /// (made on first need), so that a reader of many resources makes one.
    pub(crate) fn rt_percentiles_in(
        &self,
        now: u64,
        tally: &mut Option<Tally>,
    ) -> Option<RtPercentiles> {
        let percentiles = self.percentiles.get().filter(|p| p.is_on())?;
        percentiles.read(now, tally.get_or_insert_with(Tally::new))
    }

    /// The tree node of this resource in context `context`, if any.
    pub(crate) fn context_node(&self, context: u32) -> Option<u32> {
        self.context_nodes.load().as_ref()?.get(&context).copied()
    }
}

impl fmt::Debug for ResourceNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResourceNode")
            .field("name", &self.name)
            .field("id", &self.id)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl crate::node::registry::Named for ResourceNode {
    fn name(&self) -> &str {
        &self.name
    }
}

impl crate::node::registry::Named for OriginNode {
    fn name(&self) -> &str {
        &self.name
    }
}
