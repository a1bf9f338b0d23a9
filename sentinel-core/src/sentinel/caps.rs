//! The caps of an instance: the names rule loads reserve outside them, and
//! what an operator reads of them ([`Sentinel::caps`], the refused counts).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::node::ResourceNode;
use crate::node::reserved::{ReservedNames, TooManyNames};
use crate::rule::kind::CompiledKind;
use crate::rule::{RuleError, RuleErrors};
use crate::rules::RuleSetParts;
use crate::rules::list::{EachKind, Listed, each_kind};
use crate::rules::names::NameOf;

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
    /// Nodes made (by entries) for names that a rule in force mentioned
    /// then, outside the cap.
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
    /// Origins over every resource (`max_origins_total`): `used` origin
    /// nodes made by entries in all, `reserved` made because rules name
    /// them (outside it), `refused` entries refused because it was spent
    /// (also counted in `origins.refused`).
    pub origins_total: CapUsage,
    /// The distinct names the rules in force mention (`max_rule_names`):
    /// `used` names in force, `refused` loads refused for mentioning more.
    pub rule_names: CapUsage,
    /// The longest name accepted, in bytes (`max_name_len`).
    pub max_name_len: usize,
}

impl Sentinel {
    /// How many entries ran unchecked and uncounted because their resource
    /// was new past `max_resources`, or its name longer than
    /// `max_name_len`. Resources that rules name are never refused.
    pub fn refused_resources(&self) -> u64 {
        self.engine.parts.nodes.resources.refused()
    }

    /// How many entries named a context new past `max_contexts` (or longer
    /// than `max_name_len`), and ran in the default context instead.
    pub fn refused_contexts(&self) -> u64 {
        self.engine.parts.nodes.tree.contexts.refused()
    }

    /// How many entries named an origin new past `max_origins` of their
    /// resource (or longer than `max_name_len`), over every resource: they
    /// counted on the node that such origins of the resource share
    /// ([`ResourceNode::origins_past_cap`]).
    pub fn refused_origins(&self) -> u64 {
        self.engine.parts.nodes.origin_cap.refused()
    }

    /// The longest name accepted, in bytes (see
    /// [`SentinelBuilder::max_name_len`](crate::SentinelBuilder::max_name_len)).
    pub fn max_name_len(&self) -> usize {
        self.engine.parts.nodes.max_name_len
    }

    /// Whether a loaded rule mentions the resource `name` (its resource, a
    /// relate rule's `ref_resource`), so that its node exists whatever the
    /// cap. A lookup without a lock or an allocation: a cache of names
    /// (such as `sentinel-flow-tower`'s) asks it before refusing a name.
    pub fn is_reserved(&self, name: &str) -> bool {
        self.engine.parts.nodes.names.load().resource(name)
    }

    /// Every cap, how full, and how many entries each refused.
    ///
    /// ```
    /// use sentinel_flow_core::flow::FlowRule;
    /// use sentinel_flow_core::{ManualClock, Sentinel};
    ///
    /// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).max_resources(1).build();
    /// drop(sentinel.entry("a"));
    /// drop(sentinel.entry("b")); // past the cap: unchecked, counted
    /// sentinel.flow_rules().load(vec![FlowRule::new("c", 0.0)])?;
    /// assert!(sentinel.entry("c").is_err(), "a rule's resource is never past the cap");
    /// let caps = sentinel.caps().resources;
    /// assert_eq!((caps.max, caps.used, caps.reserved, caps.refused), (1, 1, 1, 1));
    /// # Ok::<(), sentinel_flow_core::RuleErrors>(())
    /// ```
    pub fn caps(&self) -> Caps {
        let origins = self
            .resource_nodes()
            .map(ResourceNode::origin_counts)
            .fold((0, 0), |(u, r), (used, reserved)| (u + used, r + reserved));
        Caps {
            resources: CapUsage {
                max: self.engine.parts.nodes.resources.cap(),
                used: self.engine.parts.nodes.resources.len()
                    - self.engine.parts.nodes.resources.reserved(),
                reserved: self.engine.parts.nodes.resources.reserved(),
                refused: self.refused_resources(),
            },
            contexts: CapUsage {
                // The default context is made first, by the instance.
                max: self
                    .engine
                    .parts
                    .nodes
                    .tree
                    .contexts
                    .cap()
                    .saturating_sub(1),
                used: (self.engine.parts.nodes.tree.contexts.len()
                    - self.engine.parts.nodes.tree.contexts.reserved())
                .saturating_sub(1),
                reserved: self.engine.parts.nodes.tree.contexts.reserved(),
                refused: self.refused_contexts(),
            },
            origins: CapUsage {
                max: self.engine.parts.nodes.origin_cap.max,
                used: origins.0,
                reserved: origins.1,
                refused: self.refused_origins(),
            },
            origins_total: CapUsage {
                max: self.engine.parts.nodes.origin_cap.budget.max(),
                used: self.engine.parts.nodes.origin_cap.budget.used(),
                reserved: origins.1,
                refused: self.engine.parts.nodes.origin_cap.budget.refused(),
            },
            rule_names: CapUsage {
                max: self.max_rule_names,
                used: self.rule_names(),
                reserved: 0,
                refused: self.refused_rule_loads.load(Ordering::Relaxed),
            },
            max_name_len: self.engine.parts.nodes.max_name_len,
        }
    }

