//! Each request is named by its own route and method, whichever service
//! of the layer remembers which route (a service per route with
//! `route_layer`, one for the whole router with `layer`).

mod common;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use common::{run, sentinel};
use http::{Method, Request, StatusCode};
use sentinel_tower::SentinelLayer;
use tower::ServiceExt;

fn routes() -> Router {
    Router::new()
        .route("/a/{id}", get(|| async { "a" }).post(|| async { "posted" }))
        .route("/b", get(|| async { "b" }))
}

async fn send(app: &Router, method: Method, path: &str) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .body(Body::empty())
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
}

#[test]
fn every_request_is_named_by_its_own_route_and_method() {
    run(async {
        for per_route in [true, false] {
            let (sentinel, _clock) = sentinel();
            let layer = SentinelLayer::with_sentinel(sentinel);
            // As `axum::serve` runs it: the routes' services made once.
            let app = match per_route {
                true => routes().route_layer(layer),
                false => routes().layer(layer),
            }
            .with_state(());
            let calls = [
                (Method::GET, "/a/1"),
                (Method::GET, "/b"),
                (Method::POST, "/a/2"),
                (Method::GET, "/a/3"),
                (Method::GET, "/b"),
                (Method::GET, "/a/4"),
            ];
            for (method, path) in calls {
                send(&app, method, path).await;
            }
            let now = sentinel.now_ms();
            let passed = |name: &str| {
                sentinel
                    .resource_node(name)
                    .map_or(0, |node| node.stats().total_pass(now))
            };
            assert_eq!(passed("GET:/a/{id}"), 3, "per route: {per_route}");
            assert_eq!(passed("POST:/a/{id}"), 1, "per route: {per_route}");
            assert_eq!(passed("GET:/b"), 2, "per route: {per_route}");
        }
    });
}
