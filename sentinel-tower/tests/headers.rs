//! What a 429 (and, when asked, an admitted response) tells the client:
//! the IETF `RateLimit-Policy` / `RateLimit` fields, the legacy
//! `X-RateLimit-*` trio, `Retry-After`, and the body (text or JSON), per
//! rule kind, with every figure checked against the rule and the window
//! on a `ManualClock`.

mod common;

use std::convert::Infallible;

use bytes::Bytes;
use common::{run, sentinel};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::Body;
use http_body_util::{BodyExt, Empty, Full};
use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::{ControlBehavior, FlowGrade, FlowRule};
use sentinel_flow_core::system::SystemRule;
use sentinel_flow_tower::SentinelLayer;
use tower::{Service, ServiceBuilder, ServiceExt, service_fn};

/// The instance's clock starts at 1 000 000 ms: a 500 ms bucket edge.
const T0: u64 = 1_000_000;

fn request(path: &str, headers: &[(&str, &str)]) -> Request<Empty<Bytes>> {
    let mut request = Request::get(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.body(Empty::new()).unwrap()
}

async fn ok(request: Request<Empty<Bytes>>) -> Result<Response<Full<Bytes>>, Infallible> {
    let status = match request.uri().path() {
        "/fail" => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::OK,
    };
    let mut response = Response::new(Full::new(Bytes::from_static(b"ok")));
    *response.status_mut() = status;
    Ok(response)
}

/// Status, headers and body text of a request through `service`.
async fn send<S, B>(
    service: &S,
    path: &str,
    headers: &[(&str, &str)],
) -> (StatusCode, HeaderMap, String)
where
    S: Service<Request<Empty<Bytes>>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: Body<Data = Bytes>,
    B::Error: std::fmt::Debug,
{
    let response = service
        .clone()
        .oneshot(request(path, headers))
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

/// The first refusal within ten requests.
async fn first_refusal<S, B>(
    service: &S,
    path: &str,
    headers: &[(&str, &str)],
) -> (HeaderMap, String)
where
    S: Service<Request<Empty<Bytes>>, Response = Response<B>> + Clone,
    S::Error: std::fmt::Debug,
    B: Body<Data = Bytes>,
    B::Error: std::fmt::Debug,
{
    for _ in 0..10 {
        let (status, headers, body) = send(service, path, headers).await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            return (headers, body);
        }
    }
    panic!("no 429 within ten requests to {path}");
}

const RATE_LIMIT_HEADERS: [&str; 5] = [
    "ratelimit-policy",
    "ratelimit",
    "x-ratelimit-limit",
    "x-ratelimit-remaining",
    "x-ratelimit-reset",
];

fn assert_no_rate_limit_headers(headers: &HeaderMap) {
    for name in RATE_LIMIT_HEADERS {
        assert!(headers.get(name).is_none(), "{name} on {headers:?}");
    }
}

#[test]
fn a_qps_rule_gives_its_quota_window_and_reset_on_a_429() {
    run(async {
        let (sentinel, clock) = sentinel();
        sentinel
            .flow_rules()
            .load(vec![FlowRule::new("GET:/orders", 3.0)])
            .unwrap();
        let service = ServiceBuilder::new()
            .layer(SentinelLayer::with_sentinel(sentinel))
            .service(service_fn(ok));
        clock.set(T0 + 200);
        for _ in 0..3 {
            let (status, headers, _) = send(&service, "/orders", &[]).await;
            assert_eq!(status, StatusCode::OK);
            assert_no_rate_limit_headers(&headers); // off on admitted responses by default
        }
        let (status, headers, body) = send(&service, "/orders", &[]).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(headers["ratelimit-policy"], "\"default\";q=3;w=1");
        // 300 ms to the edge of the bucket of T0: rounded up to 1 s.
        assert_eq!(headers["ratelimit"], "\"default\";r=0;t=1");
        assert_eq!(headers["retry-after"], "1");
        assert_eq!(headers["content-type"], "text/plain; charset=utf-8");
        assert!(
            headers.get("x-ratelimit-limit").is_none(),
            "legacy headers are opt-in"
        );
        assert_eq!(body, "blocked by flow");
    });
}

#[test]
fn admitted_responses_count_down_the_rules_own_window_when_asked() {
    run(async {
        let (sentinel, clock) = sentinel();
        // 1.5 a second over a 10 s window of two 5 s buckets: the check
        // (whole rate + 1 <= whole count) admits 1 x 10 a window.
        let mut rule = FlowRule::new("GET:/slow", 1.5);
        rule.stat_interval_ms = 10_000;
        rule.stat_sample_count = 2;
        sentinel.flow_rules().load(vec![rule]).unwrap();
        let layer = SentinelLayer::with_sentinel(sentinel)
            .rate_limit_headers_on_admitted(true)
            .legacy_rate_limit_headers(true);
        let service = ServiceBuilder::new().layer(layer).service(service_fn(ok));
        // T0 is a 5 s bucket edge (1 000 000 = 200 x 5 000).
        clock.set(T0 + 1_200);
        for remaining in (0..10).rev() {
            let (status, headers, _) = send(&service, "/slow", &[]).await;
            assert_eq!(status, StatusCode::OK);
            assert_eq!(headers["ratelimit-policy"], "\"default\";q=10;w=10");
            // 3 800 ms to the bucket's edge: 4 s.
            assert_eq!(
                headers["ratelimit"],
                format!("\"default\";r={remaining};t=4")
            );
            assert_eq!(headers["x-ratelimit-limit"], "10");
            assert_eq!(
                headers["x-ratelimit-remaining"],
                remaining.to_string().as_str()
            );
            assert_eq!(headers["x-ratelimit-reset"], "4");
        }
        let (status, headers, _) = send(&service, "/slow", &[]).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(headers["ratelimit"], "\"default\";r=0;t=4");
        assert_eq!(headers["x-ratelimit-remaining"], "0");
        assert_eq!(headers["retry-after"], "10", "the rule's window");
        // The bucket of T0 leaves the window at T0 + 10 s: the quota is back.
        clock.set(T0 + 10_000);
        let (status, headers, _) = send(&service, "/slow", &[]).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(headers["ratelimit"], "\"default\";r=9;t=5");
    });
}

#[test]
fn a_full_rate_limiter_queue_gives_the_quota_headers() {
    run(async {
        let (sentinel, clock) = sentinel();
        let mut rule = FlowRule::new("GET:/paced", 2.0);
        rule.control_behavior = ControlBehavior::RateLimiter;
        rule.max_queueing_time_ms = 0;
        sentinel.flow_rules().load(vec![rule]).unwrap();
        let service = ServiceBuilder::new()
            .layer(SentinelLayer::with_sentinel(sentinel))
            .service(service_fn(ok));
        clock.set(T0 + 100);
        let (headers, _) = first_refusal(&service, "/paced", &[]).await;
        assert_eq!(headers["ratelimit-policy"], "\"default\";q=2;w=1");
        assert_eq!(headers["ratelimit"], "\"default\";r=0;t=1");
        assert_eq!(headers["retry-after"], "1");
    });
}

#[test]
fn a_block_is_told_in_json_to_a_client_that_accepts_it() {
    run(async {
        let (sentinel, clock) = sentinel();
        sentinel
            .flow_rules()
            .load(vec![FlowRule::new("GET:/orders", 1.0)])
            .unwrap();
        let service = ServiceBuilder::new()
            .layer(SentinelLayer::with_sentinel(sentinel))
            .service(service_fn(ok));
        clock.set(T0 + 150);
        let json = [("accept", "application/json")];
        let (headers, body) = first_refusal(&service, "/orders", &json).await;
        assert_eq!(headers["content-type"], "application/json");
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        // The exact time to the edge of the bucket of T0.
        assert_eq!(
            body,
            serde_json::json!({"error": "flow", "resource": "GET:/orders", "retry_after_ms": 350})
        );
        assert_eq!(headers["ratelimit"], "\"default\";r=0;t=1");
    });
}

#[test]
fn a_users_block_response_keeps_its_body_and_gets_the_headers_it_lacks() {
    run(async {
        let (sentinel, _clock) = sentinel();
        sentinel
            .flow_rules()
            .load(vec![FlowRule::new("GET:/orders", 0.0)])
            .unwrap();
        let layer = SentinelLayer::with_sentinel(sentinel).block_response(|block| {
            let mut response = Response::new(format!("slow down ({})", block.resource()));
            *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
            response
                .headers_mut()
                .insert("ratelimit-policy", "\"mine\";q=1".parse().unwrap());
            response
        });
        let service = ServiceBuilder::new().layer(layer).service(service_fn(ok));
        let (status, headers, body) =
            send(&service, "/orders", &[("accept", "application/json")]).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            body, "slow down (GET:/orders)",
            "no JSON over a user's builder"
        );
        assert_eq!(headers["ratelimit-policy"], "\"mine\";q=1");
        assert_eq!(headers["ratelimit"], "\"default\";r=0;t=1");
    });
}