    /// Puts in force the names the rules of `parts` mention (every
    /// resource, context and origin), so that entries make their nodes
    /// outside the caps, and marks the resources named by rules. Runs under
    /// the rules lock, before the set is swapped in. Refused whole, with
    /// nothing changed, past `max_rule_names` distinct names.
    ///
    /// No node is made here: a name costs a node only once an entry uses
    /// it, so a load of new names leaves nothing behind when the next load
    /// drops them. A node once made is kept (outside the cap) for as long
    /// as the instance lives, as in Sentinel: entries, handles and readers
    /// may borrow it that long, and dropping its figures would hide what
    /// the resource did.
    pub(super) fn reserve_names(&self, parts: &RuleSetParts) -> Result<(), RuleErrors> {
        let max = self.max_rule_names;
        /// Every name of every kind's rules, up to the first past the cap.
        struct Reserve<'p> {
            parts: &'p RuleSetParts,
            max: usize,
            reserved: ReservedNames,
            refused: Option<RuleError>,
        }
        impl EachKind for Reserve<'_> {
            fn kind<K: Listed>(&mut self) {
                if self.refused.is_some() {
                    return;
                }
                let rules = K::part(self.parts).rules();
                for (index, names) in rules.iter().map(K::names).enumerate() {
                    let resource = names.first().map_or("", |n| n.name);
                    for name in names.iter() {
                        let added = match name.of {
                            NameOf::Resource => self.reserved.add_resource(name.name, self.max),
                            NameOf::Context => self.reserved.add_context(name.name, self.max),
                            NameOf::Origin => {
                                self.reserved.add_origin(resource, name.name, self.max)
                            }
                        };
                        if let Err(TooManyNames { max }) = added {
                            let message = format!(
                                "the rules in force would mention more than {max} distinct \
                                 names (resources, contexts, origins per resource; \
                                 max_rule_names)"
                            );
                            self.refused = Some(RuleError::new(
                                K::NAME,
                                index,
                                resource,
                                name.field,
                                message,
                            ));
                            return;
                        }
                    }
                }
            }
        }
        // Each resource with rules is named (room for all, up to the cap;
        // a resource with rules of two kinds is counted twice).
        struct Resources<'p>(&'p RuleSetParts, usize);
        impl EachKind for Resources<'_> {
            fn kind<K: Listed>(&mut self) {
                self.1 += K::part(self.0).resources().count();
            }
        }
        let mut resources = Resources(parts, 0);
        each_kind(&mut resources);
        let mut reserve = Reserve {
            parts,
            max,
            reserved: ReservedNames::with_capacity(resources.1.min(max)),
            refused: None,
        };
        each_kind(&mut reserve);
        if let Some(refused) = reserve.refused {
            self.refused_rule_loads.fetch_add(1, Ordering::Relaxed);
            return Err(RuleErrors(vec![refused]));
        }
        let reserved = reserve.reserved;

        // Under the resources' creation lock: a resource made meanwhile is
        // made with the mark of the names in force.
        self.engine.parts.nodes.resources.locked(|| {
            let mut named: Vec<u32> = reserved
                .resources()
                .filter_map(|name| self.engine.parts.nodes.resources.find(name))
                .collect();
            self.engine.parts.nodes.names.store(Arc::new(reserved));
            named.sort_unstable();
            let mut previous = self.named_by_rules.lock();
            for id in previous.iter() {
                if named.binary_search(id).is_err() {
                    if let Some(node) = self.engine.parts.nodes.resources.get(*id) {
                        node.set_named_by_rules(false);
                    }
                }
            }
            for id in &named {
                if let Some(node) = self.engine.parts.nodes.resources.get(*id) {
                    node.set_named_by_rules(true);
                }
            }
            *previous = named;
        });
        Ok(())
    }

    /// The distinct names the rules in force mention (resources, contexts,
    /// origins per resource).
    pub(crate) fn rule_names(&self) -> usize {
        self.engine.parts.nodes.names.load().len()
    }
}
