//! How the chain finds a kind's rules for an entry: in the rules it
//! loaded for the entry (`View`), or in the set in force when a hook asks
//! (`Found`).

use std::marker::PhantomData;

use super::list::{Checked, Listed, ResourceRules};
use super::set::RuleSet;
use crate::engine::rules::InstanceRules;
use crate::node::ResourceNode;
use crate::rule::kind::CompiledKind;
use crate::rule::present::Kinds;
use crate::slot::rule_slot::InForce;

/// What the chain finds each kind's rules in, for one entry.
#[derive(Clone, Copy)]
pub(crate) struct View<'r> {
    /// The set in force (`None` before any rule was loaded).
    pub(crate) set: Option<&'r RuleSet>,
    /// The rules of the entry's resource (none of any kind, if it has
    /// none).
    pub(crate) resource: &'r ResourceRules,
    /// The kinds that have something to check for the entry (see
    /// [`ResourceRules::present`]): every other kind is passed over
    /// without a look at its rules.
    pub(crate) present: Kinds,
}

impl<'r> View<'r> {
    /// What the chain finds in `set` for an entry of a resource whose
    /// rules in `set` are `resource` (`none`, rules of no kind, if it has
    /// none), `inbound` or not.
    #[inline(always)]
    pub(crate) fn new(
        set: Option<&'r RuleSet>,
        resource: Option<&'r ResourceRules>,
        none: &'r ResourceRules,
        inbound: bool,
    ) -> Self {
        let present = match resource {
            Some(rules) => rules.present(inbound),
            None => set.map_or(Kinds::NONE, |set| set.inbound().when(inbound)),
        };
        View {
            set,
            resource: resource.unwrap_or(none),
            present,
        }
    }

    /// What kind `K`'s slot reads for the entry; `None`: nothing to check.
    #[inline(always)]
    pub(crate) fn select<K: Listed>(&self) -> Option<&'r Checked<K>> {
        if !self.present.contains(K::KIND) {
            None
        } else if <K::Compiled as CompiledKind>::PER_RESOURCE {
            <K::Compiled as CompiledKind>::select_own(K::own(self.resource))
        } else {
            K::part(&self.set?.parts).select_all()
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
            // The kind's own rules, looked at directly: the hook runs for
            // one kind, whose check asked for it.
            let rules = if <K::Compiled as CompiledKind>::PER_RESOURCE {
                set.for_resource(resource)
                    .map(K::own)
                    .filter(|own| <K::Compiled as CompiledKind>::has_own(own))
                    .and_then(<K::Compiled as CompiledKind>::select_own)
            } else {
                let all = K::part(&set.parts);
                (inbound && all.checks_inbound())
                    .then(|| all.select_all())
                    .flatten()
            };
            if let Some(rules) = rules {
                f(rules);
            }
        });
    }
}
