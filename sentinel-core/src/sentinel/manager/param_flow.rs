//! What a hot-parameter [`RuleManager`] adds: the figures of each rule's
//! value table.

use super::RuleManager;
use crate::param_flow::{ParamFlowRule, ParamTableStats};

impl RuleManager<'_, ParamFlowRule> {
    /// Every rule in force with its value table's figures.
    pub fn tables(&self) -> Vec<(ParamFlowRule, ParamTableStats)> {
        let set = self.sentinel.rule_set();
        set.parts
            .param_flow
            .by_resource
            .values()
            .flat_map(|list| list.iter())
            .map(|rule| {
                let stats = ParamTableStats {
                    values: rule.values(),
                    evictions: rule.evictions(),
                    overflows: rule.overflows(),
                    bytes: rule.table_bytes(),
                };
                ((**rule.rule()).clone(), stats)
            })
            .collect()
    }
}
