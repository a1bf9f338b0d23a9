//! `CompiledRule`: what a rule kind's compiled form tells the rule set
//! (`rules/`), which compiles each kind's list and carries the state of
//! unchanged rules across loads.

/// A rule ready for the hot path, with the state it keeps (tokens, pacing,
/// a breaker's state...).
pub(crate) trait CompiledRule: Send + Sync + Sized {
    /// The rule as loaded.
    type Rule: Clone + PartialEq + Send + Sync;

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
}
