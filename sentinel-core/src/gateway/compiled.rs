//! The compiled forms of the two kinds: an API definition with its
//! predicates compiled ([`CompiledApi`], listed in load order in
//! [`ApiSet`]), and a gateway rule with the hot-parameter rule it becomes
//! ([`CompiledGatewayRule`], per resource in [`GatewaySet`], which reuses
//! the hot-parameter kind's set and keeps each unchanged rule's value
//! table across loads).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use super::matcher::{PathMatcher, ValueMatcher};
use super::model::{ApiDefinition, GatewayParamItem, GatewayRule};
use crate::param_flow::CompiledParamFlow;
use crate::rule::compiled::{CompiledRule, List};
use crate::rule::kind::CompiledKind;
use crate::rule::kind_set::KindSet;

/// An API definition with its predicates compiled: what an adapter
/// matches a request's path against.
pub struct CompiledApi {
    definition: Arc<ApiDefinition>,
    predicates: Box<[PathMatcher]>,
}

impl CompiledApi {
    fn new(definition: &ApiDefinition) -> Self {
        CompiledApi {
            // Checked when loaded: a pattern that does not compile (none
            // does once the definition is valid) matches nothing.
            predicates: definition
                .predicates
                .iter()
                .filter_map(|p| PathMatcher::new(&p.pattern, p.match_strategy).ok())
                .collect(),
            definition: Arc::new(definition.clone()),
        }
    }

    /// The API's name: the resource its requests enter.
    pub fn name(&self) -> &str {
        &self.definition.name
    }

    /// The definition as loaded.
    pub fn definition(&self) -> &ApiDefinition {
        &self.definition
    }

    /// Whether `path` matches any of the API's predicates.
    #[inline]
    pub fn matches(&self, path: &str) -> bool {
        self.predicates.iter().any(|p| p.matches(path))
    }
}

impl fmt::Debug for CompiledApi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompiledApi")
            .field("name", &self.definition.name)
            .field("predicates", &self.predicates.len())
            .finish()
    }
}

/// The API definitions in force, compiled, in load order. The kind has
/// nothing to check (a definition never refuses): it marks no resource,
/// so its slot is never called.
#[derive(Debug, Default)]
pub(crate) struct ApiSet {
    rules: Vec<ApiDefinition>,
    pub(crate) apis: Vec<Arc<CompiledApi>>,
}

impl CompiledKind for ApiSet {
    type Rule = ApiDefinition;
    type PerResource = ();
    type Checked = ();
    const PER_RESOURCE: bool = true;

    fn compile(rules: Vec<ApiDefinition>, old: &Self) -> Self {
        // An unchanged definition keeps its compiled patterns.
        let old_by_name: HashMap<&str, &Arc<CompiledApi>> =
            old.apis.iter().map(|api| (api.name(), api)).collect();
        let apis = rules
            .iter()
            .map(
                |definition| match old_by_name.get(definition.name.as_str()) {
                    Some(api) if *api.definition == *definition => Arc::clone(api),
                    _ => Arc::new(CompiledApi::new(definition)),
                },
            )
            .collect();
        ApiSet { rules, apis }
    }

    fn rules(&self) -> &[ApiDefinition] {
        &self.rules
    }

    fn resources(&self) -> impl Iterator<Item = &Arc<str>> {
        std::iter::empty()
    }

    fn of(&self, _: &str) {}

    fn has_own(_: &()) -> bool {
        false
    }

    fn select_own(_: &()) -> Option<&()> {
        None
    }

    fn select_all(&self) -> Option<&()> {
        None
    }
}

/// A gateway rule with the argument it reads: what the hot-parameter
/// kind's set compiles and compares across loads.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Placed {
    pub(crate) rule: GatewayRule,
    pub(crate) index: usize,
}

/// A gateway rule compiled: the hot-parameter rule it becomes, with its
/// state (the table of values), and its item's pattern.
#[derive(Debug)]
pub(crate) struct CompiledGatewayRule {
    pub(crate) placed: Placed,
    pub(crate) rule: Arc<GatewayRule>,
    pub(crate) param: CompiledParamFlow,
    pub(crate) item: Option<(GatewayParamItem, ValueMatcher)>,
}

impl CompiledRule for CompiledGatewayRule {
    type Rule = Placed;
    type PerResource = List<Self>;

