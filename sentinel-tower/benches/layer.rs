//! The cost of one request through `SentinelLayer`, against the same
//! service called directly (the baseline) and through `tower_governor` (the
//! peer users compare us with), in one criterion group per setting so every
//! result reads as a ratio to its neighbours of the same run.
//!
//! Each case calls a ready service through `oneshot` and polls the future
//! once with a no-op waker (the services here are ready at once); the
//! response body is axum's `Body`. What differs between cases is the
//! middleware's work: naming, entering, recording, exiting.
//!
//! - `request`: a bare `service_fn`, as `tower::ServiceBuilder` users have;
//! - `router`: an axum `Router` with one route, the layers added with
//!   `route_layer`, so the name comes from `MatchedPath`;
//! - `per_ip`: a limit per client IP, 256 clients in turn (the peer's
//!   address in `ConnectInfo`): `tower_governor` with its
//!   `PeerIpKeyExtractor` against a gateway rule per client IP on an API
//!   group over every path (`GatewayLayer`), each with a limit no client
//!   reaches in a bench's time, the gateway's instance on the production
//!   clock;
//! - `per_ip_two_threads`: the `per_ip` cases on two threads at once,
//!   the threads half the clients apart;
//! - `two_threads`: the `request` cases on two threads at once, each
//!   calling the same layer (its clones), as a multi-threaded runtime
//!   does. A round is one request on each thread, in parallel: on two
//!   free cores it takes what one request takes alone, plus what the
//!   threads' contention on shared state adds.
//!
//! Run: `cargo bench -p sentinel-flow-tower --bench layer`.

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use http::{Request, Response, Uri};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::{Clock, ManualClock, Sentinel, SystemClock};
use sentinel_flow_tower::SentinelLayer;
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::key_extractor::{GlobalKeyExtractor, PeerIpKeyExtractor};

async fn ok(_: Request<Body>) -> Result<Response<Body>, Infallible> {
    Ok(Response::new(Body::from("ok")))
}

fn request(uri: &'static str) -> Request<Body> {
    let mut request = Request::new(Body::empty());
    *request.uri_mut() = Uri::from_static(uri);
    request
}

/// Polls a future that is ready at once.
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the benchmarked call was not ready at once"),
    }
}

fn call<S>(service: &S, uri: &'static str) -> http::StatusCode
where
    S: Service<Request<Body>> + Clone,
    S::Response: HasStatus,
    S::Error: std::fmt::Debug,
{
    let response = ready(service.clone().oneshot(request(uri))).unwrap();
    let status = response.status();
    std::hint::black_box(response);
    status
}

trait HasStatus {
    fn status(&self) -> http::StatusCode;
}

impl<B> HasStatus for Response<B> {
    fn status(&self) -> http::StatusCode {
        Response::status(self)
    }
}

/// An instance on the production clock (`SystemClock`, the default), as
/// a service runs it: the per-IP cases, compared with tower_governor on
/// its own production clock.
fn production_instance() -> &'static Sentinel {
    Box::leak(Box::new(Sentinel::builder().build()))
}

fn instance(rules: Vec<FlowRule>) -> &'static Sentinel {
    let sentinel = Box::leak(Box::new(
        Sentinel::builder().clock(ManualClock::new(1_000)).build(),
    ));
    sentinel.flow_rules().load(rules).unwrap();
    sentinel
}

/// A QPS rule that never blocks in a bench's time. Its count, like any
/// real one, is within what a reject rule's quota leases serve (up to
/// 2^39 per second; the core's `--bench flow` uses the same): a count
/// above that takes the slower path of the window sum.
fn passing(resource: &str) -> FlowRule {
    FlowRule::new(resource, 1e11)
}

/// `tower_governor` with one global bucket: never empty (`blocking`: empty
/// after one request, refilled after an hour). A macro: the layer's type
/// names the `governor` crate, which `tower_governor` does not re-export.
macro_rules! governor {
    ($blocking:expr) => {{
        let mut builder = GovernorConfigBuilder::default().key_extractor(GlobalKeyExtractor);
        if $blocking {
            builder.period(Duration::from_secs(3_600)).burst_size(1);
        } else {
            builder.per_nanosecond(1).burst_size(u32::MAX);
        }
        GovernorLayer::new(Arc::new(builder.finish().unwrap()))
    }};
}

