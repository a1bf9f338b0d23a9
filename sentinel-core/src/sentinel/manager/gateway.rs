//! What a gateway [`RuleManager`] adds: the figures of each rule's value
//! table (the hot-parameter rule it becomes).

use super::RuleManager;
use crate::gateway::GatewayRule;
use crate::param_flow::ParamTableStats;

impl RuleManager<'_, GatewayRule> {
    /// Every rule in force with its value table's figures.
    pub fn tables(&self) -> Vec<(GatewayRule, ParamTableStats)> {
        let set = self.sentinel.rule_set();
        set.parts
            .gateway
            .set
            .by_resource
            .values()
            .flat_map(|list| list.iter())
            .map(|rule| {
                let param = &rule.param;
                let stats = ParamTableStats {
                    values: param.values(),
                    evictions: param.evictions(),
                    overflows: param.overflows(),
                    bytes: param.table_bytes(),
                };
                ((*rule.rule).clone(), stats)
            })
            .collect()
    }
}
