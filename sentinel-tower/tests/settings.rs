//! The layer's settings through `tower::ServiceBuilder` around plain
//! `service_fn` services: custom names, origins and block responses,
//! which outcomes count as errors, and gRPC detection.

mod common;

use std::convert::Infallible;
use std::io;

use bytes::Bytes;
use common::{run, sentinel};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_tower::SentinelLayer;
use tower::{ServiceBuilder, ServiceExt, service_fn};

fn request(path: &str) -> Request<Empty<Bytes>> {
    Request::get(path).body(Empty::new()).unwrap()
}

async fn ok(_: Request<Empty<Bytes>>) -> Result<Response<String>, Infallible> {
    Ok(Response::new("ok".to_owned()))
}

#[test]
fn a_custom_name_origin_and_block_response_are_used() {
    run(async {
        let (sentinel, _clock) = sentinel();
        sentinel
            .authority_rules()
            .load(vec![AuthorityRule::new(
                "api",
                AuthorityStrategy::Black,
                ["tenant-7"],
            )])
            .unwrap();
        let layer = SentinelLayer::with_sentinel(sentinel)
            .resource_fn(|_parts| "api".to_owned())
            .origin_fn(|parts| {
                let query = parts.uri.query()?;
                query.strip_prefix("tenant=").map(|t| format!("tenant-{t}"))
            })
            .block_response(|block| {
                let mut response = Response::new(format!("busy: {}", block.kind()));
                *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                response
            });
        let service = ServiceBuilder::new().layer(layer).service(service_fn(ok));

        let passed = service
            .clone()
            .oneshot(request("/x?tenant=1"))
            .await
            .unwrap();
        assert_eq!(passed.status(), StatusCode::OK);
        let refused = service.oneshot(request("/y?tenant=7")).await.unwrap();
        assert_eq!(refused.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body = refused.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, "busy: authority");
        let node = sentinel.resource_node("api").unwrap();
        assert_eq!(node.stats().total_pass(sentinel.now_ms()), 1);
        assert!(node.find_origin("tenant-1").is_some());
    });
}

#[test]
fn inner_errors_and_5xx_are_recorded_unless_told_otherwise() {
    run(async {
        let (sentinel, _clock) = sentinel();
        let failing = service_fn(|request: Request<Empty<Bytes>>| async move {
            match request.uri().path() {
                "/err" => Err(io::Error::other("down")),
                _ => {
                    let mut response = Response::new(String::new());
                    *response.status_mut() = StatusCode::BAD_GATEWAY;
                    Ok(response)
                }
            }
        });
        let service = ServiceBuilder::new()
            .layer(SentinelLayer::with_sentinel(sentinel))
            .service(failing);
        assert!(service.clone().oneshot(request("/err")).await.is_err());
        let response = service.oneshot(request("/bad")).await.unwrap();
        assert_eq!(response.status(), StatusCode::BAD_GATEWAY);
        // The call ends with its body (here, dropped unread).
        drop(response);
        let now = sentinel.now_ms();
        let errors = |name| {
            let node = sentinel.resource_node(name).unwrap();
            node.stats().total_exception(now)
        };
        assert_eq!(errors("GET:/err"), 1);
        assert_eq!(errors("GET:/bad"), 1);

        let (sentinel, _clock) = common::sentinel();
        let lenient = ServiceBuilder::new()
            .layer(SentinelLayer::with_sentinel(sentinel).error_when(|_, _| false))
            .service(failing);
        lenient.oneshot(request("/bad")).await.unwrap();
        let node = sentinel.resource_node("GET:/bad").unwrap();
        assert_eq!(node.stats().total_exception(sentinel.now_ms()), 0);
        assert_eq!(node.stats().total_pass(sentinel.now_ms()), 1);
    });
}

