//! The two small enums every layer names: whether an entry is inbound or
//! outbound, and which check refused one.

use std::fmt;

/// Whether an entry is a request into this service or a call out of it.
/// System rules and the inbound total count only inbound entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum EntryType {
    /// A request this service serves.
    Inbound,
    /// A call this service makes (the default, as in Sentinel).
    #[default]
    Outbound,
}

/// Which check refused an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BlockKind {
    /// A flow rule (QPS or concurrency).
    Flow,
    /// An open circuit breaker.
    Degrade,
    /// System adaptive protection.
    System,
    /// An origin white or black list.
    Authority,
    /// A hot-parameter rule.
    ParamFlow,
    /// A user slot, with the kind it gave.
    Custom(&'static str),
}

impl BlockKind {
    /// A short lowercase name: `flow`, `degrade`, `system`, `authority`,
    /// `param_flow`, or the custom kind.
    pub fn as_str(&self) -> &'static str {
        match self {
            BlockKind::Flow => "flow",
            BlockKind::Degrade => "degrade",
            BlockKind::System => "system",
            BlockKind::Authority => "authority",
            BlockKind::ParamFlow => "param_flow",
            BlockKind::Custom(kind) => kind,
        }
    }
}

impl fmt::Display for BlockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