/// A bare `service_fn` behind `tower_governor`'s bucket that never empties.
fn peer_passing()
-> impl Service<Request<Body>, Response: HasStatus, Error: std::fmt::Debug> + Clone + Send + Sync {
    let peer = ServiceBuilder::new()
        .layer(governor!(false))
        .service(service_fn(ok));
    assert_eq!(call(&peer, "/orders"), 200);
    peer
}

/// A bare `service_fn` behind our layer, with a passing rule for `/orders`
/// and one for `/orders/{id}` (what `/orders/42` cleans to).
fn ours_passing()
-> impl Service<Request<Body>, Response: HasStatus, Error: std::fmt::Debug> + Clone + Send + Sync {
    let sentinel = instance(vec![passing("GET:/orders"), passing("GET:/orders/{id}")]);
    let ours = ServiceBuilder::new()
        .layer(SentinelLayer::with_sentinel(sentinel))
        .service(service_fn(ok));
    assert_eq!(call(&ours, "/orders"), 200);
    assert_eq!(call(&ours, "/orders/42"), 200);
    ours
}

fn request_group(c: &mut Criterion) {
    let mut group = c.benchmark_group("request");
    group.throughput(Throughput::Elements(1));

    let direct = service_fn(ok);
    assert_eq!(call(&direct, "/orders"), 200);
    group.bench_function("baseline: service_fn, no layer", |b| {
        b.iter(|| call(&direct, "/orders"))
    });

    let peer = peer_passing();
    group.bench_function("tower_governor, global key, pass", |b| {
        b.iter(|| call(&peer, "/orders"))
    });

    let peer_blocking = ServiceBuilder::new()
        .layer(governor!(true))
        .service(service_fn(ok));
    call(&peer_blocking, "/orders");
    assert_eq!(call(&peer_blocking, "/orders"), 429);
    group.bench_function("tower_governor, global key, block (429)", |b| {
        b.iter(|| call(&peer_blocking, "/orders"))
    });

    let ours = ours_passing();
    group.bench_function("sentinel, flow rule, pass, /orders", |b| {
        b.iter(|| call(&ours, "/orders"))
    });
    group.bench_function("sentinel, flow rule, pass, /orders/42 cleaned", |b| {
        b.iter(|| call(&ours, "/orders/42"))
    });

    let sentinel = instance(vec![FlowRule::new("GET:/orders", 0.0)]);
    let blocking = ServiceBuilder::new()
        .layer(SentinelLayer::with_sentinel(sentinel))
        .service(service_fn(ok));
    assert_eq!(call(&blocking, "/orders"), 429);
    group.bench_function("sentinel, flow rule, block (429)", |b| {
        b.iter(|| call(&blocking, "/orders"))
    });
    group.finish();
}

fn router_group(c: &mut Criterion) {
    let mut group = c.benchmark_group("router");
    group.throughput(Throughput::Elements(1));
    let route = || axum::Router::new().route("/orders/{id}", get(|| async { "ok" }));

    // `with_state` makes the routes' services once, as `axum::serve`
    // does; without it every call would make them (and apply the layers)
    // anew.
    let bare = route().with_state(());
    assert_eq!(call(&bare, "/orders/42"), 200);
    group.bench_function("baseline: Router, no layer", |b| {
        b.iter(|| call(&bare, "/orders/42"))
    });

    let peer = route().route_layer(governor!(false)).with_state(());
    assert_eq!(call(&peer, "/orders/42"), 200);
    group.bench_function("tower_governor, global key, pass", |b| {
        b.iter(|| call(&peer, "/orders/42"))
    });

    let sentinel = instance(vec![passing("GET:/orders/{id}")]);
    let ours = route()
        .route_layer(SentinelLayer::with_sentinel(sentinel))
        .with_state(());
    assert_eq!(call(&ours, "/orders/42"), 200);
    group.bench_function("sentinel, flow rule, pass, MatchedPath", |b| {
        b.iter(|| call(&ours, "/orders/42"))
    });

    let sentinel = instance(vec![passing("GET:/orders/{id}")]);
    let ours_axum = route()
        .route_layer(SentinelLayer::with_sentinel(sentinel).axum_body())
        .with_state(());
    assert_eq!(call(&ours_axum, "/orders/42"), 200);
    group.bench_function("sentinel, flow rule, pass, MatchedPath, axum_body", |b| {
        b.iter(|| call(&ours_axum, "/orders/42"))
    });
    group.finish();
}

