//! Gateway flow control, as Sentinel's API-gateway adapter: API
//! definitions group paths, and gateway rules limit a route or an API
//! group, as a whole or per value of a request attribute (the client IP,
//! the host, a header such as an API key, a query parameter, a cookie).
//!
//! The definitions and rules are rule kinds of the instance
//! (`api_definitions` and `gateway`, see [`sentinel_flow_core::gateway`]):
//! [`Gateway::load`] loads both in one swap, and a rule file's
//! `api_definitions:` and `gateway:` sections, a rule source, the rules
//! store and the dashboard load them like any other kind; no other kind's
//! load touches them. A [`GatewayLayer`] reads them from the instance and
//! makes each request enter its route's resource and the resource of
//! every API group its path matches, with the values its rules read as
//! the entries' arguments, and answers a refused request with `429`,
//! `Retry-After` and the rate-limit headers of the caller's own limit. A
//! rule naming an API group that is not defined matches no request, as in
//! Sentinel.
//!
//! ```
//! use sentinel_flow_core::{ManualClock, Sentinel};
//! use sentinel_flow_tower::gateway::{
//!     ApiDefinition, ApiPredicate, Gateway, GatewayLayer, GatewayParamItem, GatewayRule,
//! };
//!
//! let sentinel: &'static Sentinel =
//!     Box::leak(Box::new(Sentinel::builder().clock(ManualClock::new(0)).build()));
//! let gateway = Gateway::new(sentinel);
//! gateway.load(
//!     vec![ApiDefinition::new("orders", vec![ApiPredicate::prefix("/orders/**")])],
//!     // Each client IP: 10 requests per second on the API.
//!     vec![GatewayRule::api_group("orders", 10.0).param_item(GatewayParamItem::client_ip())],
//! )?;
//! let layer = GatewayLayer::new(&gateway).trusted_proxies(["10.0.0.0/8".parse()?]);
//! let app: axum::Router = axum::Router::new()
//!     .route("/orders/{id}", axum::routing::get(|| async { "an order" }))
//!     .layer(layer);
//! # drop(app);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod client_ip;
mod convert;
mod error;
mod extract;
mod future;
mod held;
mod layer;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;
use sentinel_flow_core::gateway::GatewayInForce;
use sentinel_flow_core::{RuleErrors, Sentinel};

pub use client_ip::{Cidr, CidrError, MAX_FORWARDED_HOPS};
pub use error::{GatewayError, GatewayErrors};
pub use future::{GatewayBody, GatewayFuture};
pub use layer::{GatewayLayer, GatewayService};
pub use sentinel_flow_core::gateway::{
    ApiDefinition, ApiPredicate, GatewayBehavior, GatewayGrade, GatewayParamItem, GatewayRule,
    MAX_API_DEFINITIONS, MAX_API_PREDICATES, MAX_FIELD_NAME_LEN, MAX_GATEWAY_NAME_LEN,
    MAX_GATEWAY_RULES, MAX_PARAM_ITEMS_PER_RESOURCE, MAX_PATTERN_LEN, MAX_REGEX_BYTES,
    ParseStrategy, PathMatch, ResourceMode, ValueMatch,
};

use convert::Plan;

/// The API definitions and gateway rules of one instance, and what its
/// layers read of them per request; every gateway of an instance shares
/// them.
///
/// [`load`](Self::load) replaces both kinds in one swap of the instance's
/// rules; they may as well come from a rule file, a rule source or the
/// dashboard. Either way the other kinds' loads leave them in force.
///
/// A gateway is a reference (`Copy`): the state it reaches (the last plan
/// made and the lock its builders take) is kept once per instance, in a
/// process-wide map by the instance's address, for as long as the
/// instance (which it borrows for `'static`). A layer's services, cloned
/// for every request by axum, so touch no shared reference count, unless
/// the layer trusts proxies (their list is shared).
#[derive(Clone, Copy)]
pub struct Gateway {
    inner: &'static Inner,
}

/// The gateway state of each instance that has one, by the instance's
/// address (an instance borrowed for `'static` is never freed, so an
/// address names one instance): one small record per instance.
static STATES: Mutex<Option<HashMap<usize, &'static Inner>>> = Mutex::new(None);

