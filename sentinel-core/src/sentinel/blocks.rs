//! The instance's block counts, gathered from its block ledger.

use super::Sentinel;
use crate::log::BlockCount;

impl Sentinel {
    /// Blocks per resource and kind since the instance was made (exact to
    /// the moment of the call), sorted by resource then kind. Counting them
    /// costs the block path no atomic operation: each thread counts its own,
    /// and this call gathers them.
    ///
    /// ```
    /// use sentinel_flow_core::flow::FlowRule;
    /// use sentinel_flow_core::{BlockKind, ManualClock, Sentinel};
    ///
    /// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
    /// sentinel.flow_rules().load(vec![FlowRule::new("api", 0.0)])?;
    /// assert!(sentinel.entry("api").is_err());
    ///
    /// let counts = sentinel.block_counts();
    /// assert_eq!((counts[0].resource.as_str(), counts[0].kind, counts[0].count), ("api", BlockKind::Flow, 1));
    /// # Ok::<(), sentinel_flow_core::RuleErrors>(())
    /// ```
    pub fn block_counts(&self) -> Vec<BlockCount> {
        self.engine.parts.ledger.counts(self.uid(), self.now_ms())
    }
}
