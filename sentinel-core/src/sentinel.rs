//! `Sentinel`: one instance owns its clock, its nodes (registry and
//! invocation tree), its slot chain and its rules.

mod caps;

pub use caps::{CapUsage, Caps};

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use arc_swap::{ArcSwap, Guard};
use once_cell::sync::Lazy;
use parking_lot::Mutex;

#[cfg(feature = "tokio")]
mod queued;

#[cfg(feature = "tokio")]
pub use queued::{Entering, Queued};

use crate::authority::{self, AuthorityRule};
use crate::degrade::{self, DegradeRule, StateChange};
use crate::entry::{Active, Request};
use crate::flow::{self, FlowRules};
use crate::hotspot::{self, ParamFlowRule};
use crate::log::BlockLedger;
use crate::node::overflow::{OriginCap, Overflow};
use crate::node::registry::{Arena, Registry};
use crate::node::tree::{EntranceNode, TreeNode, add_child, has_child};
use crate::node::{ContextNode, Entrance, OriginNode, ResourceNode, StatisticNode};
use crate::rules::{AllListeners, ResourceRules, RuleManager, RuleSet, RuleSetParts, kinds};
use crate::slot::{Check, EntryContext, Holds, Outcome, Slot, SlotChain};
use crate::stat::tally::{self, BlockKey, BlockSource};
use crate::stat::{BY_CODE, BY_RULES, StatConfig};
use crate::system::{ProcStatus, SystemLimits, SystemRule, SystemStatus};
use crate::{
    BlockError, BlockKind, Clock, Entry, EntryBuilder, EntryType, MonotonicClock, Resource, Rule,
    SystemClock,
};

/// The name of the context of entries that name none, as in Sentinel.
pub const DEFAULT_CONTEXT: &str = "sentinel_default_context";
/// The default cap on resources.
pub const DEFAULT_MAX_RESOURCES: usize = 6_000;
/// The default cap on named contexts.
pub const DEFAULT_MAX_CONTEXTS: usize = 2_000;
/// The default cap on origins per resource.
pub const DEFAULT_MAX_ORIGINS: usize = 1_000;
/// The default limit on the length of a name (resource, context, origin),
/// in bytes.
pub const DEFAULT_MAX_NAME_LEN: usize = 1_024;

/// The id of the default context: made first by every instance.
const DEFAULT_CONTEXT_ID: u32 = 0;

/// The instance's time. The system clock is monotonic already and read
/// without indirection; any other clock is read through [`MonotonicClock`].
enum InstanceClock {
    System(SystemClock),
    Custom(MonotonicClock<Arc<dyn Clock>>),
}

impl InstanceClock {
    #[inline]
    fn now_ms(&self) -> u64 {
        match self {
            InstanceClock::System(clock) => clock.now_ms(),
            InstanceClock::Custom(clock) => clock.now_ms(),
        }
    }

    fn now_nanos(&self) -> u64 {
        match self {
            InstanceClock::System(clock) => clock.now_nanos(),
            InstanceClock::Custom(clock) => clock.now_nanos(),
        }
    }
}

/// A flow-control instance: clock, resources, invocation tree, slot chain.
///
/// Most services use the [`global`](crate::global) instance through
/// [`entry`](crate::entry) and [`Resource`]; tests and embedders build their
/// own, which share nothing:
///
/// ```
/// use sentinel_core::{ManualClock, Sentinel};
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
/// # Ok::<(), sentinel_core::BlockError>(())
/// ```
pub struct Sentinel {
    clock: InstanceClock,
    config: StatConfig,
    resources: Registry<ResourceNode>,
    contexts: Registry<EntranceNode>,
    nodes: Arena<TreeNode>,
    /// Serialises changes to the tree (new nodes, new edges).
    tree_lock: Mutex<()>,
    inbound: StatisticNode,
    chain: SlotChain,
    enabled: AtomicBool,
    origin_cap: Arc<OriginCap>,
    max_name_len: usize,
    /// The resources the rules in force mention (their node ids).
    named_by_rules: Mutex<Vec<u32>>,
    /// Every rule kind, swapped as one.
    rules: ArcSwap<RuleSet>,
    /// The version of `rules`, stored after it (0: no rule loaded yet).
    rules_version: AtomicU32,
    /// This instance among all (for the per-thread rule cache).
    uid: u64,
    /// Serialises rule loads (each builds on the set in force).
    rules_lock: Mutex<()>,
    pub(crate) listeners: AllListeners,
    /// Load and CPU readings for system rules.
    status: Arc<dyn SystemStatus>,
    /// Blocks per resource and kind, and per second for the block log.
    pub(crate) blocks: BlockLedger,
    /// The service cluster flow rules ask for permits.
    pub(crate) cluster: crate::flow::ClusterHook,
}

/// Instance ids, for the per-thread rule cache.
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The rule set this thread last used: instance id, version, set.
    static RULES_CACHE: std::cell::RefCell<Option<(u64, u32, Arc<RuleSet>)>> =
        const { std::cell::RefCell::new(None) };
}

static GLOBAL: Lazy<Sentinel> = Lazy::new(|| Sentinel::builder().build());

