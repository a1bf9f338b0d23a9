//! `GatewayLayer` and `GatewayService`: each request enters its route's
//! resource and every API group its path matches, with the arguments the
//! gateway rules read.

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Extensions, HeaderMap, Request, Response, Uri};
use sentinel_flow_core::flow::{FlowGrade, FlowQuota, FlowRule};
use sentinel_flow_core::gateway::{GatewayGrade, GatewayRule};
use sentinel_flow_core::param_flow::{ParamFlowGrade, ParamFlowRule};
use sentinel_flow_core::{BlockError, BlockKind, Entering, EntryType, ParamValue, Queued};
use tower_layer::Layer;
use tower_service::Service;

use super::Gateway;
use super::client_ip::{Cidr, ClientIpSettings, peer};
use super::convert::{ArgSource, Plan, Target};
use super::extract::{
    ClientKey, RequestView, arguments, is_client_key, source_argument, without_client_key,
};
use super::future::{Entries, GatewayFuture};
use crate::block::{BlockReply, accepts_json, blocked_response, is_grpc};
use crate::headers::HeaderSettings;
use crate::name::clean_path;

/// A tower [`Layer`] that runs each request through the API definitions
/// and gateway rules in force on a [`Gateway`]'s instance.
///
/// The layer reads them from the instance (its `api_definitions` and
/// `gateway` kinds, however they were loaded: [`Gateway::load`], a rule
/// file, a rule source, the dashboard): what it reads per request is
/// compiled once per load of either kind, by the first request that finds
/// them changed, and shared by every gateway and layer of the instance.
///
/// A request enters, in order, its route's resource and the resource of
/// each API group whose predicates match its path (as Sentinel's gateway
/// filters do), each with the arguments its gateway rules read; the first
/// refusal answers it (`429`, `blocked by gateway` or by the kind of
/// another rule of the resource, `Retry-After` and, for a QPS rule,
/// `RateLimit-Policy` / `RateLimit` stating the caller's own limit: the
/// count of the value that was refused, per its window), and the entries
/// made before are left. A rate
/// limiter's queue waits on a tokio timer, the longest of the resources'
/// waits. The entries exit when the response body ends (or is dropped);
/// a 5xx response or an inner error is recorded as their error.
///
/// The route is the axum route template (`/orders/{id}`, inside a
/// `Router`), which is entered for every request; outside a `Router`, the
/// path through [`clean_path`](crate::clean_path), entered only when a
/// gateway rule names it (so that random paths make no resources).
///
/// The client IP is the connection's peer: axum's `ConnectInfo<SocketAddr>`
/// (serve with `into_make_service_with_connect_info::<SocketAddr>()`), or a
/// `SocketAddr` or `IpAddr` a hyper server put in the request's
/// extensions. Forwarding headers are read only when the peer is one of
/// the [`trusted_proxies`](Self::trusted_proxies). A request with no known
/// peer has no client IP (a per-IP rule lets it pass, or counts it as one
/// with `count_missing_as_one`; a warning is logged once).
#[derive(Clone)]
pub struct GatewayLayer {
    gateway: Gateway,
    ip: ClientIpSettings,
    headers: HeaderSettings,
}

impl GatewayLayer {
    /// A layer on `gateway`'s rules, trusting no proxy.
    pub fn new(gateway: &Gateway) -> Self {
        GatewayLayer {
            gateway: *gateway,
            ip: ClientIpSettings::default(),
            headers: HeaderSettings::default(),
        }
    }

    /// The proxies (load balancers, reverse proxies) whose forwarding
    /// headers are believed: when the connection's peer is in one of
    /// these blocks, the client is the right-most address of `Forwarded`
    /// (else `X-Forwarded-For`, else `X-Real-IP`) that is not, read over
    /// at most [`MAX_FORWARDED_HOPS`](super::MAX_FORWARDED_HOPS) hops.
    /// Headers from any other peer are ignored: a client cannot choose its
    /// address by sending one. Replaces the list given before.
    pub fn trusted_proxies(mut self, proxies: impl IntoIterator<Item = Cidr>) -> Self {
        let trusted: Arc<[Cidr]> = proxies.into_iter().collect();
        self.ip.trusted = (!trusted.is_empty()).then_some(trusted);
        self
    }

