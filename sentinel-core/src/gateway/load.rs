//! Loading the two gateway kinds together, in one swap.

use super::model::{ApiDefinition, GatewayRule};
use super::slot::{ApiDefinitionsKind, GatewayKind};
use crate::Sentinel;
use crate::rule::kind::RuleKind;
use crate::rule::names::too_long;
use crate::rule::{RuleError, RuleErrors};
use crate::rules::kinds::replace;
use crate::rules::list::Listed;

/// Every problem of `rules` of kind `K`, names longer than `max` bytes
/// included.
fn problems<K: RuleKind>(rules: &[K::Rule], max: usize, errors: &mut Vec<RuleError>) {
    for (i, rule) in rules.iter().enumerate() {
        errors.extend(K::problems(rule, i));
        errors.extend(too_long(K::NAME, i, &K::names(rule), max));
    }
    errors.extend(K::across(rules));
}

impl Sentinel {
    /// Replaces the API definitions and the gateway rules together, in one
    /// swap (no entry sees the definitions of one load with the rules of
    /// another), leaving every other kind as it is. When any is invalid,
    /// or the instance refuses them (its rule memory budget, its name
    /// caps), nothing changes and every problem is returned, definitions
    /// first. Each kind's listeners hear of the load.
    ///
    /// ```
    /// use sentinel_flow_core::gateway::{ApiDefinition, ApiPredicate, GatewayRule};
    /// use sentinel_flow_core::{ManualClock, Sentinel};
    ///
    /// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
    /// sentinel.load_gateway(
    ///     vec![ApiDefinition::new("orders", vec![ApiPredicate::prefix("/orders/**")])],
    ///     vec![GatewayRule::api_group("orders", 10.0)],
    /// )?;
    /// assert_eq!(sentinel.gateway_rules().rules().len(), 1);
    /// // One bad rule: neither list changes.
    /// assert!(sentinel.load_gateway(vec![], vec![GatewayRule::route("/a", -1.0)]).is_err());
    /// assert_eq!(sentinel.api_definitions().rules().len(), 1);
    /// # Ok::<(), sentinel_flow_core::RuleErrors>(())
    /// ```
    pub fn load_gateway(
        &self,
        definitions: Vec<ApiDefinition>,
        rules: Vec<GatewayRule>,
    ) -> Result<(), RuleErrors> {
        let max = self.max_name_len();
        let mut errors = Vec::new();
        problems::<ApiDefinitionsKind>(&definitions, max, &mut errors);
        problems::<GatewayKind>(&rules, max, &mut errors);
        if !errors.is_empty() {
            let errors = RuleErrors(errors);
            tracing::warn!(%errors, "sentinel: gateway rules refused");
            return Err(errors);
        }
        let counts = (definitions.len(), rules.len());
        let set = self
            .update_rules(|current, tally, parts| {
                tally.in_force_except(current, &[ApiDefinitionsKind::NAME, GatewayKind::NAME]);
                tally.loaded::<ApiDefinitionsKind>(&definitions);
                tally.loaded::<GatewayKind>(&rules);
                let footprint = tally.finish()?;
                replace::<ApiDefinitionsKind>(parts, definitions);
                replace::<GatewayKind>(parts, rules);
                Ok(footprint)
            })
            .inspect_err(|errors| {
                tracing::warn!(%errors, "sentinel: gateway rules refused");
            })?;
        tracing::info!(
            api_definitions = counts.0,
            rules = counts.1,
            "sentinel: gateway rules loaded"
        );
        ApiDefinitionsKind::listeners(&self.listeners)
            .announce(set.version, set.rules_of::<ApiDefinitionsKind>());
        GatewayKind::listeners(&self.listeners)
            .announce(set.version, set.rules_of::<GatewayKind>());
        Ok(())
    }
}
