//! `AuthorityRule`: which origins may enter a resource.

use std::any::Any;
use std::fmt;

use crate::BlockKind;
use crate::rule::footprint::{Footprint, string_bytes};
use crate::rule::names::{Names, RuleName, name_problems};
use crate::rule::{Problems, Rule, RuleError, origin_problem};

/// The kind's name in errors and logs.
pub(crate) const KIND_NAME: &str = BlockKind::Authority.as_str();

/// The most origins one authority rule may list.
pub const MAX_AUTHORITY_ORIGINS: usize = 1_000;

/// Whether an authority rule's origins are the only ones let in, or the
/// ones kept out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum AuthorityStrategy {
    /// Only the listed origins may enter (Sentinel's default).
    #[default]
    White,
    /// The listed origins may not enter.
    Black,
}

/// An origin white or black list on one resource.
///
/// ```
/// use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
///
/// let rule = AuthorityRule::new("GET:/admin", AuthorityStrategy::Black, ["crawler"]);
/// assert_eq!(rule.limit_app, vec!["crawler".to_owned()]);
/// assert!(rule.validate(0).is_ok());
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AuthorityRule {
    /// An optional identifier, shown in logs and errors.
    pub id: Option<u64>,
    /// The resource the rule guards.
    pub resource: String,
    /// White (only these) or black (not these) list.
    pub strategy: AuthorityStrategy,
    /// The origins, matched exactly (Sentinel's comma-separated
    /// `limitApp`, as a list): 1..=[`MAX_AUTHORITY_ORIGINS`] of them.
    pub limit_app: Vec<String>,
}

impl AuthorityRule {
    /// A rule on `resource` listing `origins`.
    pub fn new<I, S>(resource: impl Into<String>, strategy: AuthorityStrategy, origins: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        AuthorityRule {
            id: None,
            resource: resource.into(),
            strategy,
            limit_app: origins.into_iter().map(Into::into).collect(),
        }
    }

    /// Checks every field; the first problem found is returned, naming the
    /// field. `index` is the rule's position in the list being loaded.
    pub fn validate(&self, index: usize) -> Result<(), RuleError> {
        self.problems(index).into_iter().next().map_or(Ok(()), Err)
    }

    /// Every problem of the rule, in field order (empty when it is valid);
    /// [`validate`](Self::validate) returns the first.
    pub fn problems(&self, index: usize) -> Vec<RuleError> {
        let mut problems = Problems::new(KIND_NAME, index, &self.resource);
        problems.require_resource();
        if self.limit_app.is_empty() {
            problems.add("limit_app", "must name at least one origin");
        }
        if self.limit_app.len() > MAX_AUTHORITY_ORIGINS {
            problems.add(
                "limit_app",
                format!(
                    "must list at most {MAX_AUTHORITY_ORIGINS} origins, got {}",
                    self.limit_app.len()
                ),
            );
            return problems.into_vec();
        }
        for origin in &self.limit_app {
            if origin.is_empty() {
                problems.add(
                    "limit_app",
                    "lists an empty origin (entries without one always pass)",
                );
            // Names are compared as written, as Sentinel compares them:
            // surrounding spaces are part of the name.
            } else if let Some(problem) = origin_problem(origin.trim_matches(' ')) {
                problems.add("limit_app", problem);
            }
        }
        problems.into_vec()
    }

    name_problems!(KIND_NAME);

    /// The most memory the rule may take once loaded: the rule, its
    /// resource's name, and each origin three times (the rule, the compiled
    /// rule's copy, the compiled sorted list).
    pub(crate) fn footprint(&self) -> Footprint {
        let origins = self.limit_app.iter().fold(0u64, |bytes, origin| {
            bytes.saturating_add(3 * string_bytes(origin))
        });
        Footprint::of_rule::<AuthorityRule, super::CompiledAuthority>()
            .name(&self.resource)
            .part("limit_app", origins)
    }

    /// The names the rule mentions: its resource and every origin it lists.
    pub(crate) fn names(&self) -> Names<'_> {
        let origins = self.limit_app.iter().map(|origin| RuleName::origin(origin));
        std::iter::once(RuleName::resource(&self.resource))
            .chain(origins)
            .collect()
    }
}

impl fmt::Display for AuthorityRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "authority rule")?;
        if let Some(id) = self.id {
            write!(f, " #{id}")?;
        }
        let list = match self.strategy {
            AuthorityStrategy::White => "white",
            AuthorityStrategy::Black => "black",
        };
        write!(
            f,
            " on {}: {list} list [{}]",
            self.resource,
            self.limit_app.join(", ")
        )
    }
}

impl Rule for AuthorityRule {
    fn resource(&self) -> &str {
        &self.resource
    }

    fn block_kind(&self) -> BlockKind {
        BlockKind::Authority
    }

    fn limit_app(&self) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Owned(self.limit_app.join(","))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_fields_are_named() {
        let field = |rule: AuthorityRule| rule.validate(3).unwrap_err().field;
        let ok = AuthorityRule::new("r", AuthorityStrategy::White, ["a"]);
        assert!(ok.validate(0).is_ok());
        assert_eq!(
            field(AuthorityRule {
                resource: " ".into(),
                ..ok.clone()
            }),
            "resource"
        );
        assert_eq!(
            field(AuthorityRule {
                limit_app: vec![],
                ..ok.clone()
            }),
            "limit_app"
        );
        for bad in ["", "  ", "a,b", "a\n", " a\t"] {
            let error = AuthorityRule {
                limit_app: vec!["ok".into(), bad.into()],
                ..ok.clone()
            }
            .validate(3)
            .unwrap_err();
            assert_eq!((error.field, error.index), ("limit_app", 3), "{bad:?}");
        }
    }

    #[test]
    fn origins_with_surrounding_spaces_were_refused_where_sentinel_keeps_them() {
        // Sentinel splits "a, b" into "a" and " b" and compares untrimmed.
        let rule = AuthorityRule::new("r", AuthorityStrategy::Black, ["a", " b "]);
        assert!(rule.validate(0).is_ok());
    }
}
