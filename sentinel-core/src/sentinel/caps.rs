//! The caps of an instance: the names rule loads reserve outside them, and
//! what an operator reads of them ([`Sentinel::caps`], the refused counts).

use crate::node::ResourceNode;
use crate::node::tree::EntranceNode;
use crate::rules::RuleSetParts;
use crate::rules::names::{self, NameOf, RuleName};

use super::Sentinel;

/// How full one cap is. `used` names were made by entries and count
/// against `max`; `reserved` were made by rule loads, outside it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CapUsage {
    /// The cap (for origins: per resource).
    pub max: usize,
    /// Names made by entries (for origins: over every resource).
    pub used: usize,
    /// Names made because a loaded rule mentions them, outside the cap.
    pub reserved: usize,
    /// Entries refused a node: new names past the cap, or names longer
    /// than the limit.
    pub refused: u64,
}

/// Every cap of an instance, read at one call ([`Sentinel::caps`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Caps {
    /// Resources (`max_resources`).
    pub resources: CapUsage,
    /// Named contexts (`max_contexts`; the default context not counted).
    pub contexts: CapUsage,
    /// Origins (`max_origins`, per resource).
    pub origins: CapUsage,
    /// The longest name accepted, in bytes (`max_name_len`).
    pub max_name_len: usize,
}

impl Sentinel {
    /// How many entries ran unchecked and uncounted because their resource
    /// was new past `max_resources`, or its name longer than
    /// `max_name_len`. Resources that rules name are never refused.
    pub fn refused_resources(&self) -> u64 {
        self.resources.refused()
    }

    /// How many entries named a context new past `max_contexts` (or longer
    /// than `max_name_len`), and ran in the default context instead.
    pub fn refused_contexts(&self) -> u64 {
        self.tree.contexts.refused()
    }

    /// How many entries named an origin new past `max_origins` of their
    /// resource (or longer than `max_name_len`), over every resource: they
    /// counted on the node that such origins of the resource share
    /// ([`ResourceNode::origins_past_cap`]).
    pub fn refused_origins(&self) -> u64 {
        self.origin_cap.refused()
    }

    /// The longest name accepted, in bytes (see
    /// [`SentinelBuilder::max_name_len`](crate::SentinelBuilder::max_name_len)).
    pub fn max_name_len(&self) -> usize {
        self.max_name_len
    }

    /// Whether a loaded rule mentions the resource `name` (its resource, a
    /// relate rule's `ref_resource`), so that its node exists whatever the
    /// cap. A lookup without a lock or an allocation: a cache of names
    /// (such as `sentinel-tower`'s) asks it before refusing a name.
    pub fn is_reserved(&self, name: &str) -> bool {
        self.resources
            .find(name)
            .and_then(|id| self.resources.get(id))
            .is_some_and(ResourceNode::is_named_by_rules)
    }

    /// Every cap, how full, and how many entries each refused.
    ///
    /// ```
    /// use sentinel_core::flow::FlowRule;
    /// use sentinel_core::{ManualClock, Sentinel};
    ///
    /// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).max_resources(1).build();
    /// drop(sentinel.entry("a"));
    /// drop(sentinel.entry("b")); // past the cap: unchecked, counted
    /// sentinel.flow_rules().load(vec![FlowRule::new("c", 0.0)])?;
    /// assert!(sentinel.entry("c").is_err(), "a rule's resource is never past the cap");
    /// let caps = sentinel.caps().resources;
    /// assert_eq!((caps.max, caps.used, caps.reserved, caps.refused), (1, 1, 1, 1));
    /// # Ok::<(), sentinel_core::RuleErrors>(())
    /// ```
    pub fn caps(&self) -> Caps {
        let origins = self
            .resource_nodes()
            .map(ResourceNode::origin_counts)
            .fold((0, 0), |(u, r), (used, reserved)| (u + used, r + reserved));
        Caps {
            resources: CapUsage {
                max: self.resources.cap(),
                used: self.resources.len() - self.resources.reserved(),
                reserved: self.resources.reserved(),
                refused: self.refused_resources(),
            },
            contexts: CapUsage {
                // The default context is made first, by the instance.
                max: self.tree.contexts.cap().saturating_sub(1),
                used: (self.tree.contexts.len() - self.tree.contexts.reserved()).saturating_sub(1),
                reserved: self.tree.contexts.reserved(),
                refused: self.refused_contexts(),
            },
            origins: CapUsage {
                max: self.origin_cap.max,
                used: origins.0,
                reserved: origins.1,
                refused: self.refused_origins(),
            },
            max_name_len: self.max_name_len,
        }
    }

    /// Makes the node of every resource, context and origin the rules of
    /// `parts` mention, outside the caps, and marks the resources named by
    /// rules. Runs under the rules lock, before the set is swapped in.
    ///
    /// A node whose rules a later load drops is kept (and stays outside the
    /// cap): entries may hold it, nodes are never freed while the instance
    /// lives (as in Sentinel), and dropping its figures would hide what
    /// the resource did. Reserved nodes are bounded by the distinct names
    /// rules ever mentioned.
    pub(super) fn reserve_names(&self, parts: &RuleSetParts) {
        let mut named = Vec::new();
        let mut each = |names: Vec<RuleName<'_>>| {
            let resource = names.first().map(|n| n.name);
            for name in &names {
                match name.of {
                    NameOf::Resource => named.extend(self.reserve_resource(name.name)),
                    NameOf::Context => {
                        let context = name.name;
                        self.tree
                            .contexts
                            .reserve(context, |_| EntranceNode::new(context));
                    }
                    NameOf::Origin => {
                        if let Some(id) = resource.and_then(|r| self.reserve_resource(r)) {
                            if let Some(node) = self.resources.get(id) {
                                node.reserve_origin(name.name);
                            }
                        }
                    }
                }
            }
        };
        parts.flow.rules.iter().for_each(|r| each(names::flow(r)));
        parts
            .degrade
            .rules
            .iter()
            .for_each(|r| each(names::degrade(r)));
        parts.param.rules.iter().for_each(|r| each(names::param(r)));
        let authority = &parts.authority.rules;
        authority.iter().for_each(|r| each(names::authority(r)));

        named.sort_unstable();
        named.dedup();
        let mut previous = self.named_by_rules.lock();
        for id in previous.iter() {
            if named.binary_search(id).is_err() {
                if let Some(node) = self.resources.get(*id) {
                    node.set_named_by_rules(false);
                }
            }
        }
        for id in &named {
            if let Some(node) = self.resources.get(*id) {
                node.set_named_by_rules(true);
            }
        }
        *previous = named;
    }

    /// The id of the node of `name`, made outside the cap if new.
    fn reserve_resource(&self, name: &str) -> Option<u32> {
        let (config, origin_cap) = (&self.config, &self.origin_cap);
        self.resources
            .reserve(name, |id| ResourceNode::new(name, id, config, origin_cap))
            .map(|(id, _)| id)
    }
}
