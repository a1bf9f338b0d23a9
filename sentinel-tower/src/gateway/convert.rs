//! What the layer reads per request, compiled from the API definitions
//! and gateway rules in force on the instance: each API with its resource
//! handle and the arguments its entries pass, and each route a rule names
//! likewise. The arguments follow the core's layout
//! ([`argument_indices`](sentinel_flow_core::gateway::argument_indices)):
//! the core compiled each rule to read the argument at its index.

use std::collections::HashMap;
use std::sync::Arc;

use http::header::HeaderName;
use sentinel_flow_core::gateway::{
    CompiledApi, GatewayArgument, GatewayInForce, ParseStrategy, ValueMatcher,
};
use sentinel_flow_core::{Resource, Sentinel};

/// Where one argument of a resource's entries comes from.
#[derive(Clone, Debug)]
pub(crate) enum ArgSource {
    Constant,
    Item(Item),
}

/// A parameter item, as the layer reads it.
#[derive(Clone, Debug)]
pub(crate) struct Item {
    pub(crate) parse: ParseStrategy,
    /// The header (for `Header`).
    pub(crate) header: Option<HeaderName>,
    /// The query parameter or cookie name.
    pub(crate) field: String,
    pub(crate) matcher: ValueMatcher,
    pub(crate) missing_as_one: bool,
}

/// An API definition, with what its entries read.
#[derive(Clone, Debug)]
pub(crate) struct Api {
    pub(crate) compiled: Arc<CompiledApi>,
    pub(crate) target: Target,
}

impl Api {
    #[inline]
    pub(crate) fn name(&self) -> &str {
        self.compiled.name()
    }

    #[inline]
    pub(crate) fn matches(&self, path: &str) -> bool {
        self.compiled.matches(path)
    }
}

/// A resource a request enters: its handle (found once per plan) and the
/// arguments its rules read.
#[derive(Clone, Debug, Default)]
pub(crate) struct Target {
    pub(crate) resource: Option<Resource<'static>>,
    pub(crate) args: Vec<ArgSource>,
}

type Map<V> = HashMap<String, V, foldhash::fast::RandomState>;

/// A set of bytes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ByteSet([u64; 4]);

impl ByteSet {
    fn insert(&mut self, byte: u8) {
        self.0[usize::from(byte >> 6)] |= 1 << (byte & 63);
    }

    fn contains(&self, byte: u8) -> bool {
        self.0[usize::from(byte >> 6)] & (1 << (byte & 63)) != 0
    }
}

/// What the layer reads per request, for one state of the instance's
/// gateway kinds.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// The definitions and rules it was made from; `None` before the
    /// first.
    pub(crate) source: Option<GatewayInForce>,
    pub(crate) apis: Vec<Api>,
    /// What a route's entries read, for each resource a rule names.
    pub(crate) routes: Map<Target>,
    /// The first bytes of the names in `routes`, so that a path no route
    /// can be named by is not cleaned and looked up.
    pub(crate) route_starts: ByteSet,
}

impl Plan {
    /// The plan of `source`, with the resource handles of every API and
    /// every resource a rule names on `sentinel`.
    pub(crate) fn new(sentinel: &'static Sentinel, source: GatewayInForce) -> Self {
        let args: Map<Vec<ArgSource>> = source
            .arguments()
            .into_iter()
            .map(|(resource, args)| {
                let args = args.into_iter().map(arg_source).collect();
                (resource.to_owned(), args)
            })
            .collect();
        let target = |name: &str| Target {
            resource: Some(sentinel.resource(name)),
            args: args.get(name).cloned().unwrap_or_default(),
        };
        let apis = source
            .apis()
            .iter()
            .map(|api| Api {
                compiled: Arc::clone(api),
                target: target(api.name()),
            })
            .collect();
        let routes: Map<Target> = args
            .keys()
            .map(|name| (name.clone(), target(name)))
            .collect();
        let mut route_starts = ByteSet::default();
        for name in routes.keys() {
            if let Some(&first) = name.as_bytes().first() {
                route_starts.insert(first);
            }
        }
        Plan {
            source: Some(source),
            apis,
            routes,
            route_starts,
        }
    }

