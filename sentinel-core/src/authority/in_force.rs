//! The authority rules in force on a resource, read on demand, off the
//! entry path: for an adapter that refuses callers it cannot name where
//! origin lists apply.

use std::sync::Arc;

use super::AuthorityRule;
use crate::Resource;

impl Resource<'_> {
    /// The resource's first authority rule in force (an origin white or
    /// black list), as loaded; `None` when no authority rule names the
    /// resource, and for a handle made past the instance's resource cap
    /// (its entries pass unchecked). An adapter that reads origins from
    /// its callers can refuse one that names no origin by this rule, where
    /// an entry without an origin would pass every list, as in Sentinel.
    ///
    /// ```
    /// use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
    /// use sentinel_flow_core::{ManualClock, Sentinel};
    ///
    /// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
    /// let admin = sentinel.resource("GET:/admin");
    /// assert!(admin.authority_rule().is_none());
    /// sentinel.authority_rules().load(vec![AuthorityRule::new(
    ///     "GET:/admin",
    ///     AuthorityStrategy::Black,
    ///     ["crawler"],
    /// )])?;
    /// let rule = admin.authority_rule().unwrap();
    /// assert_eq!(rule.limit_app, ["crawler"]);
    /// assert!(sentinel.resource("GET:/orders").authority_rule().is_none());
    /// # Ok::<(), sentinel_flow_core::RuleErrors>(())
    /// ```
    pub fn authority_rule(&self) -> Option<Arc<AuthorityRule>> {
        let node = self.node()?;
        let rules = &self.engine().rules;
        rules.with_rules_if_any(rules.rules_version(), |rules| {
            let first = rules?.for_resource(node)?.authority.first()?;
            Some(Arc::clone(&first.rule))
        })
    }
}
