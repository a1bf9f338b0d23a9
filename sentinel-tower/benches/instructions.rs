//! Instructions per request of each case of `layer.rs`, for valgrind's
//! callgrind (repeatable where the machine's timings are not): runs one
//! case `N` times. The cost of one request is the difference between two
//! runs of different `N`, divided by the difference of `N`, which cancels
//! the set-up:
//!
//! ```sh
//! cargo bench -p sentinel-flow-tower --bench instructions --no-run
//! B=$(ls -t target/release/deps/instructions-* | grep -v '\.d$' | head -1)
//! for n in 10000 20000; do valgrind --tool=callgrind --callgrind-out-file=/dev/null \
//!     $B governor $n 2>&1 | grep 'refs'; done
//! ```
//!
//! Cases: `baseline`, `core`, `core-block`, `floor`, `governor`, `pass`,
//! `cleaned`, `block`, `block-json` (a client that accepts JSON),
//! `router-baseline`, `router-governor`, `router-pass`, `router-pass-axum`,
//! and per client IP (256 clients in turn, the peer in `ConnectInfo`):
//! `ip-baseline`, `ip-governor` (`PeerIpKeyExtractor`) and `ip-gateway`
//! (a gateway rule per client IP on an API group over every path, its
//! instance on the production clock, the default, as tower_governor runs
//! on its own; the other cases' instances run on a `ManualClock`).
//!
//! `core` is the floor of the core (its entry and exit in the handler,
//! no layer); `floor` the floor of any layer around it: a minimal one
//! (below, [`Floor`]) that enters one fixed resource and holds the entry
//! in its future until the response, with nothing else: no naming, no
//! response checks, no headers.
//!
//! `$B time 15` instead times every case in turn, 15 rounds (the requests
//! of each round, not the case's set-up), and prints medians: on a shared
//! machine the interleaving gives every case the same slow spells, which
//! criterion's one-case-after-another runs do not. `$B time 41 ip-` times
//! only the cases whose names start with `ip-`. Each overhead is also
//! given as a multiple of tower_governor's in the same group.

// criterion is not used here: a plain main.
#![allow(missing_docs)]

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
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

fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("not ready at once"),
    }
}

