//! Each request is named by its own route and method, whichever service
//! of the layer remembers which route (a service per route with
//! `route_layer`, one for the whole router with `layer`).

mod common;

use std::convert::Infallible;

use axum::Router;
use axum::body::Body;
use axum::routing::get;
use bytes::Bytes;
use common::{run, sentinel};
use http::{Method, Request, StatusCode};
use http_body::Frame;
use http_body_util::BodyExt;
use sentinel_flow_tower::SentinelLayer;
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

#[test]
fn an_axum_body_layer_hands_on_buffered_bodies_and_holds_streams_to_their_end() {
    run(async {
        let (sentinel, _clock) = sentinel();
        sentinel
            .flow_rules()
            .load(vec![sentinel_flow_core::flow::FlowRule::new(
                "GET:/zero",
                0.0,
            )])
            .unwrap();
        let app = Router::new()
            .route("/b", get(|| async { "b" }))
            .route("/zero", get(|| async { "never" }))
            .route(
                "/stream",
                get(|| async { Body::new(Unsized(Some(Bytes::from_static(b"s")))) }),
            )
            .route_layer(SentinelLayer::with_sentinel(sentinel).axum_body())
            .with_state(());
        let node = |name: &str| sentinel.resource_node(name).unwrap();
        let call = |path: &'static str| {
            let request = Request::get(path).body(Body::empty()).unwrap();
            app.clone().oneshot(request)
        };

        let buffered = call("/b").await.unwrap();
        assert_eq!(buffered.status(), StatusCode::OK);
        assert_eq!(
            node("GET:/b").stats().cur_concurrency(),
            0,
            "exited at the head"
        );
        let body = buffered.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "b");
        assert_eq!(node("GET:/b").stats().total_pass(sentinel.now_ms()), 1);

        let streamed = call("/stream").await.unwrap();
        assert_eq!(node("GET:/stream").stats().cur_concurrency(), 1);
        let body = streamed.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "s");
        assert_eq!(
            node("GET:/stream").stats().cur_concurrency(),
            0,
            "exited at its end"
        );

        let blocked = call("/zero").await.unwrap();
        assert_eq!(blocked.status(), StatusCode::TOO_MANY_REQUESTS);
        let body = blocked.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "blocked by flow");
    });
}

/// A body of one frame and no known length: it streams.
struct Unsized(Option<Bytes>);

impl http_body::Body for Unsized {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        std::task::Poll::Ready(self.0.take().map(|data| Ok(Frame::data(data))))
    }
}
