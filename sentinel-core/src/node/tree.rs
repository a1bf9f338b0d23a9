//! The invocation tree: one entrance node per context, and under it one
//! node per (context, resource), children following the nesting of entries.
//!
//! A node in a named context keeps its own statistics. A node in the default
//! context does not: every entry counts on its resource node and on exactly
//! one context node, so the default context's share of a resource is the
//! resource's statistics minus those of its named-context nodes. Reading it
//! costs a subtraction; the common path (no context named) counts once per
//! entry instead of twice, and a resource pays for one set of windows.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use arc_swap::ArcSwapOption;

use super::statistic::{NodeSnapshot, StatisticNode};

/// An entrance node: the root of one context's tree.
pub(crate) struct EntranceNode {
    pub(crate) name: Arc<str>,
    pub(crate) children: ArcSwapOption<Vec<u32>>,
}

impl EntranceNode {
    pub(crate) fn new(name: &str) -> Self {
        EntranceNode {
            name: name.into(),
            children: ArcSwapOption::empty(),
        }
    }
}

/// A node of the tree: a resource as seen from one context.
pub(crate) struct TreeNode {
    pub(crate) context: u32,
    pub(crate) resource: u32,
    /// `None` in the default context: derived from the resource node.
    pub(crate) stats: Option<StatisticNode>,
    pub(crate) children: ArcSwapOption<Vec<u32>>,
    /// Whether the node hangs under its context's entrance node.
    pub(crate) at_top: AtomicBool,
}

impl TreeNode {
    pub(crate) fn new(context: u32, resource: u32, stats: Option<StatisticNode>) -> Self {
        TreeNode {
            context,
            resource,
            stats,
            children: ArcSwapOption::empty(),
            at_top: AtomicBool::new(false),
        }
    }
}

/// Adds `child` to `list` unless it is there. Callers serialise writers.
pub(crate) fn add_child(list: &ArcSwapOption<Vec<u32>>, child: u32) {
    let current = list.load_full();
    let mut next = current.as_deref().cloned().unwrap_or_default();
    if !next.contains(&child) {
        next.push(child);
        list.store(Some(Arc::new(next)));
    }
}

/// Whether `child` is in `list`.
pub(crate) fn has_child(list: &ArcSwapOption<Vec<u32>>, child: u32) -> bool {
    list.load().as_ref().is_some_and(|c| c.contains(&child))
}

/// Raw sums of a node at one instant, which subtract exactly.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sums {
    second: [u64; 6],
    minute: [u64; 4],
    concurrency: i64,
    min_rt: u64,
    second_secs: f64,
}

impl Sums {
    pub(crate) fn of(node: &StatisticNode, now: u64) -> Self {
        use crate::stat::MetricEvent::*;
        let s = node.second_sums(now);
        let m = node.minute_sums(now);
        Sums {
            second: [Pass, Block, Success, Exception, Rt, OccupiedPass].map(|e| s[e.lane()]),
            minute: [Pass, Block, Success, Exception].map(|e| m[e.lane()]),
            concurrency: node.concurrency_signed(),
            min_rt: node.min_rt(now),
            second_secs: node.second_interval_secs(),
        }
    }

    /// `self` less `other`, never below zero (reads race with writers).
    pub(crate) fn minus(mut self, other: &Sums) -> Self {
        for (a, b) in self.second.iter_mut().zip(other.second) {
            *a = a.saturating_sub(b);
        }
        for (a, b) in self.minute.iter_mut().zip(other.minute) {
            *a = a.saturating_sub(b);
        }
        self.concurrency -= other.concurrency;
        self
    }

    pub(crate) fn snapshot(&self) -> NodeSnapshot {
        let [pass, block, success, exception, rt, _occupied] = self.second;
        let [total_pass, total_block, total_success, total_exception] = self.minute;
        let per_second = |n: u64| n as f64 / self.second_secs;
        NodeSnapshot {
            pass_qps: per_second(pass),
            block_qps: per_second(block),
            success_qps: per_second(success),
            exception_qps: per_second(exception),
            avg_rt: if success == 0 {
                0.0
            } else {
                rt as f64 / success as f64
            },
            min_rt: self.min_rt,
            concurrency: self.concurrency.max(0) as u64,
            total_pass,
            total_block,
            total_success,
            total_exception,
        }
    }
}

impl crate::node::registry::Named for EntranceNode {
    fn name(&self) -> &str {
        &self.name
    }
}
