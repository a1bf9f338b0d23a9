//! `RuleBook`: every kind of rule at once, loaded in one swap.

use crate::Sentinel;
use crate::authority::{self, AuthorityRule};
use crate::degrade::{self, DegradeRule};
use crate::flow::{self, FlowRule};
use crate::hotspot::{self, ParamFlowRule};
use crate::rule::{RuleError, RuleErrors};
use crate::system::{self, SystemRule};

use super::names::too_long;
use super::{Kind, RuleSet};

/// Every rule of an instance, by kind: what a rule file holds. Loaded with
/// [`Sentinel::load_rule_book`], all kinds switch together.
///
/// ```
/// use sentinel_core::flow::FlowRule;
/// use sentinel_core::system::SystemRule;
/// use sentinel_core::{ManualClock, RuleBook, Sentinel};
///
/// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
/// sentinel.load_rule_book(RuleBook {
///     flow: vec![FlowRule::new("GET:/orders", 100.0)],
///     system: vec![SystemRule { max_thread: Some(200), ..SystemRule::default() }],
///     ..RuleBook::default()
/// })?;
/// assert_eq!(sentinel.rule_book().flow.len(), 1);
/// # Ok::<(), sentinel_core::RuleErrors>(())
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
        check(&self.flow, &flow::KIND, max, &mut errors);
        check(&self.degrade, &degrade::KIND, max, &mut errors);
        check(&self.system, &system::KIND, max, &mut errors);
        check(&self.authority, &authority::KIND, max, &mut errors);
        check(&self.param_flow, &hotspot::KIND, max, &mut errors);
        match errors.is_empty() {
            true => Ok(()),
            false => Err(RuleErrors(errors)),
        }
    }

    /// How many rules of each kind, in the order of the fields.
    pub fn counts(&self) -> [(&'static str, usize); 5] {
        [
            (flow::KIND.name, self.flow.len()),
            (degrade::KIND.name, self.degrade.len()),
            (system::KIND.name, self.system.len()),
            (authority::KIND.name, self.authority.len()),
            (hotspot::KIND.name, self.param_flow.len()),
        ]
    }

    fn of(set: &RuleSet) -> Self {
        RuleBook {
            flow: set.flow_rules().to_vec(),
            degrade: set.degrade_rules().to_vec(),
            system: set.system_rules().to_vec(),
            authority: set.authority_rules().to_vec(),
            param_flow: set.param_rules().to_vec(),
        }
    }
}

impl Sentinel {
    /// Replaces every rule of every kind with `book`, in one swap: no entry
    /// sees one kind from the book and another from before. When any rule
    /// is invalid nothing changes and every problem is returned. Unchanged
    /// rules keep their state; statistics are never reset. Each kind's
    /// listeners hear of the load. As [`RuleManager::load`](crate::RuleManager::load),
    /// it makes the nodes of every name the rules mention, outside the caps.
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
        let set = self.update_rules(|parts| {
            (flow::KIND.replace)(parts, flow);
            (degrade::KIND.replace)(parts, degrade);
            (system::KIND.replace)(parts, system);
            (authority::KIND.replace)(parts, authority);
            (hotspot::KIND.replace)(parts, param_flow);
        });
        tracing::info!(?counts, version = set.version, "sentinel: rule book loaded");
        fn announce<R>(sentinel: &Sentinel, kind: &Kind<R>, set: &RuleSet) {
            (kind.listeners)(sentinel).announce(set.version, (kind.rules)(set));
        }
        announce(self, &flow::KIND, &set);
        announce(self, &degrade::KIND, &set);
        announce(self, &system::KIND, &set);
        announce(self, &authority::KIND, &set);
        announce(self, &hotspot::KIND, &set);
        Ok(())
    }

    /// Every rule in force, by kind.
    pub fn rule_book(&self) -> RuleBook {
        RuleBook::of(&self.rule_set())
    }
}
