//! Where `setRules` puts a rule list: the instance's managers (Sentinel's
//! default, in memory) or, with a rule file, the file and then the
//! instance.

use sentinel_core::Sentinel;
use sentinel_core::authority::AuthorityRule;
use sentinel_core::degrade::DegradeRule;
use sentinel_core::flow::FlowRule;
use sentinel_core::hotspot::ParamFlowRule;
use sentinel_core::system::SystemRule;

/// A whole new list of one kind.
#[derive(Debug)]
pub(crate) enum Change {
    Flow(Vec<FlowRule>),
    Degrade(Vec<DegradeRule>),
    System(Vec<SystemRule>),
    Authority(Vec<AuthorityRule>),
    ParamFlow(Vec<ParamFlowRule>),
}

/// The destination of rule changes.
#[derive(Debug)]
pub(crate) enum RuleSink {
    Memory,
}

impl RuleSink {
    /// Applies `change`; on error, every problem as a line and nothing
    /// changed.
    pub(crate) fn apply(&self, sentinel: &Sentinel, change: Change) -> Result<(), Vec<String>> {
        match self {
            RuleSink::Memory => load(sentinel, change).map_err(|e| {
                e.errors().iter().map(ToString::to_string).collect()
            }),
        }
    }
}

fn load(sentinel: &Sentinel, change: Change) -> Result<(), sentinel_core::RuleErrors> {
    match change {
        Change::Flow(rules) => sentinel.flow_rules().load(rules),
        Change::Degrade(rules) => sentinel.degrade_rules().load(rules),
        Change::System(rules) => sentinel.system_rules().load(rules),
        Change::Authority(rules) => sentinel.authority_rules().load(rules),
        Change::ParamFlow(rules) => sentinel.param_flow_rules().load(rules),
    }
}
