//! Response-time percentiles per resource, turned on by code or by the
//! rule file.

use super::Sentinel;
use crate::stat::{BY_CODE, BY_RULES};

impl Sentinel {
    /// Turns response-time percentiles of `name` on or off (the resource is
    /// made if new, as a [`Resource`](crate::Resource) handle makes it). While on, every exit
    /// records its response time, and [`resources`](Self::resources), the
    /// resource node's [`rt_percentiles`](crate::node::ResourceNode::rt_percentiles) and
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
    /// use sentinel_flow_core::{ManualClock, Sentinel};
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
    /// # Ok::<(), sentinel_flow_core::BlockError>(())
    /// ```
    pub fn track_percentiles(&self, name: &str, on: bool) -> bool {
        let node = match on {
            true => self.engine.parts.nodes.resolve_quietly(name),
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
    /// `names` leaves out, unless code turned them on too. `sentinel-flow-rules`
    /// calls it with the file's `track_percentiles` list on every load.
    ///
    /// Returns the names that are not tracked because they are past the
    /// resource cap.
    pub fn track_percentiles_from_rules<S: AsRef<str>>(&self, names: &[S]) -> Vec<String> {
        // One rule load at a time, as for rules.
        let _guard = self.engine.rules.lock.lock();
        let mut refused = Vec::new();
        let mut listed = Vec::with_capacity(names.len());
        for name in names {
            match self.engine.parts.nodes.resolve_quietly(name.as_ref()) {
                Some(node) => {
                    node.track_percentiles_by(BY_RULES, true);
                    listed.push(node.id());
                }
                None => refused.push(name.as_ref().to_owned()),
            }
        }
        listed.sort_unstable();
        for node in self.resource_nodes() {
            let by_rules = node.percentiles().is_some_and(|p| p.set_by(BY_RULES));
            if by_rules && listed.binary_search(&node.id()).is_err() {
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
}
