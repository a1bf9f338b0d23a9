//! Owned, point-in-time views of an instance for operators: every resource
//! with its figures, rules and breakers ([`Sentinel::resources`](crate::Sentinel::resources)), and the
//! invocation tree ([`Sentinel::tree`](crate::Sentinel::tree)).
//!
//! Both are read from the node statistics and the rule set in force, off
//! the entry path: taking one adds nothing to entries.
//!
//! A resource's snapshot also flags a misconfiguration: flow rules in
//! cluster mode on an instance with no cluster service attached
//! ([`ResourceSnapshot::cluster_rules_unattached`]), which fall back to
//! their count on this instance alone (or a pass). Whether an attached
//! service answers is [`Sentinel::cluster_status`](crate::Sentinel::cluster_status).
//!
//! ```
//! use sentinel_flow_core::{ManualClock, Sentinel};
//!
//! let clock = ManualClock::new(1_700_000_000_000);
//! let sentinel = Sentinel::builder().clock(clock.clone()).build();
//! let entry = sentinel.entry("GET:/orders")?;
//! clock.advance_ms(5);
//! drop(entry);
//!
//! let resources = sentinel.resources();
//! assert_eq!(&*resources[0].name, "GET:/orders");
//! assert_eq!(resources[0].stats.pass_qps, 1.0);
//! assert_eq!(resources[0].stats.avg_rt, 5.0);
//!
//! let tree = sentinel.tree();
//! assert_eq!(tree[0].context, sentinel_flow_core::DEFAULT_CONTEXT);
//! assert_eq!(&*tree[0].children[0].resource, "GET:/orders");
//! # Ok::<(), sentinel_flow_core::BlockError>(())
//! ```

use std::sync::Arc;

use crate::adaptive::{AdaptiveRule, AdaptiveSnapshot};
use crate::degrade::{BreakerSnapshot, DegradeRule};
use crate::node::nodes::Nodes;
use crate::node::tree::Sums;
use crate::node::{ContextNode, Entrance, NodeSnapshot};
use crate::rules::RuleSet;
use crate::stat::RtPercentiles;

/// One resource at one instant.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ResourceSnapshot {
    /// The resource's name.
    pub name: Arc<str>,
    /// Its figures over every context and origin: QPS, RT and concurrency
    /// over the second window, totals over the minute window.
    pub stats: NodeSnapshot,
    /// How many rules of each kind guard it.
    pub rules: RuleCounts,
    /// Its circuit breakers, one per degrade rule, in check order.
    pub breakers: Vec<BreakerStatus>,
    /// Its adaptive concurrency rules, each with its limit in force and
    /// calls in flight, in check order.
    pub adaptive: Vec<AdaptiveStatus>,
    /// Its response-time percentiles over the last minute, when tracked
    /// ([`Sentinel::track_percentiles`](crate::Sentinel::track_percentiles)); `None` otherwise.
    pub percentiles: Option<RtPercentiles>,
    /// Whether a loaded rule mentions it, so that its node exists outside
    /// the resource cap ([`Sentinel::is_reserved`](crate::Sentinel::is_reserved)).
    pub named_by_rules: bool,
    /// Entries refused an origin node on it: their origin was new past
    /// `max_origins` (or over the name length limit). The instance's other
    /// caps are read with [`Sentinel::caps`](crate::Sentinel::caps).
    pub refused_origins: u64,
    /// Its flow rules in cluster mode that fall back (their count on this
    /// instance alone, or a pass) because the instance has no cluster
    /// service attached
    /// ([`ClusterStatus::NotAttached`](crate::flow::ClusterStatus::NotAttached)):
    /// a misconfiguration, 0 while a service is attached. A service that
    /// is attached but cannot answer is another case, shown by
    /// [`Sentinel::cluster_status`](crate::Sentinel::cluster_status) and by the service's own state (e.g.
    /// `sentinel-flow-cluster`'s `fallback`).
    pub cluster_rules_unattached: usize,
    /// Its hot-parameter rules in cluster mode that count each value on
    /// this instance alone, attached service or not: those of the
    /// concurrency grade (the cluster counts the values of QPS rules).
    pub cluster_param_rules_local: usize,
}

/// How many rules of each kind guard one resource. System rules guard
/// every inbound entry and are not counted per resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuleCounts {
    /// Flow rules.
    pub flow: usize,
    /// Degrade rules (circuit breakers).
    pub degrade: usize,
    /// Hot-parameter rules.
    pub param_flow: usize,
    /// Authority rules.
    pub authority: usize,
    /// Adaptive concurrency rules.
    pub adaptive: usize,
    /// Of the flow rules, those in cluster mode.
    pub cluster_flow: usize,
}

/// One circuit breaker: its rule and where it stands.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct BreakerStatus {
    /// The degrade rule of the breaker.
    pub rule: Arc<DegradeRule>,
    /// Its state and window.
    pub snapshot: BreakerSnapshot,
}