#[test]
fn a_grpc_request_gets_a_trailers_only_grpc_error() {
    run(async {
        let (sentinel, _clock) = sentinel();
        sentinel
            .flow_rules()
            .load(vec![FlowRule::new("POST:/pkg.Svc/Call", 0.0)])
            .unwrap();
        let service = ServiceBuilder::new()
            .layer(SentinelLayer::with_sentinel(sentinel))
            .service(service_fn(ok));
        let grpc = Request::post("/pkg.Svc/Call")
            .header("content-type", "application/grpc+proto")
            .body(Empty::new())
            .unwrap();
        let response = service.oneshot(grpc).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["grpc-status"], "8");
        assert_eq!(response.headers()["grpc-message"], "blocked by flow");
        assert!(response.headers().get("retry-after").is_none());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert!(body.is_empty());
    });
}

#[test]
fn a_rate_limiter_queue_waits_without_blocking_the_executor() {
    // One executor thread: a sleeping thread would hold up everything. On
    // tokio's paused clock, time moves only while every task waits, so the
    // figures below are exact, whatever the machine's load.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap()
        .block_on(async {
            let (sentinel, _clock) = sentinel();
            let mut rule = FlowRule::new("GET:/paced", 10.0);
            rule.control_behavior = sentinel_flow_core::flow::ControlBehavior::RateLimiter;
            rule.max_queueing_time_ms = 1_000;
            sentinel.flow_rules().load(vec![rule]).unwrap();
            let service = ServiceBuilder::new()
                .layer(SentinelLayer::with_sentinel(sentinel))
                .service(service_fn(ok));

            let started = tokio::time::Instant::now();
            // 100 ms apart: the third waits 200 ms in the queue.
            let paced: Vec<_> = (0..3)
                .map(|_| tokio::spawn(service.clone().oneshot(request("/paced"))))
                .collect();
            tokio::task::yield_now().await;
            let fast = service.clone().oneshot(request("/fast")).await.unwrap();
            assert_eq!(fast.status(), StatusCode::OK);
            assert_eq!(
                started.elapsed(),
                std::time::Duration::ZERO,
                "an unlimited request waited behind the queue"
            );
            for handle in paced {
                let response = tokio::time::timeout(common::TEST_DEADLINE, handle)
                    .await
                    .unwrap()
                    .unwrap()
                    .unwrap();
                assert_eq!(response.status(), StatusCode::OK);
            }
            assert_eq!(started.elapsed(), std::time::Duration::from_millis(200));
        });
}

#[test]
fn a_streamed_body_holds_the_entry_and_its_grpc_trailers_count() {
    run(async {
        let (sentinel, _clock) = sentinel();
        // A gRPC response streamed as a data frame, then trailers with
        // INTERNAL (13): an error known only at the end of the body.
        let streaming = service_fn(|_: Request<Empty<Bytes>>| async {
            let mut trailers = http::HeaderMap::new();
            trailers.insert("grpc-status", http::HeaderValue::from_static("13"));
            let body = Frames(
                [
                    http_body::Frame::data(Bytes::from_static(b"chunk")),
                    http_body::Frame::trailers(trailers),
                ]
                .into(),
            );
            let mut response = Response::new(body);
            response.headers_mut().insert(
                "content-type",
                http::HeaderValue::from_static("application/grpc"),
            );
            Ok::<_, Infallible>(response)
        });
        let service = ServiceBuilder::new()
            .layer(SentinelLayer::with_sentinel(sentinel))
            .service(streaming);
        let response = service
            .oneshot(Request::post("/pkg.Svc/Stream").body(Empty::new()).unwrap())
            .await
            .unwrap();
        let node = sentinel.resource_node("POST:/pkg.Svc/Stream").unwrap();
        assert_eq!(
            node.stats().cur_concurrency(),
            1,
            "inside while the body streams"
        );
        let collected = response.into_body().collect().await.unwrap();
        assert_eq!(collected.trailers().unwrap()["grpc-status"], "13");
        let now = sentinel.now_ms();
        assert_eq!(
            node.stats().cur_concurrency(),
            0,
            "exited at the body's end"
        );
        assert_eq!(
            node.stats().total_exception(now),
            1,
            "the trailers' status counted"
        );
    });
}

/// A body of the given frames, each ready at once.
struct Frames(std::collections::VecDeque<http_body::Frame<Bytes>>);

impl http_body::Body for Frames {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        std::task::Poll::Ready(self.0.pop_front().map(Ok))
    }
}
