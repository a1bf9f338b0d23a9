//! `RuleKind`: what one kind of rule gives the rest of the engine, and
//! `CompiledKind`: how the rule set holds a kind's compiled rules.
//!
//! A kind lives in its folder (`flow/`, `degrade/`, ...): its rule, its
//! compiled form, its slot, and its `RuleKind` type tying them together.
//! The kinds are listed once, in chain order (`crate::kinds`); the rule
//! set, the listeners, the rule book, the managers and the chain are made
//! from the list and these two traits, never by naming a kind.

use std::sync::Arc;

use super::RuleError;
use super::footprint::Footprint;
use super::names::Names;
use crate::BlockKind;
use crate::slot::rule_slot::RuleSlot;

/// One kind of rule.
pub(crate) trait RuleKind: Sized + 'static {
    /// The rule as loaded.
    type Rule: Clone + PartialEq + Send + Sync + 'static;
    /// The kind's rules compiled, as the rule set holds them.
    type Compiled: CompiledKind<Rule = Self::Rule>;
    /// The kind's check in the chain; it reads what
    /// [`CompiledKind::select_own`] (or
    /// [`select_all`](CompiledKind::select_all)) finds for an entry.
    type Slot: RuleSlot<Rules = <Self::Compiled as CompiledKind>::Checked>;

    /// What its blocks are; the kind's name (`as_str`) and Sentinel's
    /// exception name come with it.
    const BLOCK: BlockKind;

    /// The kind's name in logs, errors and metrics.
    const NAME: &'static str = Self::BLOCK.as_str();

    /// Every problem of `rule`, at `index` in the list being loaded.
    fn problems(rule: &Self::Rule, index: usize) -> Vec<RuleError>;

    /// The names `rule` mentions, its resource first.
    fn names(rule: &Self::Rule) -> Names<'_>;

    /// The most memory `rule` may take once loaded.
    fn footprint(rule: &Self::Rule) -> Footprint;

    /// Problems between the rules of one list, after each rule's own.
    fn across(rules: &[Self::Rule]) -> Vec<RuleError> {
        let _ = rules;
        Vec::new()
    }
}

/// A kind's rules, compiled: per resource (the usual case), or over every
/// inbound entry (system rules, `PER_RESOURCE = false`).
pub(crate) trait CompiledKind: Default + Send + Sync + 'static {
    /// The rule as loaded.
    type Rule: Clone + 'static;
    /// A resource's rules of the kind, kept in its `ResourceRules`.
    type PerResource: Send + Sync;
    /// What the kind's slot reads for one entry.
    type Checked: ?Sized;

    /// Whether the slot reads the resource's rules (`select_own`) rather
    /// than the whole kind's (`select_all`).
    const PER_RESOURCE: bool;

    /// Compiles `rules`, keeping the state of those unchanged in `old`.
    fn compile(rules: Vec<Self::Rule>, old: &Self) -> Self;

    /// The rules as loaded.
    fn rules(&self) -> &[Self::Rule];

    /// The resources that have rules of the kind.
    fn resources(&self) -> impl Iterator<Item = &Arc<str>>;

    /// The rules of `resource`.
    fn of(&self, resource: &str) -> Self::PerResource;

    /// Whether the slot has something to check in a resource's rules
    /// (asked once, when the set is built: the resource's
    /// [`Kinds`](crate::rule::present::Kinds) hold the answer).
    fn has_own(own: &Self::PerResource) -> bool;

    /// What the slot reads from a resource's rules, for a resource that
    /// [`has_own`](Self::has_own) rules; `None` for a kind that reads no
    /// resource's rules.
    fn select_own(own: &Self::PerResource) -> Option<&Self::Checked>;

    /// What the slot reads from the whole kind for an inbound entry, when
    /// it [`checks_inbound`](Self::checks_inbound); `None` for a kind that
    /// reads its resources' rules.
    fn select_all(&self) -> Option<&Self::Checked>;

    /// Whether every inbound entry has something to check (a kind over
    /// every inbound entry, with rules in force; asked once, when the set
    /// is built).
    fn checks_inbound(&self) -> bool {
        false
    }
}
