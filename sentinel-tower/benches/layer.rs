//! The cost of one request through `SentinelLayer`, against the same
//! service called directly (the baseline), in one run: each case polls a
//! `oneshot` call once with a no-op waker (the services here are ready at
//! once), so what differs between cases is the layer's work: naming,
//! entering, recording, exiting, and the boxed response future.
//!
//! Run: `cargo bench -p sentinel-tower --bench layer`.

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use http::{Request, Response, Uri};
use http_body_util::Empty;
use sentinel_core::flow::FlowRule;
use sentinel_core::{ManualClock, Sentinel};
use sentinel_tower::SentinelLayer;
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

async fn ok(_: Request<Empty<Bytes>>) -> Result<Response<&'static str>, Infallible> {
    Ok(Response::new("ok"))
}

fn request(uri: &'static str) -> Request<Empty<Bytes>> {
    let mut request = Request::new(Empty::new());
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

fn call<S>(service: &S, uri: &'static str)
where
    S: Service<Request<Empty<Bytes>>> + Clone,
    S::Error: std::fmt::Debug,
{
    let response = ready(service.clone().oneshot(request(uri))).unwrap();
    std::hint::black_box(response);
}

fn instance() -> &'static Sentinel {
    Box::leak(Box::new(
        Sentinel::builder().clock(ManualClock::new(1_000)).build(),
    ))
}

fn layer(c: &mut Criterion) {
    let mut group = c.benchmark_group("request");
    group.throughput(Throughput::Elements(1));

    let direct = service_fn(ok);
    group.bench_function("baseline: service_fn, no layer", |b| {
        b.iter(|| call(&direct, "/orders"))
    });

    let sentinel = instance();
    let layered = ServiceBuilder::new()
        .layer(SentinelLayer::with_sentinel(sentinel))
        .service(service_fn(ok));
    group.bench_function("layer, no rules, /orders", |b| {
        b.iter(|| call(&layered, "/orders"))
    });
    group.bench_function("layer, no rules, /orders/42 (cleaned: one String)", |b| {
        b.iter(|| call(&layered, "/orders/42"))
    });

    let sentinel = instance();
    sentinel
        .flow_rules()
        .load(vec![FlowRule::new("GET:/orders", 1e12)])
        .unwrap();
    let passing = ServiceBuilder::new()
        .layer(SentinelLayer::with_sentinel(sentinel))
        .service(service_fn(ok));
    group.bench_function("layer, flow rule, pass", |b| {
        b.iter(|| call(&passing, "/orders"))
    });

    let sentinel = instance();
    sentinel
        .flow_rules()
        .load(vec![FlowRule::new("GET:/orders", 0.0)])
        .unwrap();
    let blocking = ServiceBuilder::new()
        .layer(SentinelLayer::with_sentinel(sentinel))
        .service(service_fn(ok));
    group.bench_function("layer, flow rule, block (429 built)", |b| {
        b.iter(|| call(&blocking, "/orders"))
    });
    group.finish();
}

criterion_group!(benches, layer);
criterion_main!(benches);
