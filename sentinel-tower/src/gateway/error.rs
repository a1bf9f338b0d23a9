//! `GatewayError`: what is wrong with an API definition or a gateway rule,
//! naming the item, its place and the field.

use std::fmt;

/// One problem of an API definition or a gateway rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayError {
    /// The kind: `api_definitions` or `gateway` (or `core` for a refusal
    /// of the instance's).
    pub kind: &'static str,
    /// The item's position in the list loaded.
    pub index: usize,
    /// The API's name or the rule's resource, as given.
    pub name: String,
    /// The offending field (`predicates`, `param_item.field_name`).
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl GatewayError {
    pub(crate) fn new(
        kind: &'static str,
        index: usize,
        name: &str,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        // A name from outside is shown shortened: an error stays small.
        let name = match name.char_indices().nth(64) {
            Some((at, _)) => format!("{}...", &name[..at]),
            None => name.to_owned(),
        };
        GatewayError {
            kind,
            index,
            name,
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for GatewayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}[{}] ({:?}): {}: {}",
            self.kind, self.index, self.name, self.field, self.message
        )
    }
}

impl std::error::Error for GatewayError {}

/// Every problem found in a load; nothing was applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayErrors(pub Vec<GatewayError>);

impl GatewayErrors {
    /// The problems, API definitions first, each list in order.
    pub fn errors(&self) -> &[GatewayError] {
        &self.0
    }
}

impl fmt::Display for GatewayErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} invalid gateway item(s): ", self.0.len())?;
        for (i, error) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{error}")?;
        }
        Ok(())
    }
}

impl std::error::Error for GatewayErrors {}