#[test]
fn breakers_and_system_rules_give_retry_after_only() {
    run(async {
        let (sentinel, _clock) = sentinel();
        let mut breaker = DegradeRule::new("GET:/fail", DegradeGrade::ErrorCount, 1.0);
        breaker.time_window_sec = 30;
        breaker.min_request_amount = 1;
        sentinel.degrade_rules().load(vec![breaker]).unwrap();
        let service = ServiceBuilder::new()
            .layer(SentinelLayer::with_sentinel(sentinel))
            .service(service_fn(ok));
        let (headers, body) = first_refusal(&service, "/fail", &[]).await;
        assert_eq!(body, "blocked by degrade");
        assert_eq!(headers["retry-after"], "30");
        assert_no_rate_limit_headers(&headers);

        let (sentinel, _clock) = common::sentinel();
        sentinel
            .system_rules()
            .load(vec![SystemRule {
                qps: Some(1.0),
                ..SystemRule::default()
            }])
            .unwrap();
        let service = ServiceBuilder::new()
            .layer(SentinelLayer::with_sentinel(sentinel))
            .service(service_fn(ok));
        let (headers, body) = first_refusal(&service, "/any", &[]).await;
        assert_eq!(body, "blocked by system");
        assert_eq!(headers["retry-after"], "1");
        assert_no_rate_limit_headers(&headers);
    });
}

