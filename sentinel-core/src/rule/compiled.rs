//! `CompiledRule`: what a rule kind's compiled form tells the rule set
//! (`rules/`), which compiles each kind's list and carries the state of
//! unchanged rules across loads.

use std::sync::Arc;

/// The compiled rules of one resource in check order: shared by the kind's
/// set and every rule set built from it (no copy per set).
pub(crate) type List<C> = Arc<[Arc<C>]>;

/// A rule ready for the hot path, with the state it keeps (tokens, pacing,
/// a breaker's state...).
pub(crate) trait CompiledRule: Send + Sync + Sized + 'static {
    /// The rule as loaded.
    type Rule: Clone + PartialEq + Send + Sync;

    /// A resource's compiled rules of the kind, with whatever the kind
    /// derives from them once per load (a plain [`List`] for most kinds).
    type PerResource: AsRef<[Arc<Self>]> + Send + Sync;

    /// Compiles `rule` with fresh state.
    fn compile(rule: &Self::Rule) -> Self;

    /// The rule it was compiled from.
    fn source(&self) -> &Self::Rule;

    /// The resource `rule` guards.
    fn resource(rule: &Self::Rule) -> &str;

    /// Where the rule is checked among its resource's rules of this kind:
    /// smaller first; equal ranks keep the order loaded.
    fn rank(&self) -> u8 {
        0
    }

    /// A resource's rules, in check order, as the rule set keeps them.
    fn per_resource(list: List<Self>) -> Self::PerResource;
}