    fn compile(placed: &Placed) -> Self {
        let item = placed.rule.param_item.as_ref().map(|item| {
            // Checked when loaded; a pattern that does not compile (none
            // does once the rule is valid) limits every value.
            let matcher = ValueMatcher::new(item.pattern.as_deref(), item.match_strategy)
                .unwrap_or(ValueMatcher::Any);
            (item.clone(), matcher)
        });
        CompiledGatewayRule {
            param: CompiledParamFlow::new(placed.rule.to_param_flow(placed.index)),
            rule: Arc::new(placed.rule.clone()),
            item,
            placed: placed.clone(),
        }
    }

    fn source(&self) -> &Placed {
        &self.placed
    }

    fn resource(placed: &Placed) -> &str {
        &placed.rule.resource
    }

    fn per_resource(list: List<Self>) -> List<Self> {
        list
    }
}

/// The gateway rules in force, as loaded and compiled per resource (in
/// load order: a rule's argument index is its place there).
#[derive(Debug, Default)]
pub(crate) struct GatewaySet {
    rules: Vec<GatewayRule>,
    pub(crate) set: KindSet<CompiledGatewayRule>,
}

impl CompiledKind for GatewaySet {
    type Rule = GatewayRule;
    type PerResource = List<CompiledGatewayRule>;
    type Checked = List<CompiledGatewayRule>;
    const PER_RESOURCE: bool = true;

    fn compile(rules: Vec<GatewayRule>, old: &Self) -> Self {
        let placed = rules
            .iter()
            .zip(super::argument_indices(&rules))
            .map(|(rule, index)| Placed {
                rule: rule.clone(),
                index,
            })
            .collect();
        GatewaySet {
            set: KindSet::compile(placed, &old.set),
            rules,
        }
    }

    fn rules(&self) -> &[GatewayRule] {
        &self.rules
    }

    fn resources(&self) -> impl Iterator<Item = &Arc<str>> {
        self.set.by_resource.keys()
    }

    fn of(&self, resource: &str) -> List<CompiledGatewayRule> {
        self.set.list_of(resource)
    }

    #[inline(always)]
    fn has_own(own: &List<CompiledGatewayRule>) -> bool {
        !own.is_empty()
    }

    #[inline(always)]
    fn select_own(own: &List<CompiledGatewayRule>) -> Option<&List<CompiledGatewayRule>> {
        Some(own)
    }

    #[inline(always)]
    fn select_all(&self) -> Option<&List<CompiledGatewayRule>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::{ApiPredicate, GatewayParamItem};
    use crate::rules::list::ResourceRules;
    use crate::{ManualClock, Sentinel};

    #[test]
    fn api_definitions_mark_no_resource_and_gateway_rules_mark_theirs() {
        let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
        let orders = ApiDefinition::new("orders", vec![ApiPredicate::prefix("/orders/**")]);
        sentinel.api_definitions().load(vec![orders]).unwrap();
        let set = sentinel.rule_set();
        let rules = ResourceRules::of(&set.parts, "orders");
        assert!(rules.present(true).is_empty() && rules.present(false).is_empty());
        sentinel
            .gateway_rules()
            .load(vec![
                GatewayRule::api_group("orders", 1.0).param_item(GatewayParamItem::client_ip()),
            ])
            .unwrap();
        let set = sentinel.rule_set();
        assert!(
            !ResourceRules::of(&set.parts, "orders")
                .present(false)
                .is_empty()
        );
    }

    #[test]
    fn an_unchanged_definition_keeps_its_compiled_patterns() {
        let a = ApiDefinition::new("a", vec![ApiPredicate::regex("/a/[0-9]+")]);
        let b = ApiDefinition::new("b", vec![ApiPredicate::exact("/b")]);
        let first = ApiSet::compile(vec![a.clone(), b.clone()], &ApiSet::default());
        let changed = ApiDefinition::new("b", vec![ApiPredicate::exact("/c")]);
        let second = ApiSet::compile(vec![changed, a], &first);
        assert!(Arc::ptr_eq(&second.apis[1], &first.apis[0]));
        assert!(!Arc::ptr_eq(&second.apis[0], &first.apis[1]));
        assert!(second.apis[0].matches("/c") && !second.apis[0].matches("/b"));
        assert!(second.apis[1].matches("/a/7") && !second.apis[1].matches("/a/x"));
    }
}
