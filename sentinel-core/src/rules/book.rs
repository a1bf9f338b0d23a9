//! `RuleBook`: every kind of rule at once, loaded in one swap.

use super::kinds::{self, Kind};
use super::set::RuleSet;
use crate::Sentinel;
use crate::authority::AuthorityRule;
use crate::degrade::DegradeRule;
use crate::flow::FlowRule;
use crate::param_flow::ParamFlowRule;
use crate::rule::names::too_long;
use crate::rule::{RuleError, RuleErrors};
use crate::system::SystemRule;

/// Every rule of an instance, by kind: what a rule file holds. Loaded with
/// [`Sentinel::load_rule_book`], all kinds switch together.
///
/// ```
/// use sentinel_flow_core::flow::FlowRule;
/// use sentinel_flow_core::system::SystemRule;
/// use sentinel_flow_core::{ManualClock, RuleBook, Sentinel};
///
/// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
/// sentinel.load_rule_book(RuleBook {
///     flow: vec![FlowRule::new("GET:/orders", 100.0)],
///     system: vec![SystemRule { max_thread: Some(200), ..SystemRule::default() }],
///     ..RuleBook::default()
/// })?;
/// assert_eq!(sentinel.rule_book().flow.len(), 1);
/// # Ok::<(), sentinel_flow_core::RuleErrors>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuleBook {
    /// Flow rules.
    pub flow: Vec<FlowRule>,
    /// Circuit-breaking rules.
    pub degrade: Vec<DegradeRule>,
    /// System rules.
    pub system: Vec<SystemRule>,
    /// Origin white and black lists.
    pub authority: Vec<AuthorityRule>,
    /// Hot-parameter rules.
    pub param_flow: Vec<ParamFlowRule>,
}

impl RuleBook {
    /// Every problem of every rule, kind by kind, in order (all of a rule's
    /// problems, not only its first), names longer than
    /// [`DEFAULT_MAX_NAME_LEN`](crate::DEFAULT_MAX_NAME_LEN) included.
    pub fn validate(&self) -> Result<(), RuleErrors> {
        self.validate_within(crate::DEFAULT_MAX_NAME_LEN)
    }

    /// As [`validate`](Self::validate), with names limited to
    /// `max_name_len` bytes (an instance's
    /// [`max_name_len`](crate::SentinelBuilder::max_name_len)).
    pub fn validate_within(&self, max_name_len: usize) -> Result<(), RuleErrors> {
        fn check<R>(rules: &[R], kind: &Kind<R>, max: usize, errors: &mut Vec<RuleError>) {
            for (i, rule) in rules.iter().enumerate() {
                errors.extend((kind.problems)(rule, i));
                errors.extend(too_long(kind.name, i, &(kind.names)(rule), max));
            }
            if let Some(across) = kind.across {
                errors.extend(across(rules));
            }
        }
        let max = max_name_len;
        let mut errors = Vec::new();
        check(&self.flow, &kinds::FLOW, max, &mut errors);
        check(&self.degrade, &kinds::DEGRADE, max, &mut errors);
        check(&self.system, &kinds::SYSTEM, max, &mut errors);
        check(&self.authority, &kinds::AUTHORITY, max, &mut errors);
        check(&self.param_flow, &kinds::PARAM_FLOW, max, &mut errors);
        match errors.is_empty() {
            true => Ok(()),
            false => Err(RuleErrors(errors)),
        }
    }

    /// How many rules of each kind, in the order of the fields.
    pub fn counts(&self) -> [(&'static str, usize); 5] {
        [
            (kinds::FLOW.name, self.flow.len()),
            (kinds::DEGRADE.name, self.degrade.len()),
            (kinds::SYSTEM.name, self.system.len()),
            (kinds::AUTHORITY.name, self.authority.len()),
            (kinds::PARAM_FLOW.name, self.param_flow.len()),
        ]
    }

    fn of(set: &RuleSet) -> Self {
        RuleBook {
            flow: set.flow_rules().to_vec(),
            degrade: set.degrade_rules().to_vec(),
            system: set.system_rules().to_vec(),
            authority: set.authority_rules().to_vec(),
            param_flow: set.param_flow_rules().to_vec(),
        }
    }
}

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
        let RuleBook {
            flow,
            degrade,
            system,
            authority,
            param_flow,
        } = book;
        let set = self.update_rules(|_, tally, parts| {
            tally.loaded(&kinds::FLOW, &flow);
            tally.loaded(&kinds::DEGRADE, &degrade);
            tally.loaded(&kinds::SYSTEM, &system);
            tally.loaded(&kinds::AUTHORITY, &authority);
            tally.loaded(&kinds::PARAM_FLOW, &param_flow);
            let footprint = tally.finish()?;
            (kinds::FLOW.replace)(parts, flow);
            (kinds::DEGRADE.replace)(parts, degrade);
            (kinds::SYSTEM.replace)(parts, system);
            (kinds::AUTHORITY.replace)(parts, authority);
            (kinds::PARAM_FLOW.replace)(parts, param_flow);
            Ok(footprint)
        });
        let set = set.inspect_err(|errors| {
            tracing::warn!(%errors, "sentinel: rule book refused");
        })?;
        tracing::info!(?counts, version = set.version, "sentinel: rule book loaded");
        fn announce<R>(sentinel: &Sentinel, kind: &Kind<R>, set: &RuleSet) {
            (kind.listeners)(sentinel).announce(set.version, (kind.rules)(set));
        }
        announce(self, &kinds::FLOW, &set);
        announce(self, &kinds::DEGRADE, &set);
        announce(self, &kinds::SYSTEM, &set);
        announce(self, &kinds::AUTHORITY, &set);
        announce(self, &kinds::PARAM_FLOW, &set);
        Ok(())
    }

    /// Every rule in force, by kind.
    pub fn rule_book(&self) -> RuleBook {
        RuleBook::of(&self.rule_set())
    }
}