/// The default instance, made on first use with the default settings and
/// the [`SystemClock`].
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

    /// Turns response-time percentiles of `name` on or off (the resource is
    /// made if new, as a [`Resource`] handle makes it). While on, every exit
    /// records its response time, and [`resources`](Self::resources), the
    /// resource node's [`rt_percentiles`](ResourceNode::rt_percentiles) and
    /// the Prometheus exporter show p50, p90, p99 and the maximum over the
    /// last minute. Off (the default) they cost an exit nothing but one
    /// branch.
    ///
    /// Returns whether percentiles are tracked after the call: `false` for
    /// a resource past the resource cap (it has no node: nothing of it is
    /// counted); `true` after turning it off while the rule file
    /// ([`track_percentiles_from_rules`](Self::track_percentiles_from_rules))
    /// still lists the resource. Tracking is on while code or the rule file
    /// asks for it.
    ///
    /// Once turned on, a resource keeps its recorder until the instance is
    /// dropped: about 2 KiB per thread that completed a call of it, and the
    /// minute of handed-over counts.
    ///
    /// ```
    /// use sentinel_core::{ManualClock, Sentinel};
    ///
    /// let clock = ManualClock::new(1_700_000_000_000);
    /// let sentinel = Sentinel::builder().clock(clock.clone()).build();
    /// assert!(sentinel.track_percentiles("GET:/orders", true));
    /// for rt in 1..=50 {
    ///     let entry = sentinel.entry("GET:/orders")?;
    ///     clock.advance_ms(rt);
    ///     drop(entry);
    /// }
    /// let rt = sentinel.resources()[0].percentiles.unwrap();
    /// assert_eq!((rt.p50, rt.p90, rt.p99, rt.max, rt.count), (25, 45, 50, 50, 50));
    /// # Ok::<(), sentinel_core::BlockError>(())
    /// ```
    pub fn track_percentiles(&self, name: &str, on: bool) -> bool {
        let node = match on {
            true => self.resolve_quietly(name),
            false => self.resource_node(name),
        };
        match node {
            Some(node) => node.track_percentiles_by(BY_CODE, on),
            None => {
                if on {
                    tracing::warn!(
                        resource = name,
                        "sentinel: percentiles not tracked, the resource is past max_resources"
                    );
                }
                false
            }
        }
    }

    /// Sets the resources a rule file tracks percentiles of (see
    /// [`track_percentiles`](Self::track_percentiles)): turns them on for
    /// each of `names`, and off for those an earlier call listed that
    /// `names` leaves out, unless code turned them on too. `sentinel-rules`
    /// calls it with the file's `track_percentiles` list on every load.
    ///
    /// Returns the names that are not tracked because they are past the
    /// resource cap.
    pub fn track_percentiles_from_rules<S: AsRef<str>>(&self, names: &[S]) -> Vec<String> {
        // One rule load at a time, as for rules.
        let _guard = self.rules_lock.lock();
        let mut refused = Vec::new();
        let mut listed = Vec::with_capacity(names.len());
        for name in names {
            match self.resolve_quietly(name.as_ref()) {
                Some(node) => {
                    node.track_percentiles_by(BY_RULES, true);
                    listed.push(node.id());
                }
                None => refused.push(name.as_ref().to_owned()),
            }
        }
        for node in self.resource_nodes() {
            let by_rules = node.percentiles().is_some_and(|p| p.set_by(BY_RULES));
            if by_rules && !listed.contains(&node.id()) {
                node.track_percentiles_by(BY_RULES, false);
            }
        }
        if !refused.is_empty() {
            tracing::warn!(
                ?refused,
                "sentinel: percentiles not tracked, the resources are past max_resources"
            );
        }
        refused
    }

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
        self.resources
            .try_get_or_create(name, |id| ResourceNode::new(name, id, config, origin_cap))
            .map(|(_, node)| node)
    }

    /// The node of a handle made past the resource cap: a rule loaded since
    /// may have made it. Otherwise the entry is refused a node (counted).
    #[cold]
    fn resolve_late(&self, name: &str) -> Option<&ResourceNode> {
        let node = self
            .resources
            .find(name)
            .and_then(|id| self.resources.get(id));
        if node.is_none() {
            self.resources.refuse(name);
        }
        node
    }

    #[inline(always)]
    pub(crate) fn enter<'s>(&'s self, request: Request<'_, 's>) -> Result<Entry<'s>, BlockError> {
        let Some(mut checked) = self.begin(&request)? else {
            return Ok(Entry::pass_through());
        };
        let now = match checked.wait_ns {
            0 => checked.pass_ms,
            wait => {
                // A rate limiter's queue: wait with nothing held, then count.
                std::thread::sleep(std::time::Duration::from_nanos(wait));
                self.clock.now_ms().max(checked.pass_ms)
            }
        };
        Ok(self.admit(&request, &mut checked, now))
    }

    /// As [`enter`](Self::enter), waiting in a rate limiter's queue with
    /// `tokio::time::sleep` instead of sleeping the thread.
    #[cfg(feature = "tokio")]
    pub(crate) async fn enter_async<'s>(
        &'s self,
        request: Request<'_, 's>,
    ) -> Result<Entry<'s>, BlockError> {
        let Some(mut checked) = self.begin(&request)? else {
            return Ok(Entry::pass_through());
        };
        if checked.wait_ns == 0 {
            let now = checked.pass_ms;
            return Ok(self.admit(&request, &mut checked, now));
        }
        let wait = std::time::Duration::from_nanos(checked.wait_ns);
        // Dropped while waiting (a cancelled future), the guard gives back
        // what the checks took (concurrency, probes); nothing is counted.
        let mut guard = Unadmitted {
            sentinel: self,
            batch: request.batch,
            checked: Some(checked),
        };
        tokio::time::sleep(wait).await;
        let mut checked = guard.checked.take().expect("taken once, after the wait");
        let now = self.clock.now_ms().max(checked.pass_ms);
        Ok(self.admit(&request, &mut checked, now))
    }

    /// Counts the pass of a checked entry at `now` and hands out its guard.
    #[inline(always)]
    fn admit<'a, 's>(
        &'s self,
        request: &Request<'a, 's>,
        checked: &mut Checked<'a, 's>,
        now: u64,
    ) -> Entry<'s> {
        let batch = u64::from(request.batch);
        let counted = Counted::new(
            self,
            checked.resource,
            checked.context_stats,
            checked.origin,
            request.entry_type,
        );
        counted.each(
            #[inline(always)]
            |node| node.add_pass(now, batch),
        );
        if checked.windows {
            self.count_rule_windows(request, checked, now);
        }
        Entry::active(Active::new(
            self,
            checked.resource,
            checked.node,
            checked.context,
            checked.context_stats,
            checked.origin,
            checked.origin_name,
            request.entry_type,
            checked.start_ms,
            request.batch,
            checked.reserved,
            checked.breakers,
            std::mem::take(&mut checked.holds),
        ))
    }

    /// Everything up to counting the pass: node selection, the slots, the
    /// rule checks.
    #[inline(always)]
    fn begin<'a, 's>(
        &'s self,
        request: &Request<'a, 's>,
    ) -> Result<Option<Checked<'a, 's>>, BlockError> {
        if !self.enabled.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let resource = match request.resource {
            Some(Some(resolved)) => Some(resolved),
            Some(None) => self.resolve_late(request.name),
            None => self.resolve(request.name),
        };
        let Some(resource) = resource else {
            return Ok(None);
        };
        let now = self.clock.now_ms();

        // Node selector: the context and this resource's node in it.
        let parent = request.parent.and_then(|p| p.active_in(self));
        let (context, node) = match (parent, request.context) {
            (None, None) => (DEFAULT_CONTEXT_ID, self.default_node(resource)),
            (Some(parent), _) => {
                let node = self.nested_node(resource, parent.context, parent.node);
                (parent.context, node)
            }
            (None, Some(name)) => match self
                .contexts
                .get_or_create(name, |_| EntranceNode::new(name))
            {
                Some((context, _)) => (context, self.top_node(resource, context)),
                // Past the context cap the entry still counts and is checked
                // on its resource, in the default context: a cap filled by
                // context names never switches a resource's rules off.
                None => (DEFAULT_CONTEXT_ID, self.default_node(resource)),
            },
        };
        let context_stats = match context {
            DEFAULT_CONTEXT_ID => None,
            _ => self.nodes.get(node).and_then(|n| n.stats.as_ref()),
        };

        // Cluster builder: the origin's node, given or inherited.
        let origin_name = match (request.origin, parent) {
            ("", Some(parent)) => parent.origin_name(),
            (origin, _) => origin,
        };
        let origin = match origin_name {
            "" => None,
            name => resource.origin_node(name),
        };

        // The chain runs only when something can block: a user slot or a
        // rule on this resource. Otherwise the entry pays for statistics
        // alone. A refusal is left in `verdict` (with what a passing entry
        // holds), so that the outcome of a pass travels in a register, and
        // becomes a `BlockError` only here, in the caller's result.
        let mut verdict = Verdict::default();
        let version = self.rules_version.load(Ordering::Acquire);
        let verdict = &mut verdict;
        // Inlined at each call (a closure called out of line reads its
        // captures back wider than they were stored, and stalls).
        let outcome = self.with_rules_if_any(
            version,
            #[inline(always)]
            |rules: Option<&RuleSet>| {
                let resource_rules = rules.and_then(|set| set.for_resource(resource));
                let system = match request.entry_type {
                    EntryType::Inbound => rules.and_then(RuleSet::system),
                    EntryType::Outbound => None,
                };
                if self.chain.is_empty() && resource_rules.is_none() && system.is_none() {
                    return Some(Outcome::default());
                }
                self.run_chain(
                    &EntryContext {
                        resource,
                        entry_type: request.entry_type,
                        batch: request.batch,
                        origin,
                        origin_name,
                        context,
                        sentinel: self,
                        context_stats,
                        args: request.args,
                        now_ms: now,
                    },
                    Checks {
                        resource: resource_rules,
                        system,
                    },
                    verdict,
                )
            },
        );
        let Some(outcome) = outcome else {
            return Err(verdict.take_error());
        };
        Ok(Some(Checked {
            resource,
            node,
            context,
            context_stats,
            origin,
            origin_name,
            start_ms: now,
            pass_ms: now.max(verdict.pass_ms),
            wait_ns: outcome.wait_ns(),
            reserved: outcome.reserved(),
            windows: outcome.windows(),
            breakers: outcome.breakers(),
            #[cfg(feature = "tokio")]
            leased: outcome.leased(),
            holds: std::mem::take(&mut verdict.holds),
        }))
    }

    /// Counts an admitted entry in the windows its flow rules keep.
    #[cold]
    fn count_rule_windows(&self, request: &Request<'_, '_>, checked: &Checked<'_, '_>, now: u64) {
        let version = self.rules_version.load(Ordering::Acquire);
        self.with_rules(version, |set| {
            let Some(rules) = set.for_resource(checked.resource) else {
                return;
            };
            let ctx = EntryContext {
                resource: checked.resource,
                entry_type: request.entry_type,
                batch: request.batch,
                origin: checked.origin,
                origin_name: checked.origin_name,
                context: checked.context,
                sentinel: self,
                context_stats: checked.context_stats,
                args: request.args,
                now_ms: now,
            };
            flow::count_windows(self, &rules.flow, |o| rules.names_origin(o), &ctx);
        });
    }

    /// Tells the circuit breakers of an entry's resource that it completed.
    #[inline(never)]
    fn complete_breakers(&self, active: &Active<'_>, now: u64, rt: u64, error: bool) {
        let notify = |change: &StateChange<'_>| self.listeners.states.notify(change);
        let version = self.rules_version.load(Ordering::Acquire);
        self.with_rules(version, |set| {
            if let Some(rules) = set.for_resource(active.resource) {
                degrade::complete(&rules.degrade, &active.holds, now, rt, error, &notify);
            }
        });
    }

    /// Gives back the exact concurrency an entry holds.
    #[cold]
    pub(crate) fn release_reserved(&self, active: &Active<'_>) {
        flow::release_nodes(
            active.resource.stats(),
            active.origin.map(OriginNode::stats),
            active.context_stats,
            active.reserved,
        );
    }

    /// The slots and checks of an entry: `None` (and the reason in
    /// `verdict`) if refused, counted as blocked on every node of the entry.
    #[inline(never)]
    fn run_chain(
        &self,
        ctx: &EntryContext<'_>,
        rules: Checks<'_>,
        verdict: &mut Verdict,
    ) -> Option<Outcome> {
        // Slots before the statistic slot refuse without a block count.
        if let Err(block) = self
            .chain
            .before_statistic
            .iter()
            .try_for_each(|slot| slot.entry(ctx))
        {
            verdict.block = Some(block);
            return None;
        }
        let outcome = self.check(ctx, rules, verdict);
        if outcome.is_none() {
            // Statistic: a refusal by a check is counted as a block.
            let counted = Counted::new(
                self,
                ctx.resource,
                ctx.context_stats,
                ctx.origin,
                ctx.entry_type,
            );
            let batch = u64::from(ctx.batch);
            counted.each(|node| node.add_block(ctx.now_ms, batch));
        }
        outcome
    }

    /// Counts a block by its resource, kind, rule and origin, for the
    /// block log and the per-kind counts (on this thread's tally: no
    /// atomic read-modify-write). Called where the check refuses.
    ///
    /// `by_rule`: counted apart from the kind's other rules (a built-in
    /// rule, whose reference lives as long as the rule); a user slot's
    /// blocks are counted per kind, as it may make a rule per block.
    #[inline(always)]
    fn count_block(
        &self,
        ctx: &EntryContext<'_>,
        kind: BlockKind,
        rule: Option<&Arc<dyn Rule>>,
        by_rule: bool,
    ) {
        let origin = ctx.origin.map_or(0, |o| std::ptr::from_ref(o) as usize);
        let keyed = if by_rule { rule } else { None };
        let key = BlockKey::new(self.uid, ctx.resource.id(), kind, keyed, origin);
        tally::count(
            &key,
            ctx.now_ms,
            u64::from(ctx.batch),
            #[inline(never)]
            || BlockSource {
                key,
                resource: Arc::clone(ctx.resource.name_arc()),
                kind,
                rule: rule.cloned(),
                origin: ctx.origin.map(|o| Arc::clone(o.name_arc())),
            },
        );
    }

    /// Counts the block by the rule in `verdict`, read where it was stored
    /// (copying the rule's reference out first and back would stall on
    /// its halves).
    #[inline(always)]
    fn count_rule_block(&self, ctx: &EntryContext<'_>, verdict: &Verdict) {
        if let Some((kind, rule)) = &verdict.rule {
            self.count_block(ctx, *kind, Some(rule), true);
        }
    }

    /// Counts a block made whole by a slot or a check (a `BlockError`).
    #[cold]
    fn count_block_error(&self, ctx: &EntryContext<'_>, block: &BlockError) {
        self.count_block(ctx, block.kind(), block.rule_arc(), false);
    }

    /// The rule checks and the user slots among them; the first block wins
    /// (and gives back what earlier checks took: concurrency, hot-parameter
    /// counts, probes).
    #[inline]
    fn check(
        &self,
        ctx: &EntryContext<'_>,
        checks: Checks<'_>,
        verdict: &mut Verdict,
    ) -> Option<Outcome> {
        let mut outcome = Outcome::default();
        let notify = |change: &StateChange<'_>| self.listeners.states.notify(change);
        // Straight-line, in chain order (a loop over the kinds would branch
        // through a jump table on every entry): the user slots placed
        // before each built-in check, then the check.
        let refused = 'checks: {
            let user = |i: usize, verdict: &mut Verdict| match self.chain.checks[i]
                .iter()
                .try_for_each(|slot| slot.entry(ctx))
            {
                Ok(()) => false,
                Err(block) => {
                    self.count_block_error(ctx, &block);
                    verdict.block = Some(block);
                    true
                }
            };
            let rules = checks.resource;
            if user(Check::Authority as usize, verdict) {
                break 'checks true;
            }
            if let Some(rules) = rules
                && !rules.authority.is_empty()
                && let Err(rule) = authority::check(&rules.authority, ctx.origin_name)
            {
                verdict.rule = Some((BlockKind::Authority, rule));
                self.count_rule_block(ctx, verdict);
                break 'checks true;
            }
            if user(Check::System as usize, verdict) {
                break 'checks true;
            }
            if let Some(limits) = checks.system
                && let Err(rule) = limits.check(&self.inbound, &*self.status, ctx.batch, ctx.now_ms)
            {
                // Named with the resource entered, not the rule's.
                let rule = Arc::clone(rule) as Arc<dyn Rule>;
                self.count_block(ctx, BlockKind::System, Some(&rule), true);
                verdict.block = Some(BlockError::new(
                    BlockKind::System,
                    ctx.resource.name_arc().clone(),
                    Some(rule),
                ));
                break 'checks true;
            }
            if user(Check::HotParam as usize, verdict) {
                break 'checks true;
            }
            if let Some(rules) = rules
                && !rules.param.is_empty()
                && let Err(rule) =
                    hotspot::check(&rules.param, ctx, &mut outcome, &mut verdict.holds)
            {
                verdict.rule = Some((BlockKind::HotParam, rule));
                self.count_rule_block(ctx, verdict);
                break 'checks true;
            }
            if user(Check::Flow as usize, verdict) {
                break 'checks true;
            }
            if let Some(rules) = rules
                && !rules.flow.is_empty()
            {
                match flow::check(
                    self,
                    &rules.flow,
                    |o| rules.names_origin(o),
                    ctx,
                    &mut verdict.pass_ms,
                ) {
                    Ok(passed) => {
                        outcome = outcome.merge(passed);
                        if rules.flow_windows {
                            outcome = outcome.with_windows();
                        }
                    }
                    Err(rule) => {
                        verdict.rule = Some((BlockKind::Flow, rule));
                        self.count_rule_block(ctx, verdict);
                        break 'checks true;
                    }
                }
            }
            if user(Check::Degrade as usize, verdict) {
                break 'checks true;
            }
            if let Some(rules) = rules
                && !rules.degrade.is_empty()
            {
                match degrade::check(&rules.degrade, ctx.now_ms, &notify, &mut verdict.holds) {
                    Ok(()) => outcome = outcome.with_breakers(),
                    Err(rule) => {
                        verdict.rule = Some((BlockKind::Degrade, rule));
                        self.count_rule_block(ctx, verdict);
                        break 'checks true;
                    }
                }
            }
            user(Check::ALL.len(), verdict)
        };
        if refused {
            flow::release(ctx, outcome.reserved());
            if outcome.leased()
                && let Some(rules) = checks.resource
            {
                // Refused after flow: every flow rule let it pass.
                flow::give_back(&rules.flow, ctx.batch, ctx.now_ms.max(verdict.pass_ms));
            }
            verdict.holds.give_back(ctx.now_ms, &notify);
            return None;
        }
        Some(outcome)
    }

    /// Counts the completion of an entry that passed.
    #[inline]
    pub(crate) fn exit(&self, active: &mut Active<'_>) {
        let now = self.clock.now_ms();
        let rt = now.saturating_sub(active.start_ms);
        let batch = u64::from(active.batch);
        let error = active.has_error();
        Counted::of(self, active).each(
            #[inline(always)]
            |node| {
                if error {
                    node.add_exception(now, batch);
                }
                node.add_rt_and_success(now, rt, batch);
            },
        );
        if let Some(percentiles) = active.resource.percentiles() {
            percentiles.record(now, rt);
        }
        if active.reserved != 0 {
            self.release_reserved(active);
        }
        if active.breakers {
            self.complete_breakers(active, now, rt, error);
        }
        active.holds.finish();
        if !self.chain.is_empty() {
            let ctx = crate::slot::ExitContext {
                resource: active.resource,
                entry_type: active.entry_type,
                batch: active.batch,
                origin: active.origin,
                origin_name: active.origin_name(),
                rt_ms: rt,
                error,
                now_ms: now,
            };
            for slot in self.chain.all.iter() {
                slot.exit(&ctx);
            }
        }
    }

    // ---- the invocation tree ----

    /// The node of `resource` in the default context, made on first use.
    #[inline]
    fn default_node(&self, resource: &ResourceNode) -> u32 {
        match resource.default_top.get() {
            Some(&node) => node,
            None => self.new_default_node(resource, true),
        }
    }

    #[cold]
    fn new_default_node(&self, resource: &ResourceNode, at_top: bool) -> u32 {
        let _guard = self.tree_lock.lock();
        let node = match resource.default_node.get() {
            Some(&node) => node,
            None => {
                let node = self
                    .nodes
                    .push(TreeNode::new(DEFAULT_CONTEXT_ID, resource.id(), None));
                let _ = resource.default_node.set(node);
                node
            }
        };
        if at_top {
            self.link_top(DEFAULT_CONTEXT_ID, node);
            let _ = resource.default_top.set(node);
        }
        node
    }

    /// The node of `resource` in a named context, made on first use.
    fn node_in_context(&self, resource: &ResourceNode, context: u32) -> u32 {
        if context == DEFAULT_CONTEXT_ID {
            return match resource.default_node.get() {
                Some(&node) => node,
                None => self.new_default_node(resource, false),
            };
        }
        if let Some(node) = resource.context_node(context) {
            return node;
        }
        let _guard = self.tree_lock.lock();
        if let Some(node) = resource.context_node(context) {
            return node;
        }
        let stats = StatisticNode::new(&self.config);
        let node = self
            .nodes
            .push(TreeNode::new(context, resource.id(), Some(stats)));
        let mut map = resource
            .context_nodes
            .load()
            .as_deref()
            .cloned()
            .unwrap_or_default();
        map.insert(context, node);
        resource.context_nodes.store(Some(Arc::new(map)));
        node
    }

    /// A top-level entry's node: under the context's entrance node.
    fn top_node(&self, resource: &ResourceNode, context: u32) -> u32 {
        let node = self.node_in_context(resource, context);
        if let Some(tree_node) = self.nodes.get(node) {
            if !tree_node.at_top.load(Ordering::Acquire) {
                let _guard = self.tree_lock.lock();
                self.link_top(context, node);
            }
        }
        node
    }

    /// A nested entry's node: under its parent's node.
    fn nested_node(&self, resource: &ResourceNode, context: u32, parent: u32) -> u32 {
        let node = self.node_in_context(resource, context);
        if let Some(parent) = self.nodes.get(parent) {
            if !has_child(&parent.children, node) {
                let _guard = self.tree_lock.lock();
                add_child(&parent.children, node);
            }
        }
        node
    }

    /// Hangs `node` under the entrance of `context`. Holds the tree lock.
    fn link_top(&self, context: u32, node: u32) {
        let (Some(entrance), Some(tree_node)) = (self.contexts.get(context), self.nodes.get(node))
        else {
            return;
        };
        if !tree_node.at_top.load(Ordering::Acquire) {
            add_child(&entrance.children, node);
            tree_node.at_top.store(true, Ordering::Release);
        }
    }

    pub(crate) fn tree_node(&self, id: u32) -> Option<&TreeNode> {
        self.nodes.get(id)
    }

    pub(crate) fn tree_nodes(
        &self,
        list: &arc_swap::ArcSwapOption<Vec<u32>>,
    ) -> Vec<ContextNode<'_>> {
        let ids = list.load_full();
        ids.iter()
            .flat_map(|ids| ids.iter())
            .filter_map(|&id| {
                Some(ContextNode {
                    sentinel: self,
                    node: self.nodes.get(id)?,
                })
            })
            .collect()
    }

    pub(crate) fn resource_by_id(&self, id: u32) -> Option<&ResourceNode> {
        self.resources.get(id)
    }

    pub(crate) fn context_name(&self, id: u32) -> &str {
        self.contexts.get(id).map_or(DEFAULT_CONTEXT, |c| &c.name)
    }

    // ---- rules ----

    /// The flow rules of this instance: load, read, listen.
    pub fn flow_rules(&self) -> FlowRules<'_> {
        RuleManager::new(self, &kinds::FLOW)
    }

    /// The authority rules (origin white and black lists) of this instance.
    pub fn authority_rules(&self) -> RuleManager<'_, AuthorityRule> {
        RuleManager::new(self, &kinds::AUTHORITY)
    }

    /// The degrade rules (circuit breakers) of this instance; see also
    /// [`RuleManager::on_state_change`] and [`RuleManager::breakers`].
    pub fn degrade_rules(&self) -> RuleManager<'_, DegradeRule> {
        RuleManager::new(self, &kinds::DEGRADE)
    }

    /// The hot-parameter rules of this instance.
    pub fn param_flow_rules(&self) -> RuleManager<'_, ParamFlowRule> {
        RuleManager::new(self, &kinds::PARAM)
    }

    /// The system rules of this instance.
    pub fn system_rules(&self) -> RuleManager<'_, SystemRule> {
        RuleManager::new(self, &kinds::SYSTEM)
    }

    /// The rule set in force.
    pub(crate) fn rule_set(&self) -> Guard<Arc<RuleSet>> {
        self.rules.load()
    }

    /// The version of the rule set in force (0 before any load).
    pub(crate) fn rules_version(&self) -> u32 {
        self.rules_version.load(Ordering::Acquire)
    }

    /// As [`with_rules`](Self::with_rules), with `None` while no rule was
    /// ever loaded (version 0), without touching the thread's cache.
    #[inline(always)]
    pub(crate) fn with_rules_if_any<T>(
        &self,
        version: u32,
        f: impl FnOnce(Option<&RuleSet>) -> T,
    ) -> T {
        let mut f = Some(f);
        if version != 0 {
            return self.with_rules(
                version,
                #[inline(always)]
                |rules| (f.take().expect("called once"))(Some(rules)),
            );
        }
        (f.take().expect("called once"))(None)
    }

    /// Calls `f` with the rule set of `version` (the one in force). Each
    /// thread caches the set it last used, so while rules stay unchanged
    /// this costs a thread-local read and a compare, where
    /// `ArcSwap::load` costs two locked instructions.
    #[inline(always)]
    fn with_rules<T>(&self, version: u32, f: impl FnOnce(&RuleSet) -> T) -> T {
        let mut f = Some(f);
        let cached = RULES_CACHE.try_with(
            #[inline(always)]
            |cache| {
                let fresh = matches!(
                    cache.try_borrow().as_deref(),
                    Ok(Some((id, v, _))) if *id == self.uid && *v == version
                );
                if !fresh {
                    // Refill, unless a caller up the stack is reading the cache
                    // (a user slot entering a resource from inside a check).
                    *cache.try_borrow_mut().ok()? =
                        Some((self.uid, version, self.rules.load_full()));
                }
                let guard = cache.try_borrow().ok()?;
                let (_, _, set) = guard.as_ref()?;
                Some((f.take()?)(set))
            },
        );
        match (cached, f) {
            (Ok(Some(result)), _) => result,
            (_, Some(f)) => f(&self.rules.load()),
            (_, None) => unreachable!("the closure ran but gave no result"),
        }
    }

    /// Builds and swaps in a new rule set from the one in force, one load at
    /// a time.
    pub(crate) fn update_rules(&self, change: impl FnOnce(&mut RuleSetParts)) -> Arc<RuleSet> {
        let _guard = self.rules_lock.lock();
        let current = self.rules.load_full();
        let version = current.version.wrapping_add(1).max(1);
        let mut parts = current.parts.clone();
        change(&mut parts);
        // Before the set is visible: its rules find their nodes made.
        self.reserve_names(&parts);
        let next = Arc::new(RuleSet::build(version, parts));
        self.rules.store(Arc::clone(&next));
        self.rules_version.store(version, Ordering::Release);
        next
    }

    /// This instance among all.
    pub(crate) fn uid(&self) -> u64 {
        self.uid
    }

    pub(crate) fn resource_id(&self, name: &str) -> Option<u32> {
        self.resources.find(name)
    }

    /// The instance clock's time, in nanoseconds (rate limiters pace with it).
    pub(crate) fn now_nanos(&self) -> u64 {
        self.clock.now_nanos()
    }

    // ---- reading ----

    /// The instance clock's time, in milliseconds.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
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

    /// The node of `resource` in `context` ([`DEFAULT_CONTEXT`] for entries
    /// that named none), if one was entered there.
    pub fn context_node(&self, context: &str, resource: &str) -> Option<ContextNode<'_>> {
        let resource = self.resource_node(resource)?;
        let id = match context {
            DEFAULT_CONTEXT => *resource.default_node.get()?,
            name => resource.context_node(self.contexts.find(name)?)?,
        };
        Some(ContextNode {
            sentinel: self,
            node: self.nodes.get(id)?,
        })
    }

    /// Every context (the default one first) with the nodes entered at its top.
    pub fn entrances(&self) -> Vec<Entrance<'_>> {
        self.contexts
            .iter()
            .map(|node| Entrance {
                sentinel: self,
                node,
            })
            .collect()
    }

    // ---- the switch ----

    /// Turns checking and counting on or off. While off, every entry passes
    /// and nothing is counted (entries made before keep counting their exit).
    pub fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::Relaxed);
        tracing::info!(enabled, "sentinel: switched");
    }

    /// The machine status the system rules read (load average, CPU usage):
    /// the one given to [`SentinelBuilder::system_status`], or `/proc`.
    pub fn system_status(&self) -> &dyn SystemStatus {
        &*self.status
    }

    /// Whether checking and counting are on.
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }
}

