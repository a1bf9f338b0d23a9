//! What the rule set knows of each kind: a [`Kind`] descriptor per kind,
//! built from what the kind exports (its name, its rule's `problems` and
//! `names`, problems across a list, its compiled form) and from where the set and
//! the instance keep that kind's rules and listeners.

use std::sync::Arc;

use super::kind_set::KindSet;
use super::listeners::Listeners;
use super::set::{RuleSet, RuleSetParts};
use crate::Sentinel;
use crate::authority::{self, AuthorityRule};
use crate::degrade::{self, DegradeRule};
use crate::flow::{self, FlowRule};
use crate::param_flow::{self, ParamFlowRule};
use crate::rule::RuleError;
use crate::rule::footprint::Footprint;
use crate::rule::names::NamesOf;
use crate::system::{self, SystemLimits, SystemRule};

/// The problems between the rules of one list.
pub(crate) type Across<R> = fn(&[R]) -> Vec<RuleError>;

/// What a manager needs to know of its kind.
pub(crate) struct Kind<R: 'static> {
    /// The kind's name in logs and errors: `flow`, `degrade`, ...
    pub(crate) name: &'static str,
    /// Every problem of a rule at a position in the list being loaded.
    pub(crate) problems: fn(&R, usize) -> Vec<RuleError>,
    /// The names a rule mentions, its resource first.
    pub(crate) names: NamesOf<R>,
    /// The most memory a rule may take once loaded.
    pub(crate) footprint: fn(&R) -> Footprint,
    /// Problems between the rules of one list (flow ids shared by cluster
    /// rules with different thresholds), after each rule's own.
    pub(crate) across: Option<Across<R>>,
    /// The kind's rules in a set, as loaded.
    pub(crate) rules: fn(&RuleSet) -> &[R],
    /// Puts `rules`, compiled, into the parts of the next set (which hold
    /// the current set's; unchanged rules keep their state).
    pub(crate) replace: fn(&mut RuleSetParts, Vec<R>),
    /// The instance's listeners of the kind's rules.
    pub(crate) listeners: fn(&Sentinel) -> &Listeners<R>,
}

/// The flow kind.
pub(crate) static FLOW: Kind<FlowRule> = Kind {
    name: flow::KIND_NAME,
    problems: FlowRule::problems,
    names: FlowRule::names,
    footprint: FlowRule::footprint,
    across: Some(flow::cluster_problems),
    rules: RuleSet::flow_rules,
    replace: |parts, rules| parts.flow = Arc::new(KindSet::compile(rules, &parts.flow)),
    listeners: |sentinel| &sentinel.listeners.flow,
};

/// The degrade kind.
pub(crate) static DEGRADE: Kind<DegradeRule> = Kind {
    name: degrade::KIND_NAME,
    problems: DegradeRule::problems,
    names: DegradeRule::names,
    footprint: DegradeRule::footprint,
    across: None,
    rules: RuleSet::degrade_rules,
    replace: |parts, rules| parts.degrade = Arc::new(KindSet::compile(rules, &parts.degrade)),
    listeners: |sentinel| &sentinel.listeners.degrade,
};

/// The hot-parameter kind.
pub(crate) static PARAM_FLOW: Kind<ParamFlowRule> = Kind {
    name: param_flow::KIND_NAME,
    problems: ParamFlowRule::problems,
    names: ParamFlowRule::names,
    footprint: ParamFlowRule::footprint,
    across: None,
    rules: RuleSet::param_flow_rules,
    replace: |parts, rules| parts.param_flow = Arc::new(KindSet::compile(rules, &parts.param_flow)),
    listeners: |sentinel| &sentinel.listeners.param_flow,
};

/// The authority kind.
pub(crate) static AUTHORITY: Kind<AuthorityRule> = Kind {
    name: authority::KIND_NAME,
    problems: AuthorityRule::problems,
    names: AuthorityRule::names,
    footprint: AuthorityRule::footprint,
    across: None,
    rules: RuleSet::authority_rules,
    replace: |parts, rules| parts.authority = Arc::new(KindSet::compile(rules, &parts.authority)),
    listeners: |sentinel| &sentinel.listeners.authority,
};

/// The system kind.
pub(crate) static SYSTEM: Kind<SystemRule> = Kind {
    name: system::KIND_NAME,
    problems: SystemRule::problems,
    names: SystemRule::names,
    footprint: SystemRule::footprint,
    across: None,
    rules: RuleSet::system_rules,
    replace: |parts, rules| parts.system = Arc::new(SystemLimits::compile(rules)),
    listeners: |sentinel| &sentinel.listeners.system,
};
