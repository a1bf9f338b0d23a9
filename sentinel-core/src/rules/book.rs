//! `RuleBook`: every kind of rule at once, loaded in one swap. Its fields
//! are the list of kinds (`crate::kinds`), in chain order.

use super::budget::Tally;
use super::kinds::replace;
use super::list::{KIND_COUNT, Listed};
use super::listeners::AllListeners;
use super::set::RuleSet;
use crate::rule::kind::RuleKind;
use crate::rule::names::too_long;
use crate::rule::{RuleError, RuleErrors};

/// Every problem of `rules` of kind `K` (names longer than `max` bytes
/// included) into `errors`.
fn problems<K: Listed>(rules: &[K::Rule], max: usize, errors: &mut Vec<RuleError>) {
    for (i, rule) in rules.iter().enumerate() {
        errors.extend(K::problems(rule, i));
        errors.extend(too_long(K::NAME, i, &K::names(rule), max));
    }
    errors.extend(K::across(rules));
}

/// Tells kind `K`'s listeners of the set loaded.
fn announce<K: Listed>(listeners: &AllListeners, set: &RuleSet) {
    K::listeners(listeners).announce(set.version, set.rules_of::<K>());
}

/// Makes [`RuleBook`] from the list of kinds.
macro_rules! rule_book {
    ($($field:ident $variant:ident [$($kind:tt)*] [$($rule:tt)*] $accessor:ident $name:literal $exception:literal
        $doc:literal $book_doc:literal;)*) => {
        /// Every rule of an instance, by kind: what a rule file holds. Loaded with
        /// [`Sentinel::load_rule_book`](crate::Sentinel::load_rule_book), all kinds switch together.
        ///
        /// ```
        /// use sentinel_flow_core::flow::FlowRule;
        /// use sentinel_flow_core::system::SystemRule;
        /// use sentinel_flow_core::{ManualClock, RuleBook, Sentinel};
        ///
        /// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
        /// sentinel.load_rule_book(RuleBook {
        ///     flow: vec![FlowRule::new("GET:/orders", 100.0)],
        ///     system: vec![SystemRule { max_thread: Some(200), ..SystemRule::default() }],
        ///     ..RuleBook::default()
        /// })?;
        /// assert_eq!(sentinel.rule_book().flow.len(), 1);
        /// # Ok::<(), sentinel_flow_core::RuleErrors>(())
        /// ```
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct RuleBook {
            $(
                #[doc = $book_doc]
                pub $field: Vec<crate::$($rule)*>,
            )*
        }

        impl RuleBook {
            /// As [`validate`](Self::validate), with names limited to
            /// `max_name_len` bytes (an instance's
            /// [`max_name_len`](crate::SentinelBuilder::max_name_len)).
            pub fn validate_within(&self, max_name_len: usize) -> Result<(), RuleErrors> {
                let mut errors = Vec::new();
                $(problems::<crate::$($kind)*>(&self.$field, max_name_len, &mut errors);)*
                match errors.is_empty() {
                    true => Ok(()),
                    false => Err(RuleErrors(errors)),
                }
            }

            /// How many rules of each kind, in the order of the fields.
            pub fn counts(&self) -> [(&'static str, usize); KIND_COUNT] {
                [$((<crate::$($kind)* as RuleKind>::NAME, self.$field.len()),)*]
            }

            pub(crate) fn of(set: &RuleSet) -> Self {
                RuleBook {
                    $($field: set.rules_of::<crate::$($kind)*>().to_vec(),)*
                }
            }

            /// Adds up the book's rules, then, if the budget takes them,
            /// puts them into `parts`.
            pub(crate) fn apply(self, tally: &mut Tally, parts: &mut super::RuleSetParts) -> Result<u64, RuleError> {
                $(tally.loaded::<crate::$($kind)*>(&self.$field);)*
                let footprint = tally.finish()?;
                $(replace::<crate::$($kind)*>(parts, self.$field);)*
                Ok(footprint)
            }

            pub(crate) fn announce(listeners: &AllListeners, set: &RuleSet) {
                $(announce::<crate::$($kind)*>(listeners, set);)*
            }
        }
    };
}
rule_kinds!(rule_book);

impl RuleBook {
    /// Every problem of every rule, kind by kind, in order (all of a rule's
    /// problems, not only its first), names longer than
    /// [`DEFAULT_MAX_NAME_LEN`](crate::DEFAULT_MAX_NAME_LEN) included.
    pub fn validate(&self) -> Result<(), RuleErrors> {
        self.validate_within(crate::DEFAULT_MAX_NAME_LEN)
    }
}