fn run<S, B>(service: S, uri: &'static str, n: u64, expect: u16)
where
    S: Service<Request<Body>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
{
    run_with(service, || request(uri), n, expect);
}

/// [`run`] with the requests `make` makes.
fn run_with<S, B>(service: S, make: impl Fn() -> Request<Body>, n: u64, expect: u16)
where
    S: Service<Request<Body>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
{
    let start = SystemClock.now_nanos();
    for _ in 0..n {
        let response = ready(service.clone().oneshot(make())).unwrap();
        assert_eq!(response.status(), expect);
        std::hint::black_box(response);
    }
    LOOP_NANOS.set(SystemClock.now_nanos() - start);
}

thread_local! {
    /// How long the last [`run_with`]'s requests took, without the set-up
    /// of its case (tower_governor's clock calibrates for milliseconds).
    static LOOP_NANOS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Requests from 256 clients in turn (`10.0.0.n`), the peer's address
/// in axum's `ConnectInfo`.
fn from_clients() -> impl Fn() -> Request<Body> {
    let next = std::cell::Cell::new(0u8);
    move || {
        next.set(next.get().wrapping_add(1));
        let mut request = request("/orders");
        let peer = std::net::SocketAddr::from(([10, 0, 0, next.get()], 40_000));
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        request
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

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("time") {
        let rounds = args.get(2).and_then(|n| n.parse().ok()).unwrap_or(15);
        return interleaved(rounds, args.get(3).map_or("", String::as_str));
    }
    // `cargo bench` passes `--bench`: nothing to do then.
    let (Some(case), Some(n)) = (args.get(1), args.get(2).and_then(|n| n.parse().ok())) else {
        return;
    };
    one(case, n);
}

const CASES: [&str; 16] = [
    "baseline",
    "core",
    "core-block",
    "floor",
    "governor",
    "pass",
    "cleaned",
    "block",
    "block-json",
    "router-baseline",
    "router-governor",
    "router-pass",
    "router-pass-axum",
    "ip-baseline",
    "ip-governor",
    "ip-gateway",
];

/// Each case in turn, `rounds` times, 200 000 requests a turn: on a
/// shared machine, a slow spell then hits every case alike. Prints each
/// case's median and the overheads over the baselines.
fn interleaved(rounds: usize, prefix: &str) {
    const N: u64 = 200_000;
    let cases: Vec<&str> = CASES
        .iter()
        .copied()
        .filter(|case| case.starts_with(prefix))
        .collect();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for _ in 0..rounds {
        for (i, case) in cases.iter().enumerate() {
            // The requests' time alone, by the production clock's precise
            // reading (most instances here run on a `ManualClock`, which
            // does not move).
            one(case, N);
            times[i].push(LOOP_NANOS.get() as f64 / N as f64);
        }
    }
    let median = |i: usize| {
        let mut t = times[i].clone();
        t.sort_by(f64::total_cmp);
        t[t.len() / 2]
    };
    let at = |name: &str| cases.iter().position(|c| *c == name);
    println!("{rounds} rounds of {N} requests per case; ns per request, median (min..max)");
    for (i, case) in cases.iter().enumerate() {
        let (min, max) = times[i]
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), t| (lo.min(*t), hi.max(*t)));
        let (base, peer) = if case.starts_with("router") {
            (at("router-baseline"), at("router-governor"))
        } else if case.starts_with("ip-") {
            (at("ip-baseline"), at("ip-governor"))
        } else {
            (at("baseline"), at("governor"))
        };
        let Some(base) = base else {
            println!("{case:>16} {:7.1} ({min:.1}..{max:.1})", median(i));
            continue;
        };
        let overhead = median(i) - median(base);
        let ratio = peer
            .map(|peer| {
                format!(
                    "  {:.2}x tower_governor's",
                    overhead / (median(peer) - median(base))
                )
            })
            .unwrap_or_default();
        println!(
            "{case:>16} {:7.1} ({min:.1}..{max:.1})  overhead {overhead:+7.1}{ratio}",
            median(i),
        );
    }
}

fn one(case: &str, n: u64) {
    let route = || axum::Router::new().route("/orders/{id}", get(|| async { "ok" }));
    // Counts that never block here, within what a reject rule's quota
    // leases serve (up to 2^39 per second), as any real count is.
    let passing = || {
        instance(vec![
            FlowRule::new("GET:/orders", 1e11),
            FlowRule::new("GET:/orders/{id}", 1e11),
        ])
    };
    match case {
        "baseline" => run(service_fn(ok), "/orders", n, 200),
        // The floor: the core's entry and exit (inbound, one flow rule) in
        // the handler, no layer.
        "core" | "core-block" => {
            let count = if case == "core" { 1e11 } else { 0.0 };
            let sentinel = instance(vec![FlowRule::new("GET:/orders", count)]);
            let resource = Arc::new(sentinel.resource("GET:/orders"));
            let service = service_fn(move |request: Request<Body>| {
                let entry = resource
                    .builder()
                    .entry_type(sentinel_flow_core::EntryType::Inbound)
                    .enter();
                let blocked = entry.is_err();
                drop((entry, request));
                async move {
                    Ok::<_, Infallible>(Response::new(Body::from(if blocked {
                        "no"
                    } else {
                        "ok"
                    })))
                }
            });
            run(service, "/orders", n, 200)
        }
        "floor" => {
            let sentinel = instance(vec![FlowRule::new("GET:/orders", 1e11)]);
            let service = Floor {
                inner: service_fn(ok),
                resource: Arc::new(sentinel.resource("GET:/orders")),
            };
            run(service, "/orders", n, 200)
        }
        "governor" => run(
            ServiceBuilder::new()
                .layer(governor!(false))
                .service(service_fn(ok)),
            "/orders",
            n,
            200,
        ),
        "pass" => run(
            ServiceBuilder::new()
                .layer(SentinelLayer::with_sentinel(passing()))
                .service(service_fn(ok)),
            "/orders",
            n,
            200,
        ),
        "cleaned" => run(
            ServiceBuilder::new()
                .layer(SentinelLayer::with_sentinel(passing()))
                .service(service_fn(ok)),
            "/orders/42",
            n,
            200,
        ),
        "block" => {
            let sentinel = instance(vec![FlowRule::new("GET:/orders", 0.0)]);
            run(
                ServiceBuilder::new()
                    .layer(SentinelLayer::with_sentinel(sentinel))
                    .service(service_fn(ok)),
                "/orders",
                n,
                429,
            )
        }
        // The same, the client accepting JSON: the 429 tells it in JSON.
        "block-json" => {
            let sentinel = instance(vec![FlowRule::new("GET:/orders", 0.0)]);
            let json = || {
                let mut request = request("/orders");
                request.headers_mut().insert(
                    http::header::ACCEPT,
                    http::HeaderValue::from_static("application/json"),
                );
                request
            };
            run_with(
                ServiceBuilder::new()
                    .layer(SentinelLayer::with_sentinel(sentinel))
                    .service(service_fn(ok)),
                json,
                n,
                429,
            )
        }
        // `with_state` makes the routes' services once, as `axum::serve` does.
        "router-baseline" => run(route().with_state(()), "/orders/42", n, 200),
        "router-governor" => run(
            route().route_layer(governor!(false)).with_state(()),
            "/orders/42",
            n,
            200,
        ),
        "router-pass" => run(
            route()
                .route_layer(SentinelLayer::with_sentinel(passing()))
                .with_state(()),
            "/orders/42",
            n,
            200,
        ),
        // The same, handing out axum's `Body` (no box of our wrapper).
        "router-pass-axum" => run(
            route()
                .route_layer(SentinelLayer::with_sentinel(passing()).axum_body())
                .with_state(()),
            "/orders/42",
            n,
            200,
        ),
        "ip-baseline" => run_with(service_fn(ok), from_clients(), n, 200),
        "ip-governor" => {
            let config = GovernorConfigBuilder::default()
                .key_extractor(PeerIpKeyExtractor)
                .per_nanosecond(1)
                .burst_size(u32::MAX)
                .finish()
                .unwrap();
            let service = ServiceBuilder::new()
                .layer(GovernorLayer::new(Arc::new(config)))
                .service(service_fn(ok));
            run_with(service, from_clients(), n, 200)
        }
        "ip-gateway" => {
            use sentinel_flow_core::param_flow::MAX_PARAM_COUNT;
            use sentinel_flow_tower::gateway::{
                ApiDefinition, ApiPredicate, Gateway, GatewayLayer, GatewayParamItem, GatewayRule,
            };
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
            let service = ServiceBuilder::new()
                .layer(GatewayLayer::new(&gateway))
                .service(service_fn(ok));
            run_with(service, from_clients(), n, 200)
        }
        other => panic!("unknown case {other}"),
    }
}

/// The least a layer around the core does: enters one fixed resource
/// (inbound, as the layer does) and holds the entry in its future until
/// the response. Its overhead over `core` is what holding an entry across
/// a call costs, whatever else a layer does.
#[derive(Clone)]
struct Floor<S> {
    inner: S,
    resource: Arc<sentinel_flow_core::Resource<'static>>,
}

pin_project_lite::pin_project! {
    struct FloorFuture<F> {
        #[pin]
        inner: F,
        entry: Option<sentinel_flow_core::Entry<'static>>,
    }
}

impl<F: Future> Future for FloorFuture<F> {
    type Output = F::Output;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        let output = std::task::ready!(this.inner.poll(cx));
        // The entry exits at the response.
        this.entry.take();
        Poll::Ready(output)
    }
}

impl<S: Service<Request<Body>>> Service<Request<Body>> for Floor<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = FloorFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let entry = self
            .resource
            .builder()
            .entry_type(sentinel_flow_core::EntryType::Inbound)
            .enter()
            .ok();
        FloorFuture {
            inner: self.inner.call(request),
            entry,
        }
    }
}
