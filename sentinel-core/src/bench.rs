//! The engine's counters as the `benches` crate measures them, behind the
//! `bench-internals` feature. Not a public API: an application never
//! writes a count, and this module changes in any release.

use crate::node::StatisticNode;
use crate::stat::StatConfig;

/// The striped counter under the nodes' batch counts.
#[derive(Debug, Default)]
pub struct Adder(crate::stat::Adder);

impl Adder {
    /// A counter at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one.
    #[inline]
    pub fn increment(&self) {
        self.0.add(1);
    }

    /// The current total.
    pub fn sum(&self) -> u64 {
        self.0.sum()
    }
}

/// A statistic node of its own, written as the slot chain writes one.
#[derive(Debug)]
pub struct Node(StatisticNode);

impl Node {
    /// An empty node with the windows of `config`.
    pub fn new(config: &StatConfig) -> Self {
        Node(StatisticNode::new(config))
    }

    /// Counts a call of `n` requests let through at `now`.
    #[inline(always)]
    pub fn add_pass(&self, now: u64, n: u64) {
        self.0.add_pass(now, n);
    }

    /// The node's reads.
    pub fn stats(&self) -> &StatisticNode {
        &self.0
    }
}
