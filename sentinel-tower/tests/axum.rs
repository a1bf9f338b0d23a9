//! The layer inside real axum servers on loopback: pass, block, breaker,
//! names, origins, dropped clients, rate limiters.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use common::{eventually, get as fetch, run, sentinel, serve};
use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::{ControlBehavior, FlowRule};
use sentinel_flow_tower::{OVERFLOW_RESOURCE, SentinelLayer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A handler that counts its calls.
fn counted(calls: &Arc<AtomicUsize>) -> axum::routing::MethodRouter {
    let calls = Arc::clone(calls);
    get(move || {
        calls.fetch_add(1, Ordering::SeqCst);
        async { "ok" }
    })
}

#[test]
fn a_request_within_the_rules_passes_and_is_counted() {
    run(async {
        let (sentinel, _clock) = sentinel();
        sentinel
            .flow_rules()
            .load(vec![FlowRule::new("GET:/hello", 10.0)])
            .unwrap();
        let app = Router::new()
            .route("/hello", get(|| async { "hi" }))
            .layer(SentinelLayer::with_sentinel(sentinel));
        let addr = serve(app).await;
        let reply = fetch(addr, "/hello", &[]).await;
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.body, "hi");
        let stats = sentinel.resource_node("GET:/hello").unwrap().stats();
        assert_eq!(stats.total_pass(sentinel.now_ms()), 1);
        assert_eq!(stats.cur_concurrency(), 0);
    });
}

#[test]
fn past_a_flow_rule_requests_get_429_with_the_kind_and_never_reach_the_handler() {
    run(async {
        let (sentinel, _clock) = sentinel();
        sentinel
            .flow_rules()
            .load(vec![FlowRule::new("GET:/limited", 2.0)])
            .unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let app = Router::new()
            .route("/limited", counted(&calls))
            .layer(SentinelLayer::with_sentinel(sentinel));
        let addr = serve(app).await;
        for _ in 0..2 {
            assert_eq!(fetch(addr, "/limited", &[]).await.status, StatusCode::OK);
        }
        let blocked = fetch(addr, "/limited", &[]).await;
        assert_eq!(blocked.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(blocked.body, "blocked by flow");
        // A QPS rule with the default one-second window: retry in a second.
        assert_eq!(blocked.headers["retry-after"], "1");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        let stats = sentinel.resource_node("GET:/limited").unwrap().stats();
        assert_eq!(stats.total_block(sentinel.now_ms()), 1);
    });
}

#[test]
fn a_breaker_opens_on_5xx_responses_and_recovers_after_its_window() {
    run(async {
        let (sentinel, clock) = sentinel();
        let mut rule = DegradeRule::new("GET:/flaky", DegradeGrade::ErrorCount, 2.0);
        rule.min_request_amount = 3;
        rule.time_window_sec = 5;
        sentinel.degrade_rules().load(vec![rule]).unwrap();
        let failing = Arc::new(AtomicBool::new(true));
        let calls = Arc::new(AtomicUsize::new(0));
        let handler = {
            let (failing, calls) = (Arc::clone(&failing), Arc::clone(&calls));
            get(move || {
                calls.fetch_add(1, Ordering::SeqCst);
                let status = if failing.load(Ordering::SeqCst) {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::OK
                };
                async move { status }
            })
        };
        let app = Router::new()
            .route("/flaky", handler)
            .layer(SentinelLayer::with_sentinel(sentinel));
        let addr = serve(app).await;

        let mut failures = 0;
        let open = loop {
            let reply = fetch(addr, "/flaky", &[]).await;
            if reply.status == StatusCode::TOO_MANY_REQUESTS {
                break reply;
            }
            assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
            failures += 1;
            assert!(failures <= 10, "the breaker never opened");
        };
        assert_eq!(open.body, "blocked by degrade");
        assert_eq!(open.headers["retry-after"], "5");
        let calls_when_open = calls.load(Ordering::SeqCst);
        assert_eq!(calls_when_open, failures);
        assert_eq!(
            fetch(addr, "/flaky", &[]).await.status,
            StatusCode::TOO_MANY_REQUESTS
        );
        assert_eq!(calls.load(Ordering::SeqCst), calls_when_open);

        // After the window a probe goes through; it succeeds and closes the breaker.
        failing.store(false, Ordering::SeqCst);
        clock.advance(Duration::from_secs(5));
        assert_eq!(fetch(addr, "/flaky", &[]).await.status, StatusCode::OK);
        assert_eq!(fetch(addr, "/flaky", &[]).await.status, StatusCode::OK);
        assert_eq!(calls.load(Ordering::SeqCst), calls_when_open + 2);
    });
}

#[test]
fn routes_are_named_by_their_template() {
    run(async {
        let (sentinel, _clock) = sentinel();
        let calls = Arc::new(AtomicUsize::new(0));
        let app = Router::new()
            .route("/orders/{id}", counted(&calls))
            .layer(SentinelLayer::with_sentinel(sentinel));
        let addr = serve(app).await;
        for path in ["/orders/1", "/orders/2", "/orders/abc"] {
            assert_eq!(fetch(addr, path, &[]).await.status, StatusCode::OK);
        }
        let node = sentinel.resource_node("GET:/orders/{id}").unwrap();
        assert_eq!(node.stats().total_pass(sentinel.now_ms()), 3);
        assert!(sentinel.resource_node("GET:/orders/1").is_none());
    });
}

#[test]
fn without_a_template_the_path_is_cleaned_and_names_are_capped() {
    run(async {
        let (sentinel, _clock) = sentinel();
        let calls = Arc::new(AtomicUsize::new(0));
        let routes = Router::new().route("/users/{user}/posts/{post}", counted(&calls));
        // The layer outside the router: no route template is known yet.
        let layered = tower::ServiceBuilder::new()
            .layer(SentinelLayer::with_sentinel(sentinel).max_resource_names(3))
            .service(routes);
        let app = Router::new().fallback_service(layered);
        let addr = serve(app).await;

        fetch(addr, "/users/42/posts/7", &[]).await;
        fetch(
            addr,
            "/users/43/posts/8c6f3b8e-5a3c-4e1b-9d7a-2f4e6c8b1a0d",
            &[],
        )
        .await;
        fetch(addr, "/users/ann/posts/deadbeefdeadbeef", &[]).await;
        let now = sentinel.now_ms();
        let ids = sentinel
            .resource_node("GET:/users/{id}/posts/{id}")
            .unwrap();
        assert_eq!(ids.stats().total_pass(now), 2);
        let ann = sentinel.resource_node("GET:/users/ann/posts/{id}").unwrap();
        assert_eq!(ann.stats().total_pass(now), 1);

        // Two names so far and a cap of three: `bob` is the third, and every
        // later new name enters the overflow resource.
        for name in ["bob", "cy", "di"] {
            let reply = fetch(addr, &format!("/users/{name}/posts/1"), &[]).await;
            assert_eq!(reply.status, StatusCode::OK);
        }
        assert!(
            sentinel
                .resource_node("GET:/users/bob/posts/{id}")
                .is_some()
        );
        assert!(sentinel.resource_node("GET:/users/cy/posts/{id}").is_none());
        let overflow = sentinel.resource_node(OVERFLOW_RESOURCE).unwrap();
        assert_eq!(overflow.stats().total_pass(sentinel.now_ms()), 2);
    });
}

#[test]
fn an_origin_header_feeds_authority_rules() {
    run(async {
        let (sentinel, _clock) = sentinel();
        sentinel
            .authority_rules()
            .load(vec![AuthorityRule::new(
                "GET:/admin",
                AuthorityStrategy::White,
                ["ops-console"],
            )])
            .unwrap();
        let calls = Arc::new(AtomicUsize::new(0));
        let app = Router::new()
            .route("/admin", counted(&calls))
            .layer(SentinelLayer::with_sentinel(sentinel).origin_header("x-caller"));
        let addr = serve(app).await;

        let allowed = fetch(addr, "/admin", &[("x-caller", "ops-console")]).await;
        assert_eq!(allowed.status, StatusCode::OK);
        let refused = fetch(addr, "/admin", &[("x-caller", "intruder")]).await;
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.body, "blocked by authority");
        assert!(refused.headers.get("retry-after").is_none());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let node = sentinel.resource_node("GET:/admin").unwrap();
        assert!(node.find_origin("ops-console").is_some());
    });
}