/// A request from client `n` of 256 (`10.0.0.n`), its peer address in
/// axum's `ConnectInfo`, as `into_make_service_with_connect_info` puts it.
fn request_from(n: u8) -> Request<Body> {
    let mut request = request("/orders");
    let peer = std::net::SocketAddr::from(([10, 0, 0, n], 40_000));
    request
        .extensions_mut()
        .insert(axum::extract::ConnectInfo(peer));
    request
}

fn call_from<S>(service: &S, n: u8) -> http::StatusCode
where
    S: Service<Request<Body>> + Clone,
    S::Response: HasStatus,
    S::Error: std::fmt::Debug,
{
    let response = ready(service.clone().oneshot(request_from(n))).unwrap();
    let status = response.status();
    std::hint::black_box(response);
    status
}

/// The three services `per_ip` compares: the bare service,
/// tower_governor with its peer-IP key, and a gateway rule per client IP
/// on an API group over every path; each limit is one no client reaches.
#[allow(clippy::type_complexity)]
fn per_ip_services() -> (
    impl Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone + Send + Sync,
    impl Service<Request<Body>, Response: HasStatus, Error: std::fmt::Debug> + Clone + Send + Sync,
    impl Service<Request<Body>, Response: HasStatus, Error: std::fmt::Debug> + Clone + Send + Sync,
) {
    use sentinel_flow_core::param_flow::MAX_PARAM_COUNT;
    use sentinel_flow_tower::gateway::{
        ApiDefinition, ApiPredicate, Gateway, GatewayLayer, GatewayParamItem, GatewayRule,
    };

    let config = GovernorConfigBuilder::default()
        .key_extractor(PeerIpKeyExtractor)
        .per_nanosecond(1)
        .burst_size(u32::MAX)
        .finish()
        .unwrap();
    let peer = ServiceBuilder::new()
        .layer(GovernorLayer::new(Arc::new(config)))
        .service(service_fn(ok));

    let gateway = Gateway::new(production_instance());
    gateway
        .load(
            vec![ApiDefinition::new("all", vec![ApiPredicate::prefix("/**")])],
            vec![
                GatewayRule::api_group("all", MAX_PARAM_COUNT as f64)
                    .param_item(GatewayParamItem::client_ip()),
            ],
        )
        .unwrap();
    let ours = ServiceBuilder::new()
        .layer(GatewayLayer::new(&gateway))
        .service(service_fn(ok));
    (service_fn(ok), peer, ours)
}

fn per_ip_group(c: &mut Criterion) {
    let mut group = c.benchmark_group("per_ip");
    group.throughput(Throughput::Elements(1));
    let mut next = 0u8;
    let mut client = move || {
        next = next.wrapping_add(1);
        next
    };
    let (direct, peer, ours) = per_ip_services();

    assert_eq!(call_from(&direct, 1), 200);
    group.bench_function("baseline: service_fn, no layer", |b| {
        b.iter(|| call_from(&direct, client()))
    });
    assert_eq!(call_from(&peer, 1), 200);
    group.bench_function("tower_governor, peer IP key, pass", |b| {
        b.iter(|| call_from(&peer, client()))
    });
    assert_eq!(call_from(&ours, 1), 200);
    group.bench_function("sentinel gateway, client IP rule, pass", |b| {
        b.iter(|| call_from(&ours, client()))
    });
    group.finish();
}

