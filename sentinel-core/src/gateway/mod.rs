//! Gateway flow control, as Sentinel's API-gateway adapter: API
//! definitions ([`ApiDefinition`]) group request paths under a name, and
//! gateway rules ([`GatewayRule`]) limit a route or an API group, as a
//! whole or per value of a request attribute (the client IP, the host, a
//! header such as an API key, a query parameter, a cookie).
//!
//! Both are rule kinds of the instance (`api_definitions` and `gateway`):
//! loaded, swapped, stored, read from rule files and sources and served by
//! the command API like every other kind, and untouched by another kind's
//! load. An HTTP adapter (`sentinel-flow-tower`'s `GatewayLayer`) reads
//! them from the instance: it enters a request's route and each API group
//! its path matches, passing as the entry's arguments the values the
//! resource's gateway rules read, in the order [`argument_indices`] gives.
//!
//! The gateway kind's check is the hot-parameter check (see
//! [`param_flow`](crate::param_flow)) over rules compiled from the
//! gateway rules, as Sentinel's `GatewayRuleConverter` converts them: each
//! rule reads its own argument of the resource's entries, with its
//! `count` per `interval_sec`, its `burst`, its behaviour and its queueing
//! time; values its item's pattern does not match, and missing ones, come
//! as one marker value ([`not_matched`]) whose threshold no traffic
//! reaches, so they pass; a rule without an item reads a constant
//! ([`constant`]), limiting the resource as a whole. Every value takes a
//! place in the rule's table of hot values, bounded as a hot-parameter
//! rule's ([`ParamFlowRule::effective_capacity`](crate::param_flow::ParamFlowRule::effective_capacity)).
//!
//! A rule naming an API group that is not defined matches no request, as
//! in Sentinel: it is no error, and it applies once the group is defined.
//!
//! ```
//! use sentinel_flow_core::gateway::{ApiDefinition, ApiPredicate, GatewayParamItem, GatewayRule};
//! use sentinel_flow_core::{BlockKind, ManualClock, ParamValue, Sentinel};
//!
//! let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
//! sentinel.api_definitions().load(vec![ApiDefinition::new(
//!     "orders",
//!     vec![ApiPredicate::prefix("/orders/**")],
//! )])?;
//! // Each client IP: 2 requests per second on the API.
//! sentinel.gateway_rules().load(vec![
//!     GatewayRule::api_group("orders", 2.0).param_item(GatewayParamItem::client_ip()),
//! ])?;
//! let enter = |ip: &str| sentinel.entry_builder("orders").args(&[ParamValue::from(ip)]).enter();
//! assert!(enter("192.0.2.1").is_ok() && enter("192.0.2.1").is_ok());
//! assert_eq!(enter("192.0.2.1").unwrap_err().kind(), BlockKind::Gateway);
//! assert!(enter("192.0.2.2").is_ok());
//! # Ok::<(), sentinel_flow_core::RuleErrors>(())
//! ```
//!
//! The module is the two kinds: `model.rs` the rules as loaded,
//! `matcher.rs` their patterns compiled, `rule.rs` their validation,
//! `fields.rs` their description for the codecs, `compiled.rs` their
//! compiled forms (the hot-parameter rules a gateway rule becomes),
//! `slot.rs` the kinds and the gateway check, `in_force.rs` what an
//! adapter reads of them.

mod compiled;
mod fields;
mod in_force;
mod load;
mod matcher;
mod model;
mod rule;
mod slot;

pub use compiled::CompiledApi;
pub use in_force::{GatewayArgument, GatewayInForce};
pub use matcher::{PathMatcher, ValueMatcher};
pub use model::{
    ApiDefinition, ApiPredicate, GatewayBehavior, GatewayGrade, GatewayParamItem, GatewayRule,
    MAX_API_DEFINITIONS, MAX_API_PREDICATES, MAX_FIELD_NAME_LEN, MAX_GATEWAY_NAME_LEN,
    MAX_GATEWAY_RULES, MAX_PARAM_ITEMS_PER_RESOURCE, MAX_PATTERN_LEN, MAX_REGEX_BYTES,
    ParseStrategy, PathMatch, ResourceMode, ValueMatch,
};
pub(crate) use slot::{ApiDefinitionsKind, GatewayKind};

use std::collections::HashMap;

use crate::ParamValue;

/// The argument of a value a rule's item pattern does not match, or of a
/// missing one (the rule lets it pass: its threshold is out of reach).
/// Not a string: no value read from a request can be it.
pub fn not_matched() -> ParamValue {
    ParamValue::Bool(false)
}

/// The argument of every request without the item's attribute, when the
/// item counts them as one ([`GatewayParamItem::count_missing_as_one`]).
pub fn missing() -> ParamValue {
    ParamValue::Bool(true)
}

/// The argument a rule without a parameter item reads.
pub fn constant() -> ParamValue {
    ParamValue::Int(0)
}

/// Which argument of its resource's entries each rule of `rules` reads:
/// its place among the rules of the same resource (route or API name), in
/// the list's order. The gateway kind compiles its rules by it; an adapter
/// passes each rule's value at its index.
///
/// ```
/// use sentinel_flow_core::gateway::{GatewayRule, argument_indices};
///
/// let rules = [GatewayRule::route("/a", 1.0), GatewayRule::route("/b", 1.0), GatewayRule::route("/a", 2.0)];
/// assert_eq!(argument_indices(&rules), [0, 0, 1]);
/// ```
pub fn argument_indices(rules: &[GatewayRule]) -> Vec<usize> {
    let mut next: HashMap<&str, usize, foldhash::fast::RandomState> = HashMap::default();
    rules
        .iter()
        .map(|rule| {
            let at = next.entry(rule.resource.as_str()).or_insert(0);
            *at += 1;
            *at - 1
        })
        .collect()
}
