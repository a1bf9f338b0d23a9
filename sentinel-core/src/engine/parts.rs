//! `Parts`: the components an entry's checks and holds read, each owned
//! once by the [`Engine`](super::Engine): the clock, the nodes, the
//! machine's status, the block ledger, the cluster hook and the breakers'
//! state listeners. A slot is handed these, never the instance; a
//! function below the chain takes the one component it needs.

use std::sync::Arc;

use crate::clock::instance::InstanceClock;
use crate::degrade::StateListeners;
use crate::flow::ClusterHook;
use crate::log::BlockLedger;
use crate::node::nodes::Nodes;
use crate::system::SystemStatus;

/// What the checks of an entry read besides its rules.
pub(crate) struct Parts {
    /// The instance's time.
    pub(crate) clock: InstanceClock,
    /// Resources, the invocation tree, the inbound total.
    pub(crate) nodes: Nodes,
    /// Load and CPU readings for system rules.
    pub(crate) status: Arc<dyn SystemStatus>,
    /// Blocks per resource and kind, and per second for the block log.
    pub(crate) ledger: BlockLedger,
    /// The service cluster flow rules ask for permits.
    pub(crate) cluster: ClusterHook,
    /// Listeners of breaker states.
    pub(crate) states: StateListeners,
    /// This instance among all (the per-thread block tally and rule cache
    /// key on it).
    pub(crate) uid: u64,
}
