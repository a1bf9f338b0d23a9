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

mod fields;
mod in_force;
mod rule;
mod slot;

use std::sync::Arc;

pub use rule::{AuthorityRule, AuthorityStrategy, MAX_AUTHORITY_ORIGINS};
pub(crate) use slot::AuthorityKind;

use crate::rule::compiled::{CompiledRule, List};

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
    type PerResource = List<Self>;

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

    fn per_resource(list: List<Self>) -> List<Self> {
        list
    }
}