/// The gateway state of `sentinel`, made on its first gateway.
fn state_of(sentinel: &'static Sentinel) -> &'static Inner {
    let mut states = STATES.lock().unwrap_or_else(PoisonError::into_inner);
    states
        .get_or_insert_with(HashMap::new)
        .entry(std::ptr::from_ref(sentinel) as usize)
        .or_insert_with(|| {
            Box::leak(Box::new(Inner {
                sentinel,
                plan: ArcSwap::from_pointee(Plan::default()),
                building: Mutex::new(()),
            }))
        })
}

struct Inner {
    sentinel: &'static Sentinel,
    /// The plan made last, handed to the next rule set when its gateway
    /// kinds are the same (the sets keep the plans the layers read).
    plan: ArcSwap<Plan>,
    /// One plan made at a time.
    building: Mutex<()>,
}

impl Gateway {
    /// A gateway on `sentinel`, reading the definitions and rules in
    /// force there.
    pub fn new(sentinel: &'static Sentinel) -> Self {
        Gateway {
            inner: state_of(sentinel),
        }
    }

    /// The instance the gateway's rules are loaded into.
    pub fn sentinel(&self) -> &'static Sentinel {
        self.inner.sentinel
    }

    /// Replaces the API definitions and gateway rules in one swap
    /// ([`Sentinel::load_gateway`]), leaving every other kind of the
    /// instance's rules as it is. When any is invalid, or the instance
    /// refuses them (its rule memory budget, its name caps), nothing
    /// changes and every problem is returned.
    pub fn load(
        &self,
        definitions: Vec<ApiDefinition>,
        rules: Vec<GatewayRule>,
    ) -> Result<(), GatewayErrors> {
        self.inner
            .sentinel
            .load_gateway(definitions, rules)
            .map_err(core_errors)
    }

    /// The API definitions in force, as loaded.
    pub fn api_definitions(&self) -> Vec<ApiDefinition> {
        self.inner.sentinel.api_definitions().rules()
    }

    /// The gateway rules in force, as loaded.
    pub fn rules(&self) -> Vec<GatewayRule> {
        self.inner.sentinel.gateway_rules().rules()
    }
}

impl Inner {
    /// Calls `f` with the plan of the definitions and rules in force:
    /// kept with the instance's rule set, so that a request finds it
    /// through the same per-thread cache as its entries.
    #[inline]
    fn with_plan<R>(&self, f: impl FnOnce(&Plan) -> R) -> R {
        self.sentinel
            .with_gateway_plan(|source| self.plan_of(source), f)
    }

    /// The plan of `source` (a new rule set's gateway kinds): the last one
    /// made when its rules are the same (a load of another kind), else a
    /// new one.
    #[cold]
    fn plan_of(&self, source: GatewayInForce) -> Arc<Plan> {
        let _building = self
            .building
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let last = self.plan.load_full();
        if last
            .source
            .as_ref()
            .is_some_and(|made| made.same_rules(&source))
        {
            return last;
        }
        let plan = Arc::new(Plan::new(self.sentinel, source));
        self.plan.store(Arc::clone(&plan));
        plan
    }
}

fn core_errors(errors: RuleErrors) -> GatewayErrors {
    GatewayErrors(
        errors
            .0
            .into_iter()
            .map(|error| {
                GatewayError::new(
                    error.kind,
                    error.index,
                    &error.resource,
                    error.field,
                    error.message,
                )
            })
            .collect(),
    )
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("api_definitions", &self.api_definitions().len())
            .field("rules", &self.rules().len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sentinel_flow_core::ManualClock;

    fn instance() -> &'static Sentinel {
        Box::leak(Box::new(
            Sentinel::builder().clock(ManualClock::new(0)).build(),
        ))
    }

    #[test]
    fn the_gateways_of_an_instance_share_one_state_and_no_other() {
        let (a, b) = (instance(), instance());
        assert!(std::ptr::eq(Gateway::new(a).inner, Gateway::new(a).inner));
        assert!(!std::ptr::eq(Gateway::new(a).inner, Gateway::new(b).inner));
        assert!(std::ptr::eq(Gateway::new(b).sentinel(), b));
    }
}
