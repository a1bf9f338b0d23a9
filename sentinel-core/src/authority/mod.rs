//! Authority: let a resource's callers in or keep them out by origin
//! ([`AuthorityRule`]).
//!
//! An entry names its caller with
//! [`EntryBuilder::origin`](crate::EntryBuilder::origin). A white list lets
//! in only the origins it names; a black list keeps out the ones it names.
//! Names match exactly; an entry that names no origin always passes, as in
//! Sentinel. Every authority rule of a resource must pass.
//!
//! ```
//! use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
//! use sentinel_flow_core::{BlockKind, ManualClock, Sentinel};
//!
//! let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
//! sentinel.authority_rules().load(vec![AuthorityRule::new(
//!     "GET:/admin",
//!     AuthorityStrategy::White,
//!     ["ops-console"],
//! )])?;
//!
//! let ops = sentinel.entry_builder("GET:/admin").origin("ops-console").enter();
//! let shop = sentinel.entry_builder("GET:/admin").origin("shop").enter();
//! assert!(ops.is_ok());
//! assert_eq!(shop.unwrap_err().kind(), BlockKind::Authority);
//! # Ok::<(), sentinel_flow_core::RuleErrors>(())
//! ```
//!
//! The module is the kind alone: `rule.rs` the rule as loaded, here its
//! compiled form and the check. The instance's rule set, which composes
//! every kind, loads it
//! ([`Sentinel::authority_rules`](crate::Sentinel::authority_rules)).

mod in_force;
mod rule;

use std::sync::Arc;

pub(crate) use rule::KIND_NAME;
pub use rule::{AuthorityRule, AuthorityStrategy, MAX_AUTHORITY_ORIGINS};

use crate::Rule;
use crate::entry::spare;
use crate::rule::compiled::CompiledRule;

/// An authority rule with its origins sorted for lookup.
#[derive(Debug)]
pub(crate) struct CompiledAuthority {
    rule: Arc<AuthorityRule>,
    origins: Box<[Box<str>]>,
}

impl CompiledAuthority {
    /// Whether a caller named `origin` may enter.
    fn admits(&self, origin: &str) -> bool {
        let listed = self
            .origins
            .binary_search_by(|name| (**name).cmp(origin))
            .is_ok();
        match self.rule.strategy {
            AuthorityStrategy::White => listed,
            AuthorityStrategy::Black => !listed,
        }
    }
}

impl CompiledRule for CompiledAuthority {
    type Rule = AuthorityRule;

    fn compile(rule: &AuthorityRule) -> Self {
        let mut origins: Vec<Box<str>> = rule.limit_app.iter().map(|o| o.as_str().into()).collect();
        origins.sort();
        origins.dedup();
        CompiledAuthority {
            rule: Arc::new(rule.clone()),
            origins: origins.into_boxed_slice(),
        }
    }

    fn source(&self) -> &AuthorityRule {
        &self.rule
    }

    fn resource(rule: &AuthorityRule) -> &str {
        &rule.resource
    }
}

/// Runs the authority rules of one resource for a caller named `origin`
/// (`""`: none): `Err(rule)` names the first rule that keeps it out.
#[inline]
pub(crate) fn check(rules: &[Arc<CompiledAuthority>], origin: &str) -> Result<(), Arc<dyn Rule>> {
    if origin.is_empty() {
        return Ok(());
    }
    match rules.iter().find(|rule| !rule.admits(origin)) {
        Some(refusing) => Err(spare::share(&refusing.rule)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compiled(strategy: AuthorityStrategy, origins: &[&str]) -> Arc<CompiledAuthority> {
        Arc::new(CompiledAuthority::compile(&AuthorityRule::new(
            "r",
            strategy,
            origins.iter().copied(),
        )))
    }

    #[test]
    fn white_lists_admit_only_their_origins_and_black_lists_the_rest() {
        let white = [compiled(AuthorityStrategy::White, &["a", "b"])];
        assert!(check(&white, "a").is_ok());
        assert!(check(&white, "b").is_ok());
        assert!(check(&white, "c").is_err());
        assert!(check(&white, "ab").is_err(), "exact match, not a prefix");
        let black = [compiled(AuthorityStrategy::Black, &["a"])];
        assert!(check(&black, "a").is_err());
        assert!(check(&black, "b").is_ok());
    }

    #[test]
    fn no_origin_passes_every_list() {
        let rules = [
            compiled(AuthorityStrategy::White, &["a"]),
            compiled(AuthorityStrategy::Black, &["a"]),
        ];
        assert!(check(&rules, "").is_ok());
    }

    #[test]
    fn every_rule_must_pass_and_the_first_refusal_is_named() {
        let rules = [
            compiled(AuthorityStrategy::White, &["a", "b"]),
            compiled(AuthorityStrategy::Black, &["b"]),
        ];
        assert!(check(&rules, "a").is_ok());
        let refused = check(&rules, "b").unwrap_err();
        let rule = refused.as_any().downcast_ref::<AuthorityRule>().unwrap();
        assert_eq!(rule.strategy, AuthorityStrategy::Black);
    }
}
