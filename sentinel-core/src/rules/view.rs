//! How the chain finds a kind's rules for an entry: in the rules it
//! loaded for the entry (`View`), or in the set in force when a hook asks
//! (`Found`).

use std::marker::PhantomData;

use super::list::{Checked, Listed, ResourceRules};
use super::set::RuleSet;
use crate::engine::rules::InstanceRules;
use crate::node::ResourceNode;
use crate::rule::kind::CompiledKind;
use crate::slot::rule_slot::InForce;

/// What the chain finds each kind's rules in, for one entry.
#[derive(Clone, Copy)]
pub(crate) struct View<'r> {
    /// The set in force (`None` before any rule was loaded).
    pub(crate) set: Option<&'r RuleSet>,
    /// The rules of the entry's resource, if it has any.
    pub(crate) resource: Option<&'r ResourceRules>,
    /// The entry is inbound.
    pub(crate) inbound: bool,
}

impl<'r> View<'r> {
    /// What kind `K`'s slot reads for the entry; `None`: nothing to check.
    #[inline(always)]
    pub(crate) fn select<K: Listed>(&self) -> Option<&'r Checked<K>> {
        if <K::Compiled as CompiledKind>::PER_RESOURCE {
            <K::Compiled as CompiledKind>::select_own(K::own(self.resource?))
        } else if self.inbound {
            K::part(&self.set?.parts).select_all()
        } else {
            None
        }
    }
}

/// Where kind `K`'s rules for an entry's resource are found, in the set
/// in force, when a hook asks (at admission, at the exit).
pub(crate) struct Found<'r, K> {
    rules: &'r InstanceRules,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Found<'_, K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Found<'_, K> {}

impl<'r, K> Found<'r, K> {
    /// Kind `K`'s rules in `rules`.
    #[inline(always)]
    pub(crate) fn new(rules: &'r InstanceRules) -> Self {
        Found {
            rules,
            kind: PhantomData,
        }
    }
}

impl<K: Listed> InForce<Checked<K>> for Found<'_, K> {
    #[inline(always)]
    fn with(&self, resource: &ResourceNode, inbound: bool, f: impl FnOnce(&Checked<K>)) {
        let version = self.rules.rules_version();
        self.rules.with_rules(version, |set| {
            let view = View {
                set: Some(set),
                resource: set.for_resource(resource),
                inbound,
            };
            if let Some(rules) = view.select::<K>() {
                f(rules);
            }
        });
    }
}