/// One adaptive concurrency rule: the rule and its state.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct AdaptiveStatus {
    /// The adaptive rule.
    pub rule: Arc<AdaptiveRule>,
    /// Its limit in force, calls in flight and RTT estimates.
    pub state: AdaptiveSnapshot,
}

/// One context of the invocation tree.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct TreeSnapshot {
    /// The context's name ([`DEFAULT_CONTEXT`](crate::DEFAULT_CONTEXT) for
    /// entries that named none).
    pub context: String,
    /// The sum of its top nodes, as Sentinel's `EntranceNode`.
    pub stats: NodeSnapshot,
    /// The resources entered at the top of the context.
    pub children: Vec<TreeNodeSnapshot>,
}

/// One resource as seen from one context, and what was entered inside it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct TreeNodeSnapshot {
    /// The resource.
    pub resource: Arc<str>,
    /// Its figures in this context (for the default context: the
    /// resource's less its named contexts').
    pub stats: NodeSnapshot,
    /// The nodes entered while an entry of this one was active. A resource
    /// entered inside itself appears once: the cycle is cut.
    pub children: Vec<TreeNodeSnapshot>,
}

/// The sum of an entrance's top nodes, as [`Entrance::snapshot`](crate::node::Entrance::snapshot)
/// computes it, from figures already read (reading them again would double
/// the cost of a tree).
/// Every resource of `nodes` with its figures at `now`, its rules and
/// breakers in `set`, and its percentiles; `attached`: a cluster service
/// is attached.
pub(crate) fn resources(
    nodes: &Nodes,
    set: &RuleSet,
    attached: bool,
    now: u64,
) -> Vec<ResourceSnapshot> {
    // One histogram for every tracked resource, made on the first.
    let mut tally = None;
    nodes
        .resources
        .iter()
        .map(|node| {
            let rules = set.for_resource(node);
            let cluster_flow =
                rules.map_or(0, |r| r.flow.iter().filter(|c| c.in_cluster_mode()).count());
            ResourceSnapshot {
                name: Arc::clone(node.name_arc()),
                stats: Sums::of(node.stats(), now).snapshot(),
                rules: rules.map_or_else(RuleCounts::default, |r| RuleCounts {
                    flow: r.flow.len(),
                    degrade: r.degrade.len(),
                    param_flow: r.param_flow.len(),
                    authority: r.authority.len(),
                    adaptive: r.adaptive.len(),
                    cluster_flow,
                }),
                breakers: rules.map_or_else(Vec::new, |r| {
                    r.degrade
                        .iter()
                        .map(|breaker| BreakerStatus {
                            rule: Arc::clone(breaker.rule()),
                            snapshot: breaker.snapshot(now),
                        })
                        .collect()
                }),
                adaptive: rules.map_or_else(Vec::new, |r| {
                    r.adaptive
                        .iter()
                        .map(|limiter| AdaptiveStatus {
                            rule: Arc::clone(limiter.rule()),
                            state: limiter.snapshot(),
                        })
                        .collect()
                }),
                percentiles: node.rt_percentiles_in(now, &mut tally),
                named_by_rules: node.is_named_by_rules(),
                refused_origins: node.refused_origins(),
                cluster_rules_unattached: if attached { 0 } else { cluster_flow },
                cluster_param_rules_local: rules.map_or(0, |r| {
                    r.param_flow
                        .iter()
                        .filter(|c| c.rule().cluster_mode && c.cluster().is_none())
                        .count()
                }),
            }
        })
        .collect()
}

/// The tree under `entrances` at `now`.
pub(crate) fn tree(entrances: &[Entrance<'_>], now: u64) -> Vec<TreeSnapshot> {
    let mut path = Vec::new();
    entrances
        .iter()
        .map(|entrance| {
            let children: Vec<TreeNodeSnapshot> = entrance
                .children()
                .iter()
                .map(|child| tree_node(child, now, &mut path))
                .collect();
            TreeSnapshot {
                context: entrance.name().to_owned(),
                stats: entrance_sum(&children),
                children,
            }
        })
        .collect()
}

fn entrance_sum(children: &[TreeNodeSnapshot]) -> NodeSnapshot {
    NodeSnapshot::sum(children.iter().map(|c| &c.stats))
}

/// `node` and its descendants; `path` holds its ancestors (context and
/// resource ids, which name a tree node), to cut cycles.
fn tree_node(node: &ContextNode<'_>, now: u64, path: &mut Vec<(u32, u32)>) -> TreeNodeSnapshot {
    path.push((node.node.context, node.node.resource));
    let mut children = Vec::new();
    for child in node.children() {
        if !path.contains(&(child.node.context, child.node.resource)) {
            children.push(tree_node(&child, now, path));
        }
    }
    path.pop();
    let resource = node
        .nodes
        .resource_by_id(node.node.resource)
        .map_or_else(|| Arc::from(""), |r| Arc::clone(r.name_arc()));
    TreeNodeSnapshot {
        resource,
        stats: node.sums(now).snapshot(),
        children,
    }
}
