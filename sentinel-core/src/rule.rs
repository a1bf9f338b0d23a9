//! What every rule kind has in common, as far as a [`BlockError`](crate::BlockError)
//! needs to name it.

use std::any::Any;
use std::fmt;

/// A rule that can refuse an entry. Each rule kind (flow, degrade, ...)
/// implements it; a user slot can too, to say which of its rules blocked.
///
/// `Display` should be one short line naming the rule's important fields.
pub trait Rule: fmt::Debug + fmt::Display + Send + Sync + 'static {
    /// The resource the rule guards.
    fn resource(&self) -> &str;

    /// The rule as `Any`, to get its concrete type back
    /// ([`BlockError::rule_as`](crate::BlockError::rule_as)).
    fn as_any(&self) -> &dyn Any;
}
