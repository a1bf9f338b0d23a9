//! What a manager knows of its kind: a [`Kind`] descriptor, made for any
//! kind of the list from its [`RuleKind`] and where the instance keeps its
//! rules and listeners ([`Listed`]), so that a `RuleManager` is one type
//! for every kind's rules.

use std::sync::Arc;

use super::list::Listed;
use super::list::RuleSetParts;
use super::listeners::{AllListeners, Listeners};
use super::set::RuleSet;
use crate::rule::RuleError;
use crate::rule::footprint::Footprint;
use crate::rule::kind::CompiledKind;
use crate::rule::names::NamesOf;

/// What a manager needs to know of its kind.
pub(crate) struct Kind<R: 'static> {
    /// The kind's name in logs and errors: `flow`, `degrade`, ...
    pub(crate) name: &'static str,
    /// Every problem of a rule at a position in the list being loaded.
    pub(crate) problems: fn(&R, usize) -> Vec<RuleError>,
    /// The names a rule mentions, its resource first.
    pub(crate) names: NamesOf<R>,
    /// The most memory a rule may take once loaded.
    pub(crate) footprint: fn(&R) -> Footprint,
    /// Problems between the rules of one list (flow ids shared by cluster
    /// rules with different thresholds), after each rule's own.
    pub(crate) across: fn(&[R]) -> Vec<RuleError>,
    /// The kind's rules in a set, as loaded.
    pub(crate) rules: fn(&RuleSet) -> &[R],
    /// Puts `rules`, compiled, into the parts of the next set (which hold
    /// the current set's; unchanged rules keep their state).
    pub(crate) replace: fn(&mut RuleSetParts, Vec<R>),
    /// The instance's listeners of the kind's rules.
    pub(crate) listeners: fn(&AllListeners) -> &Listeners<R>,
}

impl<R> Kind<R> {
    /// The descriptor of kind `K`.
    pub(crate) const fn of<K: Listed<Rule = R>>() -> Self {
        Kind {
            name: K::NAME,
            problems: K::problems,
            names: K::names,
            footprint: K::footprint,
            across: K::across,
            rules: RuleSet::rules_of::<K>,
            replace: replace::<K>,
            listeners: listeners::<K>,
        }
    }
}

/// Puts `rules` of kind `K`, compiled, into `parts`.
pub(crate) fn replace<K: Listed>(parts: &mut RuleSetParts, rules: Vec<K::Rule>) {
    let part = K::part_mut(parts);
    *part = Arc::new(<K::Compiled as CompiledKind>::compile(rules, part));
}

fn listeners<K: Listed>(all: &AllListeners) -> &Listeners<K::Rule> {
    K::listeners(all)
}

/// A kind's descriptor, a constant of the kind (so that a manager holds a
/// `&'static` one).
pub(crate) trait Described: Listed {
    /// The kind's descriptor.
    const KIND: Kind<Self::Rule> = Kind::of::<Self>();
}

impl<K: Listed> Described for K {}
