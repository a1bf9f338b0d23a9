//! A route that a rule names is always named, whatever random
//! paths filled the layer's name cache (and the instance's resource cap).

use std::convert::Infallible;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::{ManualClock, Sentinel};
use sentinel_flow_tower::{OVERFLOW_RESOURCE, SentinelLayer};
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

fn request(path: &str) -> Request<Empty<Bytes>> {
    Request::get(path).body(Empty::new()).unwrap()
}

async fn ok(_: Request<Empty<Bytes>>) -> Result<Response<String>, Infallible> {
    Ok(Response::new("ok".to_owned()))
}

fn run<F: std::future::Future>(f: F) -> F::Output {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime
        .block_on(async { tokio::time::timeout(std::time::Duration::from_secs(20), f).await })
        .expect("the test finishes in time")
}

#[test]
fn a_route_with_a_rule_is_named_past_a_full_name_cache() {
    run(async {
        let sentinel: &'static Sentinel = Box::leak(Box::new(
            Sentinel::builder()
                .clock(ManualClock::new(1_000_000))
                .max_resources(8)
                .build(),
        ));
        let layer = SentinelLayer::with_sentinel(sentinel).max_resource_names(4);
        let mut service = ServiceBuilder::new()
            .layer(layer.clone())
            .service(service_fn(ok));
        // Random paths fill the cache (and the instance's cap behind it).
        for i in 0..50 {
            let path = format!("/random/x{i}y");
            let reply = service.ready().await.unwrap().call(request(&path)).await;
            assert_eq!(reply.unwrap().status(), StatusCode::OK);
        }
        assert_eq!(layer.overflowed(), 46);
        assert!(sentinel.resource_node(OVERFLOW_RESOURCE).is_some());

        // A rule on a route never seen: it applies at once.
        sentinel
            .flow_rules()
            .load(vec![FlowRule::new("GET:/orders", 0.0)])
            .unwrap();
        let reply = service
            .ready()
            .await
            .unwrap()
            .call(request("/orders"))
            .await;
        assert_eq!(reply.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
        let node = sentinel.resource_node("GET:/orders").unwrap();
        assert_eq!(node.stats().total_block(sentinel.now_ms()), 1);
        assert_eq!(layer.overflowed(), 46, "not sent to the overflow resource");

        // Other new names still overflow; the named route stays named.
        let reply = service.ready().await.unwrap().call(request("/other")).await;
        assert_eq!(reply.unwrap().status(), StatusCode::OK);
        assert_eq!(layer.overflowed(), 47);
        let reply = service.oneshot(request("/orders")).await;
        assert_eq!(reply.unwrap().status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(node.stats().total_block(sentinel.now_ms()), 2);
    });
}