impl fmt::Debug for Sentinel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sentinel")
            .field("enabled", &self.is_enabled())
            .field("resources", &self.resources)
            .field("contexts", &self.contexts)
            .field("slots", &self.chain)
            .finish_non_exhaustive()
    }
}

/// What the checks of one entry read.
#[derive(Clone, Copy)]
struct Checks<'r> {
    /// The rules of the entry's resource.
    resource: Option<&'r ResourceRules>,
    /// The system limits, for an inbound entry while any is set.
    system: Option<&'r SystemLimits>,
}

/// What the checks leave beside their outcome: why they refused an entry (a
/// rule of the resource, or a block made whole by its check: a user slot's,
/// a system limit's), or what an entry they let through holds.
#[derive(Default)]
struct Verdict {
    rule: Option<(BlockKind, Arc<dyn Rule>)>,
    block: Option<BlockError>,
    holds: Holds,
    /// Where a passing entry is counted, if later than its clock reading:
    /// the start of a reject rule's bucket that began after it (0: none).
    pass_ms: u64,
}

impl Verdict {
    /// The error of a refused entry.
    #[inline]
    fn take_error(&mut self) -> BlockError {
        match (self.rule.take(), self.block.take()) {
            (Some((kind, rule)), _) => BlockError::by_rule(kind, rule),
            (None, Some(block)) => block,
            (None, None) => unreachable!("a refused entry has its reason"),
        }
    }
}

