//! The list of kinds (`crate::kinds`) made into code: the parts of a rule
//! set and a resource's rules, kind by kind (`RuleSetParts`,
//! `ResourceRules`), where each kind's part and listeners are (`Listed`),
//! and a visit of every kind in chain order (`each_kind`).

use std::sync::Arc;

use super::listeners::{AllListeners, Listeners};
use crate::rule::kind::{CompiledKind, RuleKind};

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
        /// with the kind's compiled set.
        #[derive(Debug)]
        pub(crate) struct ResourceRules {
            $(
                #[doc = $book_doc]
                pub(crate) $field: PerResource<crate::$($kind)*>,
            )*
        }

        impl ResourceRules {
            /// The rules of `resource` in `parts`.
            pub(crate) fn of(parts: &RuleSetParts, resource: &str) -> Self {
                ResourceRules {
                    $($field: parts.$field.of(resource),)*
                }
            }
        }
    };
}
rule_kinds!(rule_set);

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
