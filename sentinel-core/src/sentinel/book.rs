//! Every kind of the instance's rules at once.

use super::Sentinel;
use crate::RuleBook;
use crate::rule::RuleErrors;

impl Sentinel {
    /// Replaces every rule of every kind with `book`, in one swap: no entry
    /// sees one kind from the book and another from before. When any rule
    /// is invalid nothing changes and every problem is returned; so too
    /// when the book's rules would take more than the instance's
    /// [`rule_memory_budget`](crate::SentinelBuilder::rule_memory_budget)
    /// (the error names the rule that takes them past it). Unchanged
    /// rules keep their state; statistics are never reset. Each kind's
    /// listeners hear of the load. As [`RuleManager::load`](crate::RuleManager::load),
    /// the names the rules mention get their nodes outside the caps, and a
    /// book mentioning more than
    /// [`max_rule_names`](crate::SentinelBuilder::max_rule_names) distinct
    /// names is refused.
    pub fn load_rule_book(&self, book: RuleBook) -> Result<(), RuleErrors> {
        if let Err(errors) = book.validate_within(self.max_name_len()) {
            tracing::warn!(%errors, "sentinel: rule book refused");
            return Err(errors);
        }
        let counts = book.counts();
        let set = self.update_rules(|_, tally, parts| book.apply(tally, parts));
        let set = set.inspect_err(|errors| {
            tracing::warn!(%errors, "sentinel: rule book refused");
        })?;
        tracing::info!(?counts, version = set.version, "sentinel: rule book loaded");
        RuleBook::announce(&self.listeners, &set);
        Ok(())
    }

    /// Every rule in force, by kind.
    pub fn rule_book(&self) -> RuleBook {
        RuleBook::of(&self.rule_set())
    }
}
