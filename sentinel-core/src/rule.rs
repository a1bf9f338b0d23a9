//! What every rule kind has in common: the layer below both the kinds
//! (`flow/`, `degrade/`, ...) and the rule set that composes them
//! (`rules/`), so that a kind needs nothing of the set.
//!
//! Here: [`Rule`], as far as a [`BlockError`](crate::BlockError) needs to
//! name one; the errors of refused rules and the `Problems` a kind gathers
//! them in; [`Listener`]; in `compiled.rs`, `CompiledRule`, what a kind's
//! compiled form tells the set; in `names.rs`, the names a rule mentions;
//! in `footprint.rs`, the most memory a rule may take.

pub(crate) mod compiled;
pub mod describe;
pub(crate) mod footprint;
pub(crate) mod kind;
pub(crate) mod kind_set;
pub(crate) mod names;
pub(crate) mod present;

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::BlockKind;

/// A listener of one kind's rules: called with the rules now in force.
pub type Listener<R> = Arc<dyn Fn(&[R]) + Send + Sync>;

/// A rule that can refuse an entry. Each rule kind (flow, degrade, ...)
/// implements it; a user slot can too, to say which of its rules blocked.
///
/// `Display` should be one short line naming the rule's important fields.
pub trait Rule: fmt::Debug + fmt::Display + Send + Sync + 'static {
    /// The resource the rule guards.
    fn resource(&self) -> &str;

    /// The kind of check that blocks by this rule: [`BlockKind::Flow`] for
    /// a [`FlowRule`](crate::flow::FlowRule), and so on; a user rule keeps
    /// the default, `Custom("rule")`, or names its own.
    fn block_kind(&self) -> BlockKind {
        BlockKind::Custom("rule")
    }

    /// The callers the rule applies to, as the block log names them
    /// (Sentinel's `limitApp`): `default` unless the kind has such a field.
    fn limit_app(&self) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed("default")
    }

    /// The rule as `Any`, to get its concrete type back
    /// ([`BlockError::rule_as`](crate::BlockError::rule_as)).
    fn as_any(&self) -> &dyn Any;
}

/// A rule refused when loaded: which rule (kind, position, resource), which
/// field, and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleError {
    /// The rule kind: `flow`, `degrade`, ...
    pub kind: &'static str,
    /// The rule's position in the list being loaded.
    pub index: usize,
    /// The rule's resource, as given.
    pub resource: String,
    /// The offending field.
    pub field: &'static str,
    /// What is wrong, e.g. `must be a finite number >= 0, got -5`.
    pub message: String,
}

impl RuleError {
    /// An error about `field` of rule `kind[index]` on `resource`.
    pub fn new(
        kind: &'static str,
        index: usize,
        resource: &str,
        field: &'static str,
        message: impl Into<String>,
    ) -> Self {
        RuleError {
            kind,
            index,
            resource: resource.to_owned(),
            field,
            message: message.into(),
        }
    }
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}[{}] ({}): {} {}",
            self.kind, self.index, self.resource, self.field, self.message
        )
    }
}

impl std::error::Error for RuleError {}

/// Every problem found in a list of rules; the list was not loaded and the
/// rules in force are unchanged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleErrors(pub Vec<RuleError>);

impl RuleErrors {
    /// The problems, in rule order.
    pub fn errors(&self) -> &[RuleError] {
        &self.0
    }
}

impl fmt::Display for RuleErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} invalid rule(s): ", self.0.len())?;
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for RuleErrors {}

/// Why an origin name is not usable, if it is not.
pub(crate) fn origin_problem(origin: &str) -> Option<String> {
    if origin.is_empty() {
        return Some("must not be empty (use \"default\" for every caller)".into());
    }
    if origin.trim() != origin {
        return Some(format!("{origin:?} has surrounding whitespace"));
    }
    if let Some(c) = origin.chars().find(|c| c.is_control() || *c == ',') {
        return Some(format!("{origin:?} contains {c:?}: one origin per rule"));
    }
    None
}

/// The problems of one rule, gathered as they are found.
pub(crate) struct Problems<'r> {
    kind: &'static str,
    index: usize,
    resource: &'r str,
    found: Vec<RuleError>,
}

impl<'r> Problems<'r> {
    /// For rule `kind[index]` on `resource`.
    pub(crate) fn new(kind: &'static str, index: usize, resource: &'r str) -> Self {
        Problems {
            kind,
            index,
            resource,
            found: Vec::new(),
        }
    }

    /// `field` is wrong: `message`.
    pub(crate) fn add(&mut self, field: &'static str, message: impl Into<String>) {
        let error = RuleError::new(self.kind, self.index, self.resource, field, message);
        self.found.push(error);
    }

    /// The rule must name its resource.
    pub(crate) fn require_resource(&mut self) {
        if self.resource.trim().is_empty() {
            self.add("resource", "must not be empty");
        }
    }

    /// `value` of `field` must be a finite number >= 0; whether it is.
    pub(crate) fn non_negative(&mut self, field: &'static str, value: f64) -> bool {
        let ok = value.is_finite() && value >= 0.0;
        if !ok {
            self.add(field, format!("must be a finite number >= 0, got {value}"));
        }
        ok
    }

    /// `value` of `field` must be in `1..=max`; whether it is.
    pub(crate) fn positive_at_most<T>(&mut self, field: &'static str, value: T, max: T) -> bool
    where
        T: PartialOrd + Default + fmt::Display,
    {
        if value == T::default() {
            self.add(field, "must be > 0");
            return false;
        }
        self.at_most(field, value, max)
    }

    /// `value` of `field` must be at most `max`; whether it is.
    pub(crate) fn at_most<T>(&mut self, field: &'static str, value: T, max: T) -> bool
    where
        T: PartialOrd + fmt::Display,
    {
        let ok = value <= max;
        if !ok {
            self.add(field, format!("must be <= {max}, got {value}"));
        }
        ok
    }

    /// Every problem found, in order.
    pub(crate) fn into_vec(self) -> Vec<RuleError> {
        self.found
    }
}
