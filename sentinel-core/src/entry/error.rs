//! Why an entry was refused.

use std::fmt;
use std::sync::Arc;

use super::kinds::BlockKind;
use crate::rule::Rule;

/// An entry refused by a rule or a slot: which kind of check, which
/// resource, and which rule when there is one.
///
/// Building one allocates nothing: the resource name and the rule are shared
/// (a block by a rule holds just the rule, whose resource it names). A block
/// by a rule, dropped on the thread that made it, costs no atomic operation
/// either: its reference to the rule is recycled for the thread's next block.
#[derive(Clone)]
pub struct BlockError {
    kind: BlockKind,
    resource: Option<Arc<str>>,
    rule: Option<Arc<dyn Rule>>,
}

impl BlockError {
    /// A block of `kind` on `resource`, by `rule` if given.
    pub fn new(kind: BlockKind, resource: Arc<str>, rule: Option<Arc<dyn Rule>>) -> Self {
        BlockError {
            kind,
            resource: Some(resource),
            rule,
        }
    }

    /// A block of `kind` by `rule`, on the rule's resource: one reference
    /// count taken, where [`new`](Self::new) takes two.
    pub fn by_rule(kind: BlockKind, rule: Arc<dyn Rule>) -> Self {
        BlockError {
            kind,
            resource: None,
            rule: Some(rule),
        }
    }

    /// Which check refused the entry.
    pub fn kind(&self) -> BlockKind {
        self.kind
    }

    /// The resource refused.
    pub fn resource(&self) -> &str {
        match (&self.resource, &self.rule) {
            (Some(resource), _) => resource,
            (None, Some(rule)) => rule.resource(),
            (None, None) => "",
        }
    }

    /// The rule that refused it, if a rule did.
    pub fn rule(&self) -> Option<&dyn Rule> {
        self.rule.as_deref()
    }

    /// The rule's reference, if a rule refused.
    pub(crate) fn rule_arc(&self) -> Option<&Arc<dyn Rule>> {
        self.rule.as_ref()
    }

    /// The rule as its concrete type, if it is a `R`.
    pub fn rule_as<R: Rule>(&self) -> Option<&R> {
        self.rule.as_deref()?.as_any().downcast_ref()
    }
}

impl fmt::Display for BlockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "blocked by {} on resource `{}`",
            self.kind,
            self.resource()
        )?;
        if let Some(rule) = &self.rule {
            write!(f, " ({rule})")?;
        }
        Ok(())
    }
}

impl fmt::Debug for BlockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockError")
            .field("kind", &self.kind)
            .field("resource", &self.resource())
            .field("rule", &self.rule)
            .finish()
    }
}

impl std::error::Error for BlockError {}

impl Drop for BlockError {
    #[inline]
    fn drop(&mut self) {
        if let Some(rule) = self.rule.take() {
            super::spare::park(rule);
        }
    }
}
