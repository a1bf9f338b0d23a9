//! The list of kinds (`crate::kinds`) made into code: where each kind's
//! part of the rule set, its per-resource rules and its listeners are
//! (`Listed`), a visit of every kind in chain order (`each_kind`), and how
//! the chain finds a kind's rules for an entry (`View`, `Found`).

use std::marker::PhantomData;
use std::sync::Arc;

use super::listeners::{AllListeners, Listeners};
use super::set::{ResourceRules, RuleSet, RuleSetParts};
use crate::Sentinel;
use crate::node::ResourceNode;
use crate::rule::kind::{CompiledKind, RuleKind};
use crate::slot::rule_slot::InForce;

/// What a kind's slot reads for one entry.
pub(crate) type Checked<K> = <<K as RuleKind>::Compiled as CompiledKind>::Checked;

/// A resource's rules of a kind.
pub(crate) type PerResource<K> = <<K as RuleKind>::Compiled as CompiledKind>::PerResource;

/// A kind of the list: where the instance keeps its parts.
pub(crate) trait Listed: RuleKind {
    /// The kind's compiled rules in `parts`.
    fn part(parts: &RuleSetParts) -> &Arc<Self::Compiled>;
    /// The same, to replace.
    fn part_mut(parts: &mut RuleSetParts) -> &mut Arc<Self::Compiled>;
    /// A resource's rules of the kind.
    fn own(rules: &ResourceRules) -> &PerResource<Self>;
    /// The instance's listeners of the kind's rules.
    fn listeners(all: &AllListeners) -> &Listeners<Self::Rule>;
}

/// Something done for every kind, in chain order.
pub(crate) trait EachKind {
    /// Does it for kind `K`.
    fn kind<K: Listed>(&mut self);
}

macro_rules! listed {
    ($($field:ident $variant:ident [$($kind:tt)*] [$($rule:tt)*] $accessor:ident $name:literal $exception:literal
        $doc:literal $book_doc:literal;)*) => {
        $(
            impl Listed for crate::$($kind)* {
                #[inline(always)]
                fn part(parts: &RuleSetParts) -> &Arc<Self::Compiled> {
                    &parts.$field
                }
                fn part_mut(parts: &mut RuleSetParts) -> &mut Arc<Self::Compiled> {
                    &mut parts.$field
                }
                #[inline(always)]
                fn own(rules: &ResourceRules) -> &PerResource<Self> {
                    &rules.$field
                }
                fn listeners(all: &AllListeners) -> &Listeners<Self::Rule> {
                    &all.$field
                }
            }
        )*

        /// Calls `visit` for every kind, in chain order.
        pub(crate) fn each_kind(visit: &mut impl EachKind) {
            $(visit.kind::<crate::$($kind)*>();)*
        }

        /// How many kinds.
        pub(crate) const KIND_COUNT: usize = [$($name),*].len();
    };
}
rule_kinds!(listed);

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
pub(crate) struct Found<K>(PhantomData<fn() -> K>);

impl<K: Listed> InForce<Checked<K>> for Found<K> {
    #[inline(always)]
    fn with(
        sentinel: &Sentinel,
        resource: &ResourceNode,
        inbound: bool,
        f: impl FnOnce(&Checked<K>),
    ) {
        let version = sentinel.rules_version();
        sentinel.with_rules(version, |set| {
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
