//! `Engine`: what entries and exits run on, owned by the facade
//! ([`Sentinel`](crate::Sentinel)) and held by every `Entry` guard (one
//! pointer). It owns the components (`parts.rs`: clock, nodes, block
//! ledger, cluster hook, breaker state listeners, machine status), the
//! user slots, the rules in force with their per-thread cache
//! (`rules.rs`), and the switch. The chain (`slot/chain.rs`) takes the
//! engine; everything below it takes the component it needs.

pub(crate) mod parts;
pub(crate) mod rules;

use std::sync::atomic::{AtomicBool, Ordering};

use crate::node::ResourceNode;
use crate::slot::UserSlots;
use parts::Parts;
use rules::InstanceRules;

/// The entry path's state of one instance.
pub(crate) struct Engine {
    /// The components the checks read.
    pub(crate) parts: Parts,
    /// The application's slots, placed by order.
    pub(crate) slots: UserSlots,
    /// The rule set in force, swapped as one.
    pub(crate) rules: InstanceRules,
    /// Checking and counting on (see `Sentinel::set_enabled`).
    pub(crate) enabled: AtomicBool,
}

impl Engine {
    /// Whether checking and counting are on.
    #[inline]
    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// The node of a resource given by a handle (`Some(resolved)`), or by
    /// name; `None` past the resource cap.
    #[inline(always)]
    pub(crate) fn resource_of<'s>(
        &'s self,
        name: &str,
        resolved: Option<Option<&'s ResourceNode>>,
    ) -> Option<&'s ResourceNode> {
        match resolved {
            Some(Some(resolved)) => Some(resolved),
            Some(None) => self.parts.nodes.resolve_late(name),
            None => self.parts.nodes.resolve(name),
        }
    }
}