    /// Whether a path cleaned by [`clean_path`](crate::clean_path) may be
    /// the name of one of `routes`: the cleaned path starts with the
    /// path's first byte, or with `{` when its first segment is an
    /// identifier (and is empty when the path is).
    pub(crate) fn may_name_route(&self, path: &str) -> bool {
        path.as_bytes().first().is_some_and(|&first| {
            self.route_starts.contains(first) || self.route_starts.contains(b'{')
        })
    }
}

fn arg_source(argument: GatewayArgument<'_>) -> ArgSource {
    match argument {
        GatewayArgument::Item { item, matcher } => {
            let field = item.field_name.clone().unwrap_or_default();
            ArgSource::Item(Item {
                parse: item.parse,
                // The core checked the name is a header token: it parses.
                header: match item.parse {
                    ParseStrategy::Header => HeaderName::try_from(field.as_str()).ok(),
                    _ => None,
                },
                field,
                matcher: matcher.clone(),
                missing_as_one: item.count_missing_as_one,
            })
        }
        _ => ArgSource::Constant,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sentinel_flow_core::gateway::{ApiDefinition, ApiPredicate, GatewayParamItem, GatewayRule};

    fn sentinel() -> &'static Sentinel {
        Box::leak(Box::new(
            Sentinel::builder()
                .clock(sentinel_flow_core::ManualClock::new(0))
                .build(),
        ))
    }

    fn plan(sentinel: &'static Sentinel, rules: Vec<GatewayRule>) -> Plan {
        let orders = ApiDefinition::new("orders", vec![ApiPredicate::prefix("/orders/**")]);
        sentinel.load_gateway(vec![orders], rules).unwrap();
        Plan::new(sentinel, sentinel.gateway_in_force())
    }

    #[test]
    fn each_rule_reads_the_argument_at_its_index_in_the_core() {
        let sentinel = sentinel();
        let plan = plan(
            sentinel,
            vec![
                GatewayRule::api_group("orders", 10.0).param_item(GatewayParamItem::client_ip()),
                GatewayRule::route("/x", 1.0),
                GatewayRule::api_group("orders", 100.0)
                    .param_item(GatewayParamItem::header("x-api-key")),
            ],
        );
        let args = &plan.apis[0].target.args;
        assert!(
            matches!(&args[..], [ArgSource::Item(ip), ArgSource::Item(key)]
            if ip.parse == ParseStrategy::ClientIp && key.header.as_ref().unwrap() == "x-api-key")
        );
        assert!(matches!(plan.routes["/x"].args[..], [ArgSource::Constant]));
    }

    #[test]
    fn a_plan_is_made_once_per_load_of_the_gateway_kinds() {
        let sentinel = sentinel();
        let _ = plan(sentinel, vec![GatewayRule::api_group("orders", 1.0)]);
        let gateway = super::super::Gateway::new(sentinel);
        let read = || {
            gateway
                .inner
                .with_plan(|plan| (plan as *const Plan, plan.apis.len()))
        };
        let (first, apis) = read();
        assert_eq!(apis, 1);
        assert_eq!(read().0, first, "made again without a load");
        // Another kind's load: a new rule set, the same plan.
        sentinel.flow_rules().load(vec![]).unwrap();
        assert_eq!(read().0, first, "made again after another kind's load");
        // A load of the definitions: a new plan.
        sentinel.api_definitions().load(vec![]).unwrap();
        let (second, apis) = read();
        assert!(second != first && apis == 0);
        assert_eq!(read().0, second);
    }

    #[test]
    fn a_path_may_name_a_route_only_as_its_cleaned_form_can() {
        let sentinel = sentinel();
        let orders = plan(sentinel, vec![GatewayRule::api_group("orders", 1.0)]);
        // Only the API's name: no path starting with `/` can be it.
        assert!(!orders.may_name_route("/orders/42"));
        assert!(orders.may_name_route("orders"));
        let route = plan(sentinel, vec![GatewayRule::route("/orders/{id}", 1.0)]);
        assert!(route.may_name_route("/orders/42") && !route.may_name_route("orders"));
        assert!(!route.may_name_route(""));
        // A name starting with an identifier's placeholder: any path whose
        // first segment is an identifier is cleaned to start with it.
        let placeholder = plan(sentinel, vec![GatewayRule::route("{id}/a", 1.0)]);
        assert_eq!(crate::clean_path("42/a"), "{id}/a");
        assert!(placeholder.may_name_route("42/a"));
        assert!(!placeholder.may_name_route(""));
        assert!(!Plan::default().may_name_route("/orders"));
    }
}
