//! Gateway flow control, as Sentinel's API-gateway adapter: API
//! definitions group paths, and gateway rules limit a route or an API
//! group, as a whole or per value of a request attribute (the client IP,
//! the host, a header such as an API key, a query parameter, a cookie).
//!
//! A [`Gateway`] holds the definitions and rules of one instance and turns
//! them into the core's `flow` and `param_flow` rules; a [`GatewayLayer`]
//! makes each request enter its route's resource and the resource of
//! every API group its path matches, with the values its rules read as
//! the entries' arguments, and answers a refused request with `429`,
//! `Retry-After` and the rate-limit headers of the caller's own limit.
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
mod layer;
mod matcher;
mod model;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Weak};

use arc_swap::ArcSwap;
use sentinel_flow_core::{RuleErrors, Sentinel};

pub use client_ip::{Cidr, CidrError, MAX_FORWARDED_HOPS};
pub use error::{GatewayError, GatewayErrors};
pub use future::{GatewayBody, GatewayFuture};
pub use layer::{GatewayLayer, GatewayService};
pub use model::{
    ApiDefinition, ApiPredicate, GatewayBehavior, GatewayGrade, GatewayParamItem, GatewayRule,
    MAX_API_DEFINITIONS, MAX_API_PREDICATES, MAX_FIELD_NAME_LEN, MAX_GATEWAY_NAME_LEN,
    MAX_GATEWAY_RULES, MAX_PARAM_ITEMS_PER_RESOURCE, MAX_PATTERN_LEN, MAX_REGEX_BYTES,
    ParseStrategy, PathMatch, ResourceMode, ValueMatch,
};

use convert::Plan;

/// The API definitions and gateway rules of one instance; clones share
/// them.
///
/// [`load`](Self::load) validates both lists, converts the rules (see the
/// [module](self)) and puts the core rules they become in force in one
/// swap of the instance's rule book. The gateway owns the `flow` and
/// `param_flow` rules of the resources its rules name: a load replaces
/// those (of this load and the one before) and keeps every other rule.
///
/// Its rules stay in force when the instance's rules are replaced
/// otherwise (a rule file reloaded, the dashboard, code loading a kind):
/// when a load leaves any of them out, the gateway puts them back at once,
/// keeping every rule of other resources, so per-client limits are never
/// lost to a reload; a rule of another source on a resource the gateway
/// owns (a rule file written back with the gateway's rules in it, then
/// edited) is replaced by the gateway's.
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

struct Inner {
    sentinel: &'static Sentinel,
    plan: ArcSwap<Plan>,
    loading: Mutex<()>,
}

impl Gateway {
    /// A gateway on `sentinel`, with no definitions and no rules.
    pub fn new(sentinel: &'static Sentinel) -> Self {
        let inner = Arc::new(Inner {
            sentinel,
            plan: ArcSwap::from_pointee(Plan::default()),
            loading: Mutex::new(()),
        });
        // Listeners run after a load, with no lock held; a weak handle, so
        // that a dropped gateway leaves nothing behind but a no-op.
        let weak = Arc::downgrade(&inner);
        sentinel.flow_rules().on_change(move |_| restore(&weak));
        let weak = Arc::downgrade(&inner);
        sentinel
            .param_flow_rules()
            .on_change(move |_| restore(&weak));
        Gateway { inner }
    }

    /// The instance the gateway's rules are loaded into.
    pub fn sentinel(&self) -> &'static Sentinel {
        self.inner.sentinel
    }

    /// Replaces the API definitions and gateway rules. When any is
    /// invalid, or the instance refuses the core rules they become (its
    /// rule memory budget, its name caps), nothing changes and every
    /// problem is returned (`kind` `core` for the instance's refusals).
    pub fn load(
        &self,
        definitions: Vec<ApiDefinition>,
        rules: Vec<GatewayRule>,
    ) -> Result<(), GatewayErrors> {
        let mut plan = convert::compile(definitions, rules)?;
        // One load at a time: each reads the rules the one before owned.
        let _loading = self
            .inner
            .loading
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let before = self.inner.plan.load_full();
        self.inner.merge(&before, &plan)?;
        // Handles found once the rules are in force (their names then
        // have nodes outside the caps).
        plan.attach(self.inner.sentinel);
        self.inner.plan.store(Arc::new(plan));
        Ok(())
    }

    /// The API definitions in force, as loaded.
    pub fn api_definitions(&self) -> Vec<ApiDefinition> {
        self.inner.plan.load().definitions.clone()
    }

    /// The gateway rules in force, as loaded.
    pub fn rules(&self) -> Vec<GatewayRule> {
        self.inner.plan.load().rules.clone()
    }
}

impl Inner {
    /// Loads the instance's rule book with `plan`'s core rules in place of
    /// those of the resources `before` and `plan` own.
    fn merge(&self, before: &Plan, plan: &Plan) -> Result<(), GatewayErrors> {
        let owned: HashSet<&str> = before
            .resources()
            .into_iter()
            .chain(plan.resources())
            .collect();
        let mut book = self.sentinel.rule_book();
        book.flow
            .retain(|rule| !owned.contains(rule.resource.as_str()));
        book.param_flow
            .retain(|rule| !owned.contains(rule.resource.as_str()));
        book.flow.extend(plan.flow.iter().cloned());
        book.param_flow.extend(plan.param.iter().cloned());
        self.sentinel.load_rule_book(book).map_err(core_errors)
    }

    /// Whether the rules in force on the resources `plan` owns are
    /// exactly its core rules (none missing, none of another source).
    fn in_force(&self, plan: &Plan) -> bool {
        let owned = plan.resources();
        let book = self.sentinel.rule_book();
        let flow: Vec<_> = book
            .flow
            .iter()
            .filter(|rule| owned.contains(rule.resource.as_str()))
            .collect();
        let param: Vec<_> = book
            .param_flow
            .iter()
            .filter(|rule| owned.contains(rule.resource.as_str()))
            .collect();
        flow.len() == plan.flow.len()
            && param.len() == plan.param.len()
            && plan.flow.iter().all(|rule| flow.contains(&rule))
            && plan.param.iter().all(|rule| param.contains(&rule))
    }
}

/// Puts the gateway's rules back when a load of the instance's rules left
/// any out. Skipped while the gateway loads: then it is the gateway's own
/// load waking the listener (on the same thread), which puts its rules in
/// itself.
fn restore(inner: &Weak<Inner>) {
    let Some(inner) = inner.upgrade() else {
        return;
    };
    let Ok(_loading) = inner.loading.try_lock() else {
        return;
    };
    let plan = inner.plan.load_full();
    if inner.in_force(&plan) {
        return;
    }
    if let Err(errors) = inner.merge(&plan, &plan) {
        tracing::warn!(%errors, "sentinel gateway: its rules could not be put back in force");
    }
}

fn core_errors(errors: RuleErrors) -> GatewayErrors {
    GatewayErrors(
        errors
            .0
            .into_iter()
            .map(|error| {
                GatewayError::new(
                    "core",
                    error.index,
                    &error.resource,
                    format!("{}.{}", error.kind, error.field),
                    error.message,
                )
            })
            .collect(),
    )
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plan = self.inner.plan.load();
        f.debug_struct("Gateway")
            .field("api_definitions", &plan.definitions.len())
            .field("rules", &plan.rules.len())
            .finish()
    }
}