#[test]
fn concurrency_and_authority_blocks_give_no_rate_limit_headers() {
    run(async {
        let (sentinel, _clock) = sentinel();
        let mut threads = FlowRule::new("GET:/held", 1.0);
        threads.grade = FlowGrade::Concurrency;
        sentinel.flow_rules().load(vec![threads]).unwrap();
        sentinel
            .authority_rules()
            .load(vec![AuthorityRule::new(
                "GET:/admin",
                AuthorityStrategy::White,
                ["ops"],
            )])
            .unwrap();
        let layer = SentinelLayer::with_sentinel(sentinel)
            .origin_header("x-caller")
            .rate_limit_headers_on_admitted(true)
            .legacy_rate_limit_headers(true);
        let held = ServiceBuilder::new()
            .layer(layer.clone())
            .service(service_fn(|request: Request<Empty<Bytes>>| async move {
                let body = match request.uri().query() {
                    // A stream: holds its entry (the one permit) until it ends.
                    Some("stream") => Endless.boxed_unsync(),
                    _ => Full::new(Bytes::from_static(b"ok")).boxed_unsync(),
                };
                Ok::<_, Infallible>(Response::new(body))
            }));
        let node = || sentinel.resource_node("GET:/held").unwrap();
        let buffered = held.clone().oneshot(request("/held", &[])).await.unwrap();
        assert_eq!(buffered.status(), StatusCode::OK);
        assert_no_rate_limit_headers(buffered.headers()); // no QPS rule to count down
        // A body of known length: the entry exited at the head.
        assert_eq!(node().stats().cur_concurrency(), 0);
        let streamed = held
            .clone()
            .oneshot(request("/held?stream", &[]))
            .await
            .unwrap();
        assert_eq!(node().stats().cur_concurrency(), 1);
        let (status, headers, body) = send(&held, "/held", &[]).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(body, "blocked by flow");
        assert!(headers.get("retry-after").is_none());
        assert_no_rate_limit_headers(&headers);
        drop(streamed);
        assert_eq!(node().stats().cur_concurrency(), 0);

        let admin = ServiceBuilder::new().layer(layer).service(service_fn(ok));
        let (status, headers, body) = send(&admin, "/admin", &[("x-caller", "guest")]).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(body, "blocked by authority");
        assert!(headers.get("retry-after").is_none());
        assert_no_rate_limit_headers(&headers);
    });
}

/// A body that never ends and has no known length.
struct Endless;

impl Body for Endless {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        std::task::Poll::Pending
    }
}
