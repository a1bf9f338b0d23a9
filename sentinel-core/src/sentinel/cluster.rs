//! The instance's cluster service: given, taken away, asked about.

use std::sync::Arc;

use super::Sentinel;
use crate::flow::{
    ClusterEndpoint, ClusterStatus, ClusterTokens, FlowKind, FlowRule,
    warn_unattached_cluster_rules as warn,
};

impl Sentinel {
    /// Gives the instance the service that cluster rules ask for permits
    /// (`None` takes it away: every cluster rule then falls back). Rules
    /// in cluster mode without a service are decided by their fallback:
    /// taking the service away while such rules are in force logs a
    /// warning naming their resources.
    pub fn set_cluster_tokens(&self, tokens: Option<Arc<dyn ClusterTokens>>) {
        let detaching = tokens.is_none();
        let was_attached = self.engine.parts.cluster.set(tokens, self.now_ms());
        if detaching && was_attached {
            warn(
                self.rule_set().rules_of::<FlowKind>(),
                "the cluster service was taken away",
            );
        }
    }

    /// Whether the instance has a cluster service.
    pub fn has_cluster_tokens(&self) -> bool {
        self.engine.parts.cluster.is_attached()
    }

    /// Whether a cluster service is attached, and whether it answers now.
    /// Read off the entry path (it asks the service); entries never call it.
    pub fn cluster_status(&self) -> ClusterStatus {
        self.engine.parts.cluster.status()
    }

    /// Where the attached cluster service asks for permits, as it says
    /// ([`ClusterTokens::endpoint`]); `None` without a service or when it
    /// does not say. Read off the entry path.
    pub fn cluster_endpoint(&self) -> Option<ClusterEndpoint> {
        self.engine.parts.cluster.endpoint()
    }

    /// When a cluster service was last given or taken away
    /// ([`set_cluster_tokens`](Self::set_cluster_tokens)), in the
    /// instance's clock's ms; `None` if never.
    pub fn cluster_changed_ms(&self) -> Option<u64> {
        self.engine.parts.cluster.changed_ms()
    }

    /// Warns when `rules` (the flow rules just put in force) have rules in
    /// cluster mode while no cluster service is attached.
    pub(crate) fn warn_unattached_cluster_rules(&self, rules: &[FlowRule]) {
        if !self.has_cluster_tokens() {
            warn(rules, "no cluster service is attached");
        }
    }
}