/// An entry that passed its checks, not counted yet.
struct Checked<'a, 's> {
    resource: &'s ResourceNode,
    node: u32,
    context: u32,
    context_stats: Option<&'s StatisticNode>,
    origin: Option<&'s OriginNode>,
    /// The caller's origin, given or inherited from the parent.
    origin_name: &'a str,
    start_ms: u64,
    /// When the pass is counted, unless it waits: `start_ms`, or later
    /// (see `Verdict::pass_ms`).
    pass_ms: u64,
    wait_ns: u64,
    reserved: u8,
    /// A flow rule of the resource keeps a window of its own.
    windows: bool,
    /// The resource has circuit breakers, to hear of the exit.
    breakers: bool,
    /// The entry spent permits of reject rules' quotas (given back if a
    /// queued entry's wait is cancelled).
    #[cfg(feature = "tokio")]
    leased: bool,
    /// Hot-parameter counts and half-open probes the entry holds.
    holds: Holds,
}

#[cfg(feature = "tokio")]
impl<'s> Checked<'_, 's> {
    /// The same entry without its borrowed origin name (`""`), for a
    /// queued entry that keeps its own copy of the name.
    fn detached(self) -> Checked<'static, 's> {
        Checked {
            resource: self.resource,
            node: self.node,
            context: self.context,
            context_stats: self.context_stats,
            origin: self.origin,
            origin_name: "",
            start_ms: self.start_ms,
            pass_ms: self.pass_ms,
            wait_ns: self.wait_ns,
            reserved: self.reserved,
            windows: self.windows,
            breakers: self.breakers,
            leased: self.leased,
            holds: self.holds,
        }
    }
}

