//! What an adaptive [`RuleManager`] adds: each rule's limit in force, its
//! calls in flight and its RTT estimates.

use super::RuleManager;
use crate::adaptive::{AdaptiveRule, AdaptiveSnapshot};

impl RuleManager<'_, AdaptiveRule> {
    /// Every rule in force with its state now.
    ///
    /// ```
    /// use sentinel_flow_core::adaptive::{AdaptiveAlgorithm, AdaptiveRule};
    /// use sentinel_flow_core::{ManualClock, Sentinel};
    ///
    /// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
    /// let rules = sentinel.adaptive_rules();
    /// rules.load(vec![AdaptiveRule::new("GET:/orders", AdaptiveAlgorithm::aimd())])?;
    /// let _inside = sentinel.entry("GET:/orders").unwrap();
    /// let (_, state) = &rules.limits()[0];
    /// assert_eq!((state.limit, state.in_flight), (20, 1));
    /// # Ok::<(), sentinel_flow_core::RuleErrors>(())
    /// ```
    pub fn limits(&self) -> Vec<(AdaptiveRule, AdaptiveSnapshot)> {
        let set = self.sentinel.rule_set();
        set.parts
            .adaptive
            .by_resource
            .values()
            .flat_map(|list| list.iter())
            .map(|limiter| ((**limiter.rule()).clone(), limiter.snapshot()))
            .collect()
    }
}
