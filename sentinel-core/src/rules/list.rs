//! The list of kinds (`crate::kinds`) made into code: the parts of a rule
//! set and a resource's rules, kind by kind (`RuleSetParts`,
//! `ResourceRules`), where each kind's part and listeners are (`Listed`),
//! which kinds a resource has rules of (its `Kinds`), and a visit of
//! every kind in chain order (`each_kind`).

use std::sync::Arc;

use super::listeners::{AllListeners, Listeners};
use crate::rule::kind::{CompiledKind, RuleKind};
use crate::rule::present::{KindBit, Kinds};

/// What a kind's slot reads for one entry.
pub(crate) type Checked<K> = <<K as RuleKind>::Compiled as CompiledKind>::Checked;

/// A resource's rules of a kind.
pub(crate) type PerResource<K> = <<K as RuleKind>::Compiled as CompiledKind>::PerResource;

/// A kind of the list: where the instance keeps its parts.
pub(crate) trait Listed: RuleKind + KindBit {
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

/// Makes the rule set's parts and per-resource rules from the list of
/// kinds.
macro_rules! rule_set {
    ($($field:ident $variant:ident [$($kind:tt)*] [$($rule:tt)*] $accessor:ident $name:literal $exception:literal
        $doc:literal $book_doc:literal;)*) => {
        /// The compiled rules of every kind, the parts a set is built from.
        #[derive(Clone, Debug, Default)]
        pub(crate) struct RuleSetParts {
            $(
                #[doc = $book_doc]
                pub(crate) $field: Arc<<crate::$($kind)* as RuleKind>::Compiled>,
            )*
        }

        /// The rules of one resource, every kind: each kind's list shared
        /// with the kind's compiled set, and the kinds it has rules of.
        #[derive(Debug)]
        pub(crate) struct ResourceRules {
            $(
                #[doc = $book_doc]
                pub(crate) $field: PerResource<crate::$($kind)*>,
            )*
            /// The kinds whose slot has something to check for an entry
            /// of the resource, outbound (`[0]`) and inbound (`[1]`): those
            /// it has rules of (see [`CompiledKind::has_own`]), and for an
            /// inbound entry, the kinds over every inbound entry.
            present: [Kinds; 2],
        }

        impl ResourceRules {
            /// The rules of `resource` in `parts`.
            pub(crate) fn of(parts: &RuleSetParts, resource: &str) -> Self {
                let mut own = Kinds::NONE;
                $(
                    let $field = parts.$field.of(resource);
                    if <<crate::$($kind)* as RuleKind>::Compiled as CompiledKind>::has_own(&$field) {
                        own = own.with(<crate::$($kind)* as KindBit>::KIND);
                    }
                )*
                ResourceRules {
                    $($field,)*
                    present: [own, own.with(parts.inbound())],
                }
            }

            /// The kinds whose slot has something to check for an entry of
            /// the resource, `inbound` or not.
            #[inline(always)]
            pub(crate) fn present(&self, inbound: bool) -> Kinds {
                self.present[usize::from(inbound)]
            }
        }

        impl RuleSetParts {
            /// The kinds over every inbound entry with rules in force.
            pub(crate) fn inbound(&self) -> Kinds {
                let mut inbound = Kinds::NONE;
                $(
                    if self.$field.checks_inbound() {
                        inbound = inbound.with(<crate::$($kind)* as KindBit>::KIND);
                    }
                )*
                inbound
            }
        }
    };
}
rule_kinds!(rule_set);

macro_rules! listed {
    ($($field:ident $variant:ident [$($kind:tt)*] [$($rule:tt)*] $accessor:ident $name:literal $exception:literal
        $doc:literal $book_doc:literal;)*) => {
        /// The kinds' positions in the list.
        #[allow(dead_code, reason = "only the discriminants are read")]
        enum Position {
            $($variant,)*
        }

        $(
            impl KindBit for crate::$($kind)* {
                const KIND: Kinds = Kinds::at(Position::$variant as u32);
            }

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

const _: () = assert!(
    KIND_COUNT <= Kinds::CAPACITY,
    "a set of kinds has a bit for each kind"
);