/// Gives back what a checked entry holds if it is never admitted.
#[cfg(feature = "tokio")]
struct Unadmitted<'a, 's> {
    sentinel: &'s Sentinel,
    batch: u32,
    checked: Option<Checked<'a, 's>>,
}

#[cfg(feature = "tokio")]
impl Drop for Unadmitted<'_, '_> {
    fn drop(&mut self) {
        if let Some(mut checked) = self.checked.take() {
            flow::release_nodes(
                checked.resource.stats(),
                checked.origin.map(OriginNode::stats),
                checked.context_stats,
                checked.reserved,
            );
            let sentinel = self.sentinel;
            checked.holds.give_back(sentinel.now_ms(), &|change| {
                sentinel.listeners.states.notify(change)
            });
            if checked.leased {
                let version = sentinel.rules_version.load(Ordering::Acquire);
                sentinel.with_rules(version, |set| {
                    if let Some(rules) = set.for_resource(checked.resource) {
                        flow::give_back(&rules.flow, self.batch, checked.pass_ms);
                    }
                });
            }
        }
    }
}

/// The nodes one entry counts on.
struct Counted<'a> {
    resource: &'a ResourceNode,
    context: Option<&'a StatisticNode>,
    origin: Option<&'a OriginNode>,
    inbound: Option<&'a StatisticNode>,
}

