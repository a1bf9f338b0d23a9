//! `RuleChange`: one kind's whole new rule list.

use sentinel_flow_core::RuleBook;
use sentinel_flow_core::authority::AuthorityRule;
use sentinel_flow_core::degrade::DegradeRule;
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::param_flow::ParamFlowRule;
use sentinel_flow_core::system::SystemRule;

/// The new rules of one kind, replacing all of that kind's rules (as
/// Sentinel's `setRules` does); the other kinds stay as they are.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub enum RuleChange {
    /// Every flow rule.
    Flow(Vec<FlowRule>),
    /// Every circuit-breaking rule.
    Degrade(Vec<DegradeRule>),
    /// Every system rule.
    System(Vec<SystemRule>),
    /// Every origin white/black list.
    Authority(Vec<AuthorityRule>),
    /// Every hot-parameter rule.
    ParamFlow(Vec<ParamFlowRule>),
}

impl RuleChange {
    /// The kind, as the file's top-level key: `flow`, `degrade`, `system`,
    /// `authority` or `param_flow`.
    pub fn kind(&self) -> &'static str {
        match self {
            RuleChange::Flow(_) => "flow",
            RuleChange::Degrade(_) => "degrade",
            RuleChange::System(_) => "system",
            RuleChange::Authority(_) => "authority",
            RuleChange::ParamFlow(_) => "param_flow",
        }
    }

    /// How many rules.
    pub fn len(&self) -> usize {
        match self {
            RuleChange::Flow(rules) => rules.len(),
            RuleChange::Degrade(rules) => rules.len(),
            RuleChange::System(rules) => rules.len(),
            RuleChange::Authority(rules) => rules.len(),
            RuleChange::ParamFlow(rules) => rules.len(),
        }
    }

    /// Whether the kind is left with no rules.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `book` holds exactly these rules for this kind.
    pub(crate) fn is_in(&self, book: &RuleBook) -> bool {
        match self {
            RuleChange::Flow(rules) => *rules == book.flow,
            RuleChange::Degrade(rules) => *rules == book.degrade,
            RuleChange::System(rules) => *rules == book.system,
            RuleChange::Authority(rules) => *rules == book.authority,
            RuleChange::ParamFlow(rules) => *rules == book.param_flow,
        }
    }

    /// `book` with this kind's rules replaced.
    pub(crate) fn put_in(&self, book: &mut RuleBook) {
        match self {
            RuleChange::Flow(rules) => book.flow.clone_from(rules),
            RuleChange::Degrade(rules) => book.degrade.clone_from(rules),
            RuleChange::System(rules) => book.system.clone_from(rules),
            RuleChange::Authority(rules) => book.authority.clone_from(rules),
            RuleChange::ParamFlow(rules) => book.param_flow.clone_from(rules),
        }
    }
}