    /// IPv6 clients are limited by their first `bits` bits (default 64,
    /// a site's usual allocation, so one host cannot mint a new key per
    /// address; at most 128).
    pub fn ipv6_prefix(mut self, bits: u8) -> Self {
        self.ip.ipv6_prefix = bits.min(128);
        self
    }

    /// IPv4 clients are limited by their first `bits` bits (default 32,
    /// each address; at most 32).
    pub fn ipv4_prefix(mut self, bits: u8) -> Self {
        self.ip.ipv4_prefix = bits.min(32);
        self
    }

    /// Whether refusals by a QPS rule carry `RateLimit-Policy` and
    /// `RateLimit` (default on).
    pub fn rate_limit_headers(mut self, on: bool) -> Self {
        self.headers.ietf = on;
        self
    }
}

impl fmt::Debug for GatewayLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GatewayLayer")
            .field("gateway", &self.gateway)
            .field(
                "trusted_proxies",
                &self.ip.trusted.as_deref().unwrap_or(&[]),
            )
            .finish_non_exhaustive()
    }
}

impl<S> Layer<S> for GatewayLayer {
    type Service = GatewayService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GatewayService {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service made by [`GatewayLayer`]. A clone copies a few words and
/// touches no shared reference count (axum clones a route's service for
/// every request), unless the layer trusts proxies: then it holds their
/// list by one.
#[derive(Clone)]
pub struct GatewayService<S> {
    inner: S,
    layer: GatewayLayer,
}

impl<S: fmt::Debug> fmt::Debug for GatewayService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GatewayService")
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

/// What [`GatewayLayer::admit`] decided for an admitted request; the
/// entries it made are in the caller's list, and a refusal's answer in
/// the caller's place for it, which decides first (a small answer moves
/// neither).
enum Admission {
    Entered,
    Queued(Vec<Queued<'static>>),
}

static NO_PEER_WARNED: AtomicBool = AtomicBool::new(false);

impl GatewayLayer {
    /// Enters the request's resources with `plan` (the plan of the rules
    /// in force), pushing each entry to `entries`; a refusal's answer is
    /// written to `refusal`.
    #[inline(always)]
    fn admit(
        &self,
        plan: &Plan,
        uri: &Uri,
        headers: &HeaderMap,
        extensions: &Extensions,
        entries: &mut Entries,
        refusal: &mut Option<Response<Bytes>>,
    ) -> Admission {
        let sentinel = self.gateway.inner.sentinel;
        let path = uri.path();
        let find = || self.client_key(headers, extensions);
        let mut view = RequestView {
            uri,
            headers,
            client: ClientKey::new(&find),
        };
        let mut queued = Vec::new();
        // Enters one resource; `true` when it refused the request.
        let mut enter = |name: &str, target: Option<&Target>| -> bool {
            let builder = match target.and_then(|target| target.resource.as_ref()) {
                Some(resource) => resource.builder(),
                None => sentinel.entry_builder(name),
            };
            let sources = target.map_or(&[][..], |target| &target.args);
            with_arguments(sources, &mut view, |args| {
                let entering = builder
                    .entry_type(EntryType::Inbound)
                    .args(args)
                    .enter_or_queue();
                match entering {
                    Ok(Entering::Entered(entry)) => entries.push(entry),
                    Ok(Entering::Queued(wait)) => queued.push(wait),
                    Err(block) => {
                        *refusal = Some(self.refused(&block, args, headers));
                        return true;
                    }
                }
                false
            })
        };
        let mut refused = false;
        match route_name(extensions) {
            Some(template) => refused = enter(template, plan.routes.get(template)),
            // Outside a `Router` a path is entered only when a rule names
            // it: when no rule's name can be this path's, there is
            // nothing to clean it for.
            None if !plan.may_name_route(path) => {}
            None => {
                let cleaned = clean_path(path);
                if let Some(target) = plan.routes.get(cleaned.as_ref()) {
                    refused = enter(&cleaned, Some(target));
                }
            }
        }
        if !refused {
            for api in plan.apis.iter().filter(|api| api.matches(path)) {
                refused = enter(api.name(), Some(&api.target));
                if refused {
                    break;
                }
            }
        }
        // A refused request's waits are cancelled here (they are dropped).
        if refused || queued.is_empty() {
            Admission::Entered
        } else {
            Admission::Queued(queued)
        }
    }

    /// The client's key: its address as [`ClientIpSettings`] finds and
    /// groups it, as text; `None` without a known peer.
    fn client_key(&self, headers: &HeaderMap, extensions: &Extensions) -> Option<ParamValue> {
        match peer(extensions) {
            Some(peer) => Some(ClientIpSettings::text(
                self.ip.group(self.ip.client(peer, headers)),
            )),
            None => {
                if !NO_PEER_WARNED.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "sentinel gateway: a request without its peer address; \
                         serve with `into_make_service_with_connect_info::<SocketAddr>()` \
                         for per-IP rules"
                    );
                }
                None
            }
        }
    }

    #[cold]
    fn refused(
        &self,
        block: &BlockError,
        args: &[ParamValue],
        headers: &HeaderMap,
    ) -> Response<Bytes> {
        let quota = if self.headers.any() {
            match block.kind() {
                BlockKind::Flow => block
                    .rule_as::<FlowRule>()
                    .filter(|rule| rule.grade == FlowGrade::Qps)
                    .and_then(|rule| {
                        let resource = self.gateway.inner.sentinel.resource(block.resource());
                        resource.flow_quota_refused(rule)
                    }),
                BlockKind::ParamFlow => block
                    .rule_as::<ParamFlowRule>()
                    .and_then(|rule| param_quota(rule, args)),
                BlockKind::Gateway => block.rule_as::<GatewayRule>().and_then(gateway_quota),
                _ => None,
            }
        } else {
            None
        };
        blocked_response(
            block,
            BlockReply {
                grpc: is_grpc(headers),
                json: accepts_json(headers),
                quota,
                headers: self.headers,
                custom: None,
            },
        )
    }
}

/// The quota of the value a QPS `param_flow` rule refused: its own count
/// (an item's, else the rule's) per the rule's duration; nothing remains,
/// and the value's bucket refills whole within the duration (the reset
/// stated is that bound).
fn param_quota(rule: &ParamFlowRule, args: &[ParamValue]) -> Option<FlowQuota> {
    if rule.grade != ParamFlowGrade::Qps {
        return None;
    }
    let value = args.get(usize::try_from(rule.param_idx).ok()?)?;
    let count = rule
        .param_flow_item_list
        .iter()
        .find(|item| item.value == *value)
        .map_or(rule.count, |item| item.count);
    let window_ms = rule.duration_in_sec.saturating_mul(1_000);
    Some(FlowQuota {
        // Whole numbers, as the check reads them.
        limit: count as u64,
        window_ms,
        remaining: 0,
        reset_ms: window_ms,
    })
}

/// The quota of the value a QPS gateway rule refused: its count per its
/// interval (a value outside the rule's pattern is never refused, so the
/// refused value's count is the rule's); nothing remains, and the value's
/// bucket refills whole within the interval (the reset stated is that
/// bound).
fn gateway_quota(rule: &GatewayRule) -> Option<FlowQuota> {
    if rule.grade != GatewayGrade::Qps {
        return None;
    }
    let window_ms = rule.interval_sec.saturating_mul(1_000);
    Some(FlowQuota {
        // Whole numbers, as the check reads them.
        limit: rule.count as u64,
        window_ms,
        remaining: 0,
        reset_ms: window_ms,
    })
}

/// The route template of a request inside an axum `Router`.
fn route_name(extensions: &Extensions) -> Option<&str> {
    #[cfg(feature = "axum")]
    if let Some(matched) = extensions.get::<axum::extract::MatchedPath>() {
        return Some(matched.as_str());
    }
    let _ = extensions;
    None
}

/// Calls `f` with the arguments of `sources`: none or one on the stack
/// (the common gateway rule set: one parameter item per resource), more
/// in a buffer kept per thread (no allocation per request once it has
/// grown). `f` is called in one place only, so that it is inlined here.
#[inline(always)]
fn with_arguments<R, F: Fn() -> Option<ParamValue>>(
    sources: &[ArgSource],
    view: &mut RequestView<'_, F>,
    f: impl FnOnce(&[ParamValue]) -> R,
) -> R {
    let one;
    let mut scratch = None;
    let args: &[ParamValue] = match sources {
        [] => &[],
        [source] if is_client_key(source) => match view.client.get() {
            Some(key) => std::slice::from_ref(key),
            None => {
                one = [without_client_key(source)];
                &one
            }
        },
        [source] => {
            one = [source_argument(source, view)];
            &one
        }
        _ => scratch.insert(many_arguments(sources, view)),
    };
    let result = f(args);
    if let Some(scratch) = scratch {
        give_back(scratch);
    }
    result
}

/// The arguments of two or more `sources`, in the thread's buffer.
#[cold]
fn many_arguments<F: Fn() -> Option<ParamValue>>(
    sources: &[ArgSource],
    view: &mut RequestView<'_, F>,
) -> Vec<ParamValue> {
    // (A thread past its locals' end, shutting down, gets a new one.)
    let mut scratch = ARGS.try_with(Cell::take).unwrap_or_default();
    scratch.clear();
    arguments(sources, view, &mut scratch);
    scratch
}

/// Returns the thread's buffer of arguments, emptied.
#[cold]
fn give_back(mut scratch: Vec<ParamValue>) {
    scratch.clear();
    let _ = ARGS.try_with(|args| args.set(scratch));
}

thread_local! {
    /// Each thread's buffer for the arguments of an entry.
    static ARGS: Cell<Vec<ParamValue>> = const { Cell::new(Vec::new()) };
}

impl<S, ReqB, ResB> Service<Request<ReqB>> for GatewayService<S>
where
    S: Service<Request<ReqB>, Response = Response<ResB>> + Clone,
    ResB: http_body::Body<Data = Bytes>,
{
    type Response = Response<super::GatewayBody<ResB>>;
    type Error = S::Error;
    type Future = GatewayFuture<S, ReqB>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqB>) -> Self::Future {
        let mut entries = Entries::default();
        // The refusal's answer, written in place (it is large to move).
        let mut refusal = None;
        let layer = &self.layer;
        let admission = layer.gateway.inner.with_plan(|plan| {
            layer.admit(
                plan,
                request.uri(),
                request.headers(),
                request.extensions(),
                &mut entries,
                &mut refusal,
            )
        });
        if let Some(response) = refusal {
            // The entries made before the refusal are left.
            drop(entries);
            return GatewayFuture::blocked(response);
        }
        match admission {
            Admission::Entered => GatewayFuture::called(entries, self.inner.call(request)),
            Admission::Queued(queued) => {
                // The ready service waits in the future; its clone stays
                // for the next poll_ready (tower's usual swap).
                let clone = self.inner.clone();
                let ready = std::mem::replace(&mut self.inner, clone);
                GatewayFuture::queued(entries, queued, ready, request)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sentinel_flow_core::{ManualClock, Sentinel};

    #[test]
    fn a_layer_without_trusted_proxies_holds_no_list() {
        let sentinel = Box::leak(Box::new(
            Sentinel::builder().clock(ManualClock::new(0)).build(),
        ));
        let gateway = Gateway::new(sentinel);
        let layer = GatewayLayer::new(&gateway);
        assert!(layer.ip.trusted.is_none());
        let none = layer.clone().trusted_proxies([]);
        assert!(none.ip.trusted.is_none());
        let some = layer.trusted_proxies(["10.0.0.0/8".parse().unwrap()]);
        assert_eq!(some.ip.trusted.as_deref().map(<[Cidr]>::len), Some(1));
    }
}