impl<'a> Counted<'a> {
    /// The nodes of an entry: its resource, its context's node, its
    /// origin's, and the inbound total for inbound entries.
    #[inline(always)]
    fn new(
        sentinel: &'a Sentinel,
        resource: &'a ResourceNode,
        context: Option<&'a StatisticNode>,
        origin: Option<&'a OriginNode>,
        entry_type: EntryType,
    ) -> Self {
        Counted {
            resource,
            context,
            origin,
            inbound: (entry_type == EntryType::Inbound).then_some(&sentinel.inbound),
        }
    }

    #[inline(always)]
    fn of(sentinel: &'a Sentinel, active: &Active<'a>) -> Self {
        Self::new(
            sentinel,
            active.resource,
            active.context_stats,
            active.origin,
            active.entry_type,
        )
    }

    /// Calls `f` on every node of the entry: the resource's inline, the
    /// others (context, origin, inbound), when there are any, in a loop.
    #[inline(always)]
    fn each(&self, f: impl Fn(&StatisticNode)) {
        f(self.resource.stats());
        if self.context.is_some() || self.origin.is_some() || self.inbound.is_some() {
            self.each_other(f);
        }
    }

    #[inline(never)]
    fn each_other(&self, f: impl Fn(&StatisticNode)) {
        let origin = self.origin.map(OriginNode::stats);
        for node in [self.context, origin, self.inbound].into_iter().flatten() {
            f(node);
        }
    }
}