#[test]
fn a_client_that_goes_away_does_not_leak_concurrency() {
    run(async {
        let (sentinel, _clock) = sentinel();
        let started = Arc::new(AtomicUsize::new(0));
        let handler = {
            let started = Arc::clone(&started);
            get(move || {
                started.fetch_add(1, Ordering::SeqCst);
                async {
                    // Longer than the test's deadline: only a drop ends it.
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    "late"
                }
            })
        };
        let app = Router::new()
            .route("/slow", handler)
            .layer(SentinelLayer::with_sentinel(sentinel));
        let addr = serve(app).await;

        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /slow HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .await
            .unwrap();
        eventually(Duration::from_secs(5), || {
            started.load(Ordering::SeqCst) == 1
        })
        .await;
        let node = sentinel.resource_node("GET:/slow").unwrap();
        assert_eq!(node.stats().cur_concurrency(), 1);

        drop(stream);
        eventually(Duration::from_secs(5), || {
            node.stats().cur_concurrency() == 0
        })
        .await;
    });
}

#[test]
fn a_rate_limiter_queues_without_blocking_and_refuses_past_its_queue() {
    run(async {
        let (sentinel, _clock) = sentinel();
        let mut rule = FlowRule::new("GET:/paced", 1.0);
        rule.control_behavior = ControlBehavior::RateLimiter;
        rule.max_queueing_time_ms = 100;
        sentinel.flow_rules().load(vec![rule]).unwrap();
        let app = Router::new()
            .route("/paced", get(|| async { "paced" }))
            .layer(SentinelLayer::with_sentinel(sentinel));
        let addr = serve(app).await;

        assert_eq!(fetch(addr, "/paced", &[]).await.status, StatusCode::OK);
        // The next slot is a second away, past the 100 ms queue.
        let refused = fetch(addr, "/paced", &[]).await;
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.body, "blocked by flow");
        assert_eq!(refused.headers["retry-after"], "1");
    });
}

#[test]
fn a_raw_http_exchange_reads_the_block_response() {
    // The same 429 on the wire, read without a client library.
    run(async {
        let (sentinel, _clock) = sentinel();
        sentinel
            .flow_rules()
            .load(vec![FlowRule::new("GET:/zero", 0.0)])
            .unwrap();
        let app = Router::new()
            .route("/zero", get(|| async { "never" }))
            .layer(SentinelLayer::with_sentinel(sentinel));
        let addr = serve(app).await;
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /zero HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).await.unwrap();
        assert!(
            text.starts_with("HTTP/1.1 429 Too Many Requests\r\n"),
            "{text}"
        );
        assert!(text.ends_with("\r\n\r\nblocked by flow"), "{text}");
    });
}
