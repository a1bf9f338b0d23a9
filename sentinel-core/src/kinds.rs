//! The rule kinds, declared once, in the chain's order.
//!
//! Each line names a kind: its field (in the rule set, the listeners and
//! the [`RuleBook`](crate::RuleBook)), its [`BlockKind`](crate::BlockKind)
//! variant, its type (the kind's [`RuleKind`](crate::rule::kind::RuleKind)
//! in its folder: rule, compiled form, slot), its rule's type, its manager accessor on
//! [`Sentinel`](crate::Sentinel), its name in logs, errors and metrics,
//! Sentinel's exception name for its blocks, and the docs of its block
//! kind and of its rules. Its position is its place in the chain and its
//! tally code.
//!
//! `rule_kinds!(then)` calls the macro `then` with the list; each part
//! built from it (the block kinds, the rule set's parts and per-resource
//! rules, the listeners, the rule book, the managers, the chain) is made
//! by a small macro beside the code it belongs to. The list names its
//! types by path only: this file imports nothing. The same list is
//! exported (`for_each_rule_kind!`, hidden) for the rules and transport
//! crates, which make their per-kind code (rule file sections, Sentinel's
//! JSON, commands) from it and each rule's description
//! ([`describe`](crate::describe)).

/// Calls `$then!` with every rule kind, in chain order: the list, for the
/// crates around the core (`sentinel-flow-rules` and
/// `sentinel-flow-transport` make their per-kind code from it). Each line:
/// field, `BlockKind` variant, `[kind type]`, `[rule type]` (paths below
/// the crate's root), manager accessor, name, Sentinel's exception name,
/// and two docs lines. Not a stable API.
#[doc(hidden)]
#[macro_export]
macro_rules! for_each_rule_kind {
    ($then:ident) => {
        $then! {
            authority Authority [authority::AuthorityKind] [authority::AuthorityRule] authority_rules "authority" "AuthorityException"
                "An origin white or black list." "Origin white and black lists.";
            system System [system::SystemKind] [system::SystemRule] system_rules "system" "SystemBlockException"
                "System adaptive protection." "System rules.";
            param_flow ParamFlow [param_flow::ParamFlowKind] [param_flow::ParamFlowRule] param_flow_rules "param_flow" "ParamFlowException"
                "A hot-parameter rule (a limit per argument value)." "Hot-parameter rules.";
            flow Flow [flow::FlowKind] [flow::FlowRule] flow_rules "flow" "FlowException"
                "A flow rule (QPS or concurrency)." "Flow rules.";
            degrade Degrade [degrade::DegradeKind] [degrade::DegradeRule] degrade_rules "degrade" "DegradeException"
                "An open circuit breaker." "Circuit-breaking rules.";
            adaptive Adaptive [adaptive::AdaptiveKind] [adaptive::AdaptiveRule] adaptive_rules "adaptive" "AdaptiveException"
                "An adaptive concurrency limit at its current value." "Adaptive concurrency rules.";
            gateway Gateway [gateway::GatewayKind] [gateway::GatewayRule] gateway_rules "gateway" "ParamFlowException"
                "A gateway rule (a limit on a route or an API group, per request attribute)." "Gateway rules.";
            api_definitions ApiDefinitions [gateway::ApiDefinitionsKind] [gateway::ApiDefinition] api_definitions "api_definitions" "ApiDefinitionException"
                "Never: an API definition refuses nothing." "API definitions (named groups of request paths).";
        }
    };
}

/// Calls `$then!` with every rule kind, in chain order.
macro_rules! rule_kinds {
    ($then:ident) => {
        for_each_rule_kind! { $then }
    };
}