fn per_ip_two_threads_group(c: &mut Criterion) {
    let mut group = c.benchmark_group("per_ip_two_threads");
    // A round is two requests, one per thread.
    group.throughput(Throughput::Elements(2));
    let (direct, peer, ours) = per_ip_services();
    group.bench_function("baseline: service_fn, no layer", |b| {
        b.iter_custom(|rounds| two_threads_per_ip(&direct, rounds))
    });
    group.bench_function("tower_governor, peer IP key, pass", |b| {
        b.iter_custom(|rounds| two_threads_per_ip(&peer, rounds))
    });
    group.bench_function("sentinel gateway, client IP rule, pass", |b| {
        b.iter_custom(|rounds| two_threads_per_ip(&ours, rounds))
    });
    group.finish();
}

/// Two threads calling `service` (each its clone) `rounds` times each, let
/// go together: the time from the first one's start to the last one's end,
/// by the production clock's precise reading (most instances here run on
/// a `ManualClock`, which does not move). Thread `t` makes its round `r`'s
/// call with `call(service, t, r)`.
fn on_two_threads<S, C>(service: &S, rounds: u64, call: C) -> Duration
where
    S: Service<Request<Body>> + Clone + Send + Sync,
    C: Fn(&S, u64, u64) -> http::StatusCode + Sync,
{
    let barrier = Barrier::new(2);
    let spans: Vec<(u64, u64)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2u64)
            .map(|thread| {
                let (barrier, call) = (&barrier, &call);
                scope.spawn(move || {
                    let service = service.clone();
                    barrier.wait();
                    let start = SystemClock.now_nanos();
                    for round in 0..rounds {
                        std::hint::black_box(call(&service, thread, round));
                    }
                    (start, SystemClock.now_nanos())
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("a bench thread panicked"))
            .collect()
    });
    let start = spans.iter().map(|span| span.0).min().expect("two spans");
    let end = spans.iter().map(|span| span.1).max().expect("two spans");
    Duration::from_nanos(end - start)
}

/// Two threads calling `service` at `uri`.
fn two_threads<S>(service: &S, uri: &'static str, rounds: u64) -> Duration
where
    S: Service<Request<Body>> + Clone + Send + Sync,
    S::Response: HasStatus,
    S::Error: std::fmt::Debug,
{
    on_two_threads(service, rounds, |service, _, _| call(service, uri))
}

/// Two threads calling `service` with requests from 256 clients in turn,
/// the threads half the clients apart (as a server's workers serve
/// different clients at once).
fn two_threads_per_ip<S>(service: &S, rounds: u64) -> Duration
where
    S: Service<Request<Body>> + Clone + Send + Sync,
    S::Response: HasStatus,
    S::Error: std::fmt::Debug,
{
    on_two_threads(service, rounds, |service, thread, round| {
        // Wraps at 256: the clients 1 to 255 and 0 in turn.
        call_from(service, (thread * 128 + round + 1) as u8)
    })
}

fn two_threads_group(c: &mut Criterion) {
    let mut group = c.benchmark_group("two_threads");
    // A round is two requests, one per thread.
    group.throughput(Throughput::Elements(2));

    let direct = service_fn(ok);
    group.bench_function("baseline: service_fn, no layer", |b| {
        b.iter_custom(|rounds| two_threads(&direct, "/orders", rounds))
    });

    let peer = peer_passing();
    group.bench_function("tower_governor, global key, pass", |b| {
        b.iter_custom(|rounds| two_threads(&peer, "/orders", rounds))
    });

    let ours = ours_passing();
    group.bench_function("sentinel, flow rule, pass, /orders", |b| {
        b.iter_custom(|rounds| two_threads(&ours, "/orders", rounds))
    });
    group.bench_function("sentinel, flow rule, pass, /orders/42 cleaned", |b| {
        b.iter_custom(|rounds| two_threads(&ours, "/orders/42", rounds))
    });
    group.finish();
}

criterion_group!(
    benches,
    request_group,
    router_group,
    per_ip_group,
    two_threads_group,
    per_ip_two_threads_group
);
criterion_main!(benches);