/// Settings for a [`Sentinel`] of its own.
#[derive(Default)]
pub struct SentinelBuilder {
    clock: Option<Arc<dyn Clock>>,
    max_resources: Option<usize>,
    max_contexts: Option<usize>,
    max_origins: Option<usize>,
    max_name_len: Option<usize>,
    stat: StatConfig,
    slots: Vec<Arc<dyn Slot>>,
    status: Option<Arc<dyn SystemStatus>>,
}

impl SentinelBuilder {
    /// The clock (default: [`SystemClock`]). Tests pass a
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
    /// ([`ResourceNode::origins_past_cap`]), so a `limit_app: other` flow
    /// rule limits them together (counted in [`Sentinel::refused_origins`]).
    /// Origins named by flow `limit_app` and authority lists are made when
    /// the rule is loaded, outside the cap.
    pub fn max_origins(mut self, max: usize) -> Self {
        self.max_origins = Some(max);
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

    /// The instance.
    pub fn build(self) -> Sentinel {
        let clock = match self.clock {
            None => InstanceClock::System(SystemClock),
            Some(clock) => InstanceClock::Custom(MonotonicClock::new(clock)),
        };
        let max_name_len = self.max_name_len.unwrap_or(DEFAULT_MAX_NAME_LEN);
        let contexts = Registry::new(
            self.max_contexts
                .unwrap_or(DEFAULT_MAX_CONTEXTS)
                .saturating_add(1),
            max_name_len.max(DEFAULT_CONTEXT.len()),
            Overflow::new("contexts"),
        );
        let default =
            contexts.get_or_create(DEFAULT_CONTEXT, |_| EntranceNode::new(DEFAULT_CONTEXT));
        debug_assert_eq!(default.map(|(id, _)| id), Some(DEFAULT_CONTEXT_ID));
        Sentinel {
            clock,
            resources: Registry::new(
                self.max_resources.unwrap_or(DEFAULT_MAX_RESOURCES),
                max_name_len,
                Overflow::new("resources"),
            ),
            contexts,
            nodes: Arena::default(),
            tree_lock: Mutex::new(()),
            inbound: StatisticNode::new(&self.stat),
            chain: SlotChain::new(self.slots),
            enabled: AtomicBool::new(true),
            origin_cap: Arc::new(OriginCap::new(
                self.max_origins.unwrap_or(DEFAULT_MAX_ORIGINS),
                max_name_len,
            )),
            max_name_len,
            named_by_rules: Mutex::new(Vec::new()),
            config: self.stat,
            rules: ArcSwap::from_pointee(RuleSet::default()),
            rules_version: AtomicU32::new(0),
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
            rules_lock: Mutex::new(()),
            listeners: AllListeners::default(),
            status: self.status.unwrap_or_else(|| Arc::new(ProcStatus)),
            blocks: BlockLedger::default(),
            cluster: crate::flow::ClusterHook::default(),
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        // Nothing enters the instance any more: its blocks not taken are
        // of no use.
        tally::forget(self.uid);
    }
}

impl fmt::Debug for SentinelBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelBuilder")
            .field("clock", &self.clock)
            .field("max_resources", &self.max_resources)
            .field("max_contexts", &self.max_contexts)
            .field("max_origins", &self.max_origins)
            .field("max_name_len", &self.max_name_len)
            .field("stat", &self.stat)
            .field("slots", &self.slots)
            .finish()
    }
}
