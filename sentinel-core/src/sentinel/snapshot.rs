//! Point-in-time views of the instance (`crate::snapshot` makes them).

use super::Sentinel;
use crate::snapshot::{self, ResourceSnapshot, TreeSnapshot};

impl Sentinel {
    /// Every resource entered so far, in order of first entry, with its
    /// figures, rules, breakers and (when tracked) percentiles now.
    pub fn resources(&self) -> Vec<ResourceSnapshot> {
        snapshot::resources(
            &self.engine.parts.nodes,
            &self.rule_set(),
            self.has_cluster_tokens(),
            self.now_ms(),
        )
    }

    /// The invocation tree now: every context (the default one first) with
    /// the nodes entered at its top and, under each, the nodes entered
    /// inside it.
    pub fn tree(&self) -> Vec<TreeSnapshot> {
        snapshot::tree(&self.entrances(), self.now_ms())
    }
}
