//! Gateway rules over real HTTP on loopback: each client, bound to its own
//! 127.0.0.x source address, limited per IP on an API group of three
//! routes; forwarded addresses believed only from trusted proxies; per
//! API key, per query parameter; regex predicates and `contains` items as
//! in Sentinel. Windows move with the instance's manual clock. The
//! rate limiter's queue is also driven on a paused runtime, without a
//! network, to see when each queued request is let through.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use axum::Router;
use axum::routing::get;
use bytes::Bytes;
use common::{run, sentinel};
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use sentinel_flow_core::{ManualClock, Sentinel};
use sentinel_flow_tower::gateway::{
    ApiDefinition, ApiPredicate, Gateway, GatewayLayer, GatewayParamItem, GatewayRule, ValueMatch,
};
use tokio::net::TcpSocket;

/// An app of routes `/a/{id}`, `/b/{id}`, `/c/{id}`, `/items/{id}`,
/// `/search`, `/feed/{id}` behind `layer`, served with the connection's
/// peer address, on 127.0.0.1.
async fn serve(layer: GatewayLayer) -> SocketAddr {
    let app = Router::new()
        .route("/a/{id}", get(|| async { "a" }))
        .route("/b/{id}", get(|| async { "b" }))
        .route("/c/{id}", get(|| async { "c" }))
        .route("/items/{id}", get(|| async { "item" }))
        .route("/search", get(|| async { "found" }))
        .route("/feed/{id}", get(|| async { "feed" }))
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap()
    });
    addr
}

/// A keep-alive HTTP/1.1 connection from the source address `source`.
struct Client {
    sender: SendRequest<Empty<Bytes>>,
    server: SocketAddr,
}

impl Client {
    async fn connect(source: Ipv4Addr, server: SocketAddr) -> Client {
        let socket = TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::new(IpAddr::V4(source), 0)).unwrap();
        let stream = socket.connect(server).await.unwrap();
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(connection);
        Client { sender, server }
    }

    /// `GET path` with `headers`: the status and the response's headers.
    async fn get(&mut self, path: &str, headers: &[(&str, &str)]) -> (StatusCode, http::HeaderMap) {
        let mut request = Request::get(path).header("host", self.server.to_string());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        self.sender.ready().await.unwrap();
        let response = self
            .sender
            .send_request(request.body(Empty::new()).unwrap())
            .await
            .unwrap();
        let (parts, body) = response.into_parts();
        body.collect().await.unwrap();
        (parts.status, parts.headers)
    }

    /// How many of `paths` (with `headers`) were admitted.
    async fn admitted(&mut self, paths: &[String], headers: &[(&str, &str)]) -> usize {
        let mut admitted = 0;
        for path in paths {
            let (status, _) = self.get(path, headers).await;
            match status {
                StatusCode::OK => admitted += 1,
                StatusCode::TOO_MANY_REQUESTS => {}
                other => panic!("unexpected status {other} for {path}"),
            }
        }
        admitted
    }
}

fn gateway_on(
    sentinel: &'static Sentinel,
    definitions: Vec<ApiDefinition>,
    rules: Vec<GatewayRule>,
) -> Gateway {
    let gateway = Gateway::new(sentinel);
    gateway.load(definitions, rules).unwrap();
    gateway
}

/// The API group `abc` over three routes, one predicate of each kind.
fn abc() -> ApiDefinition {
    ApiDefinition::new(
        "abc",
        vec![
            ApiPredicate::prefix("/a/**"),
            ApiPredicate::exact("/b/1"),
            ApiPredicate::regex("/c/[0-9]+"),
        ],
    )
}

/// 30 requests over the three routes of `abc`, 10 each.
fn thirty_over_three_routes() -> Vec<String> {
    (0..30)
        .map(|i| match i % 3 {
            0 => format!("/a/{i}"),
            1 => "/b/1".to_owned(),
            _ => format!("/c/{i}"),
        })
        .collect()
}

fn source(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, 0, last)
}

#[test]
fn fifty_clients_at_three_times_a_per_ip_limit_are_each_admitted_exactly_the_limit_per_second() {
    run(async {
        let (sentinel, clock): (_, ManualClock) = sentinel();
        let gateway = gateway_on(
            sentinel,
            vec![abc()],
            vec![GatewayRule::api_group("abc", 10.0).param_item(GatewayParamItem::client_ip())],
        );
        let server = serve(GatewayLayer::new(&gateway)).await;
        let mut clients = Vec::new();
        for last in 2..52 {
            clients.push(Client::connect(source(last), server).await);
        }
        for second in 0..3 {
            let mut tasks = tokio::task::JoinSet::new();
            for (n, mut client) in clients.drain(..).enumerate() {
                tasks.spawn(async move {
                    let admitted = client.admitted(&thirty_over_three_routes(), &[]).await;
                    (n, admitted, client)
                });
            }
            let mut done = tasks.join_all().await;
            done.sort_by_key(|(n, ..)| *n);
            for (n, admitted, client) in done {
                assert_eq!(admitted, 10, "client 127.0.0.{} in second {second}", n + 2);
                clients.push(client);
            }
            // Into the next aligned second, more than a second after this
            // one's refill: Sentinel's per-value bucket refills once more
            // than its duration has passed since its last refill (at
            // exactly one second it still holds the old window).
            clock.advance_ms(1_001);
        }
        // The group's resource counted every admitted request.
        let node = sentinel.resource_node("abc").unwrap();
        assert_eq!(node.stats().total_pass(sentinel.now_ms()), 50 * 10 * 3);
    });
}

#[test]
fn a_refusal_states_the_callers_own_limit() {
    run(async {
        let (sentinel, _clock) = sentinel();
        let gateway = gateway_on(
            sentinel,
            vec![abc()],
            vec![GatewayRule::api_group("abc", 2.0).param_item(GatewayParamItem::client_ip())],
        );
        let server = serve(GatewayLayer::new(&gateway)).await;
        let mut client = Client::connect(source(2), server).await;
        assert_eq!(client.get("/a/1", &[]).await.0, StatusCode::OK);
        assert_eq!(client.get("/a/1", &[]).await.0, StatusCode::OK);
        let (status, headers) = client.get("/a/1", &[]).await;
        assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(headers["retry-after"], "1");
        assert_eq!(headers["ratelimit-policy"], "\"default\";q=2;w=1");
        assert_eq!(headers["ratelimit"], "\"default\";r=0;t=1");
    });
}

#[test]
fn a_spoofed_forwarded_address_from_an_untrusted_peer_is_limited_by_its_real_address() {
    run(async {
        let (sentinel, _clock) = sentinel();
        let gateway = gateway_on(
            sentinel,
            vec![abc()],
            vec![GatewayRule::api_group("abc", 10.0).param_item(GatewayParamItem::client_ip())],
        );
        // Trusts a proxy, but not this client's address.
        let layer = GatewayLayer::new(&gateway).trusted_proxies(["10.0.0.0/8".parse().unwrap()]);
        let server = serve(layer).await;
        let mut client = Client::connect(source(60), server).await;
        let mut admitted = 0;
        for (i, path) in thirty_over_three_routes().iter().enumerate() {
            let spoof = format!("203.0.113.{i}");
            let forwarded = format!("for={spoof}");
            let headers = [
                ("x-forwarded-for", spoof.as_str()),
                ("x-real-ip", spoof.as_str()),
                ("forwarded", forwarded.as_str()),
            ];
            admitted += client.admitted(std::slice::from_ref(path), &headers).await;
        }
        assert_eq!(admitted, 10);
    });
}

#[test]
fn behind_a_trusted_proxy_each_forwarded_client_is_limited_on_its_own() {
    run(async {
        let (sentinel, _clock) = sentinel();
        let gateway = gateway_on(
            sentinel,
            vec![abc()],
            vec![GatewayRule::api_group("abc", 10.0).param_item(GatewayParamItem::client_ip())],
        );
        let layer = GatewayLayer::new(&gateway).trusted_proxies(["127.0.0.70/32".parse().unwrap()]);
        let server = serve(layer).await;
        let mut proxy = Client::connect(source(70), server).await;
        let paths = thirty_over_three_routes();
        for client in ["198.51.100.1", "198.51.100.2", "198.51.100.3"] {
            let admitted = proxy
                .admitted(&paths[..15], &[("x-forwarded-for", client)])
                .await;
            assert_eq!(admitted, 10, "{client}");
        }
        // What the client wrote before the proxy's entry is not believed:
        // the right-most untrusted address is.
        let mut admitted = 0;
        for (i, path) in paths[..15].iter().enumerate() {
            let chain = format!("6.6.6.{i}, 198.51.100.9");
            admitted += proxy
                .admitted(std::slice::from_ref(path), &[("x-forwarded-for", &chain)])
                .await;
        }
        assert_eq!(admitted, 10);
    });
}

#[test]
fn per_api_key_rules_limit_each_key_and_count_requests_without_one_as_one() {
    run(async {
        let (sentinel, clock) = sentinel();
        let gateway = gateway_on(
            sentinel,
            vec![],
            vec![
                GatewayRule::route("/items/{id}", 5.0)
                    .param_item(GatewayParamItem::header("x-api-key").count_missing_as_one(true)),
                // Without count_missing_as_one: requests without the key pass.
                GatewayRule::route("/search", 5.0)
                    .param_item(GatewayParamItem::header("x-api-key")),
            ],
        );
        let server = serve(GatewayLayer::new(&gateway)).await;
        let mut client = Client::connect(source(80), server).await;
        let items: Vec<String> = (0..8).map(|i| format!("/items/{i}")).collect();
        let search: Vec<String> = (0..8).map(|_| "/search".to_owned()).collect();
        for _second in 0..2 {
            assert_eq!(client.admitted(&items, &[("x-api-key", "k1")]).await, 5);
            assert_eq!(client.admitted(&items, &[("x-api-key", "k2")]).await, 5);
            assert_eq!(
                client.admitted(&items, &[]).await,
                5,
                "no key: one shared count"
            );
            assert_eq!(client.admitted(&search, &[("x-api-key", "k1")]).await, 5);
            assert_eq!(client.admitted(&search, &[]).await, 8, "no key passes");
            clock.advance_ms(1_001);
        }
    });
}

#[test]
fn per_query_parameter_rules_limit_values_inside_the_pattern_and_pass_the_others() {
    run(async {
        let (sentinel, _clock) = sentinel();
        let gateway = gateway_on(
            sentinel,
            vec![],
            vec![GatewayRule::route("/search", 3.0).param_item(
                GatewayParamItem::url_param("user").pattern("vip-[0-9]+", ValueMatch::Regex),
            )],
        );
        let server = serve(GatewayLayer::new(&gateway)).await;
        let mut client = Client::connect(source(90), server).await;
        let times = |path: &str| vec![path.to_owned(); 8];
        assert_eq!(client.admitted(&times("/search?user=vip-1"), &[]).await, 3);
        assert_eq!(
            client.admitted(&times("/search?user=vip-2&x=1"), &[]).await,
            3
        );
        // Percent-decoded as a form: `vip%2D3` is `vip-3`.
        assert_eq!(
            client.admitted(&times("/search?user=vip%2D3"), &[]).await,
            3
        );
        // Outside the pattern, or missing: not limited.
        assert_eq!(client.admitted(&times("/search?user=vip-1x"), &[]).await, 8);
        assert_eq!(client.admitted(&times("/search?user=bob"), &[]).await, 8);
        assert_eq!(client.admitted(&times("/search"), &[]).await, 8);
    });
}

#[test]
fn a_regex_predicate_and_a_contains_item_match_as_in_sentinel() {
    run(async {
        let (sentinel, _clock) = sentinel();
        let gateway = gateway_on(
            sentinel,
            vec![ApiDefinition::new(
                "feeds",
                vec![ApiPredicate::regex("/feed/[0-9]+")],
            )],
            vec![GatewayRule::api_group("feeds", 2.0).param_item(
                GatewayParamItem::header("user-agent").pattern("bot", ValueMatch::Contains),
            )],
        );
        let server = serve(GatewayLayer::new(&gateway)).await;
        let mut client = Client::connect(source(100), server).await;
        let feed = vec!["/feed/1".to_owned(); 5];
        assert_eq!(
            client
                .admitted(&feed, &[("user-agent", "googlebot/2.1")])
                .await,
            2
        );
        assert_eq!(
            client.admitted(&feed, &[("user-agent", "bingbot")]).await,
            2
        );
        // Without "bot": passes.
        assert_eq!(
            client
                .admitted(&feed, &[("user-agent", "Mozilla/5.0")])
                .await,
            5
        );
        // The predicate matches the whole path: `/feed/abc` is not in the group.
        let other = vec!["/feed/abc".to_owned(); 5];
        assert_eq!(
            client
                .admitted(&other, &[("user-agent", "googlebot/2.1")])
                .await,
            5
        );
        assert!(
            sentinel.resource_node("/feed/{id}").is_some(),
            "the route is entered"
        );
    });
}

#[test]
fn a_route_rule_without_an_item_limits_the_route_as_a_whole() {
    run(async {
        let (sentinel, _clock) = sentinel();
        let gateway = gateway_on(
            sentinel,
            vec![],
            vec![GatewayRule::route("/items/{id}", 4.0)],
        );
        let server = serve(GatewayLayer::new(&gateway)).await;
        let mut one = Client::connect(source(110), server).await;
        let mut two = Client::connect(source(111), server).await;
        let items: Vec<String> = (0..3).map(|i| format!("/items/{i}")).collect();
        assert_eq!(
            one.admitted(&items, &[]).await + two.admitted(&items, &[]).await,
            4
        );
        let (_, headers) = one.get("/items/9", &[]).await;
        assert_eq!(headers["ratelimit-policy"], "\"default\";q=4;w=1");
    });
}

#[test]
fn a_load_replaces_the_gateways_rules_and_keeps_the_others() {
    let (sentinel, _clock) = sentinel();
    sentinel
        .flow_rules()
        .load(vec![sentinel_flow_core::flow::FlowRule::new("other", 1.0)])
        .unwrap();
    let gateway = gateway_on(sentinel, vec![abc()], vec![GatewayRule::route("/x", 1.0)]);
    assert_eq!(
        sentinel.gateway_rules().rules(),
        [GatewayRule::route("/x", 1.0)]
    );
    gateway
        .load(
            vec![abc()],
            vec![GatewayRule::api_group("abc", 1.0).param_item(GatewayParamItem::client_ip())],
        )
        .unwrap();
    let flow: Vec<_> = sentinel
        .flow_rules()
        .rules()
        .into_iter()
        .map(|r| r.resource)
        .collect();
    assert_eq!(flow, ["other"]);
    assert!(sentinel.param_flow_rules().rules().is_empty());
    assert_eq!(gateway.rules().len(), 1);
    // An invalid load changes nothing.
    let error = gateway
        .load(vec![], vec![GatewayRule::route("/x", -1.0)])
        .unwrap_err();
    assert_eq!(error.errors()[0].field, "count");
    assert_eq!(gateway.api_definitions(), vec![abc()]);
    assert_eq!(gateway.rules().len(), 1);
    // A rule naming an undefined API group is no error: it matches no
    // request, as in Sentinel.
    gateway
        .load(vec![], vec![GatewayRule::api_group("abc", 1.0)])
        .unwrap();
    assert!(gateway.api_definitions().is_empty());
}

#[test]
fn a_rate_limiter_rule_queues_each_clients_requests_on_a_timer() {
    run(async {
        let (sentinel, _clock) = sentinel();
        let gateway = gateway_on(
            sentinel,
            vec![abc()],
            vec![GatewayRule {
                control_behavior: sentinel_flow_tower::gateway::GatewayBehavior::RateLimiter,
                max_queueing_timeout_ms: 500,
                ..GatewayRule::api_group("abc", 10.0).param_item(GatewayParamItem::client_ip())
            }],
        );
        let server = serve(GatewayLayer::new(&gateway)).await;
        // Three connections of one client at once: queued 100 ms apart (when
        // each is let through is checked on a paused runtime, below).
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..3 {
            tasks.spawn(async move {
                let mut client = Client::connect(source(120), server).await;
                client.get("/a/1", &[]).await.0
            });
        }
        let statuses = tasks.join_all().await;
        assert_eq!(statuses, [StatusCode::OK; 3]);
        // Past the queue's 500 ms: the sixth request of the client at one
        // instant is refused (waits of 0, 100, .., 400 ms fit; 500 does not).
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..6 {
            tasks.spawn(async move {
                let mut client = Client::connect(source(122), server).await;
                client.get("/a/1", &[]).await.0
            });
        }
        let statuses = tasks.join_all().await;
        let admitted = statuses.iter().filter(|s| **s == StatusCode::OK).count();
        assert_eq!(admitted, 5, "{statuses:?}");
    });
}

/// The layer's queue on a paused runtime, its clock driven by hand (never
/// read), the instance's manual clock standing still: each client's
/// queued requests are let through 100 ms apart, another client's first
/// at once.
#[tokio::test(start_paused = true)]
async fn a_rate_limiter_rule_lets_each_queued_request_through_at_its_turn() {
    use std::convert::Infallible;
    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;
    use tower::{ServiceBuilder, ServiceExt, service_fn};

    let (sentinel, _clock) = sentinel();
    let gateway = gateway_on(
        sentinel,
        vec![abc()],
        vec![GatewayRule {
            control_behavior: sentinel_flow_tower::gateway::GatewayBehavior::RateLimiter,
            max_queueing_timeout_ms: 500,
            ..GatewayRule::api_group("abc", 10.0).param_item(GatewayParamItem::client_ip())
        }],
    );
    let service = ServiceBuilder::new()
        .layer(GatewayLayer::new(&gateway))
        .service(service_fn(|_: Request<axum::body::Body>| async {
            Ok::<_, Infallible>(http::Response::new(axum::body::Body::empty()))
        }));
    let request = |last: u8| {
        let mut request = Request::get("/a/1")
            .body(axum::body::Body::empty())
            .unwrap();
        let peer = SocketAddr::new(IpAddr::V4(source(last)), 4000);
        request
            .extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        request
    };
    type Call = Pin<Box<dyn Future<Output = Option<StatusCode>>>>;
    let mut calls: Vec<Call> = [130, 130, 130, 131]
        .into_iter()
        .map(|last| {
            let call = service.clone().oneshot(request(last));
            Box::pin(async move { call.await.ok().map(|response| response.status()) }) as Call
        })
        .collect();
    // Each call polled once at one instant (its checks run), then the
    // runtime's time driven 1 ms at a time: when each is let through.
    let mut cx = Context::from_waker(Waker::noop());
    let mut done: Vec<Option<(u64, Option<StatusCode>)>> = vec![None; calls.len()];
    for ms in 0..=250u64 {
        if ms > 0 {
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        for (call, done) in calls.iter_mut().zip(&mut done) {
            if done.is_none() {
                if let Poll::Ready(status) = call.as_mut().poll(&mut cx) {
                    *done = Some((ms, status));
                }
            }
        }
    }
    let ok = Some(StatusCode::OK);
    assert_eq!(done[0], Some((0, ok)), "{done:?}");
    assert_eq!(
        done[3],
        Some((0, ok)),
        "another client is not queued: {done:?}"
    );
    // tokio's timer fires within a millisecond after the wait.
    for (k, due) in [(1, 100), (2, 200)] {
        let (at, status) = done[k].expect("let through");
        assert_eq!(status, ok);
        assert!(
            (due..=due + 1).contains(&at),
            "request {k} let through at {at} ms, due {due}"
        );
    }
}

#[test]
fn a_concurrency_rule_holds_each_clients_entries_until_its_response_ends() {
    run(async {
        let (sentinel, _clock) = sentinel();
        let gateway = gateway_on(
            sentinel,
            vec![ApiDefinition::new(
                "slow",
                vec![ApiPredicate::prefix("/slow/**")],
            )],
            vec![GatewayRule {
                grade: sentinel_flow_tower::gateway::GatewayGrade::Concurrency,
                ..GatewayRule::api_group("slow", 1.0).param_item(GatewayParamItem::client_ip())
            }],
        );
        // The handler answers when the test gives it a permit.
        let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
        let handler_gate = gate.clone();
        let app = Router::new()
            .route(
                "/slow/{id}",
                get(move || {
                    let gate = handler_gate.clone();
                    async move {
                        gate.acquire().await.unwrap().forget();
                        "done"
                    }
                }),
            )
            .layer(GatewayLayer::new(&gateway));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = listener.local_addr().unwrap();
        tokio::spawn(async move {
            axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await
            .unwrap()
        });
        let in_flight = || {
            sentinel
                .resource_node("slow")
                .map_or(0, |node| node.stats().cur_concurrency())
        };
        let slow = |last| {
            tokio::spawn(async move {
                let mut client = Client::connect(source(last), server).await;
                client.get("/slow/1", &[]).await.0
            })
        };
        let first = slow(130);
        common::eventually(std::time::Duration::from_secs(5), || in_flight() == 1).await;
        // The same client again, on another connection: over its limit.
        let mut again = Client::connect(source(130), server).await;
        assert_eq!(
            again.get("/slow/2", &[]).await.0,
            StatusCode::TOO_MANY_REQUESTS
        );
        // Another client has a limit of its own.
        let other = slow(131);
        common::eventually(std::time::Duration::from_secs(5), || in_flight() == 2).await;
        gate.add_permits(2);
        assert_eq!(first.await.unwrap(), StatusCode::OK);
        assert_eq!(other.await.unwrap(), StatusCode::OK);
        // Both exited when their responses ended: the client may call again.
        common::eventually(std::time::Duration::from_secs(5), || in_flight() == 0).await;
        gate.add_permits(1);
        assert_eq!(again.get("/slow/3", &[]).await.0, StatusCode::OK);
    });
}

#[test]
fn the_gateways_rules_stay_in_force_when_the_instances_rules_are_replaced() {
    let (sentinel, _clock) = sentinel();
    let rules = vec![
        GatewayRule::api_group("abc", 10.0).param_item(GatewayParamItem::client_ip()),
        GatewayRule::route("/x", 5.0),
    ];
    let gateway = gateway_on(sentinel, vec![abc()], rules.clone());
    // Another kind replaced (code, the dashboard): the gateway's kinds are
    // not touched.
    sentinel
        .flow_rules()
        .load(vec![sentinel_flow_core::flow::FlowRule::new(
            "from-file",
            1.0,
        )])
        .unwrap();
    sentinel.param_flow_rules().load(vec![]).unwrap();
    assert_eq!(gateway.rules(), rules);
    assert_eq!(gateway.api_definitions(), vec![abc()]);
    // A whole book carrying them (a rule file with their sections).
    let mut book = sentinel.rule_book();
    book.flow.clear();
    sentinel.load_rule_book(book).unwrap();
    assert_eq!(gateway.rules(), rules);
    // The rules are the instance's: another gateway on it reads them.
    assert_eq!(sentinel.gateway_rules().rules(), rules);
    assert_eq!(Gateway::new(sentinel).rules(), rules);
}

#[test]
fn a_request_without_its_peer_passes_a_per_ip_rule_unless_missing_counts_as_one() {
    use tower::{Layer, ServiceExt};
    run(async {
        let (sentinel, _clock) = sentinel();
        let gateway = gateway_on(
            sentinel,
            vec![],
            vec![
                GatewayRule::route("/open", 2.0).param_item(GatewayParamItem::client_ip()),
                GatewayRule::route("/counted", 2.0)
                    .param_item(GatewayParamItem::client_ip().count_missing_as_one(true)),
            ],
        );
        // A hyper service with no peer in the extensions.
        let inner = tower::service_fn(|_: Request<()>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(Empty::<Bytes>::new()))
        });
        let service = GatewayLayer::new(&gateway).layer(inner);
        let admitted = |path: &'static str| {
            let service = service.clone();
            async move {
                let mut admitted = 0;
                for _ in 0..5 {
                    let request = Request::get(path).body(()).unwrap();
                    let response = service.clone().oneshot(request).await.unwrap();
                    admitted += usize::from(response.status() == StatusCode::OK);
                }
                admitted
            }
        };
        assert_eq!(admitted("/open").await, 5);
        assert_eq!(admitted("/counted").await, 2);
    });
}

#[test]
fn a_request_in_its_route_and_two_api_groups_exits_all_three_when_its_response_ends() {
    run(async {
        let (sentinel, _clock) = sentinel();
        let everything = ApiDefinition::new("everything", vec![ApiPredicate::prefix("/**")]);
        let gateway = gateway_on(
            sentinel,
            vec![abc(), everything],
            vec![
                GatewayRule::route("/a/{id}", 100.0),
                GatewayRule::api_group("abc", 100.0).param_item(GatewayParamItem::client_ip()),
                GatewayRule::api_group("everything", 100.0),
            ],
        );
        let server = serve(GatewayLayer::new(&gateway)).await;
        let mut client = Client::connect(source(140), server).await;
        for i in 0..3 {
            assert_eq!(client.get(&format!("/a/{i}"), &[]).await.0, StatusCode::OK);
        }
        let now = sentinel.now_ms();
        for resource in ["/a/{id}", "abc", "everything"] {
            let node = sentinel.resource_node(resource).unwrap();
            common::eventually(std::time::Duration::from_secs(5), || {
                node.stats().cur_concurrency() == 0
            })
            .await;
            assert_eq!(node.stats().total_pass(now), 3, "{resource}");
            assert_eq!(node.stats().total_success(now), 3, "{resource}");
        }
    });
}

/// A hot-parameter rule of the route's resource reads the gateway's
/// argument as Sentinel passes it: the client's address as text, so an
/// item naming an address applies to that client.
#[test]
fn a_param_flow_item_naming_a_client_ip_applies_on_a_gateway_route() {
    use sentinel_flow_core::param_flow::{ParamFlowItem, ParamFlowRule};
    use tower::ServiceExt;

    run(async {
        let (sentinel, _clock) = sentinel();
        let gateway = Gateway::new(sentinel);
        gateway
            .load(
                vec![],
                vec![GatewayRule::route("/a", 100.0).param_item(GatewayParamItem::client_ip())],
            )
            .unwrap();
        sentinel
            .param_flow_rules()
            .load(vec![ParamFlowRule {
                param_flow_item_list: vec![ParamFlowItem::new("192.0.2.1", 0.0)],
                ..ParamFlowRule::new("/a", 0, 100.0)
            }])
            .unwrap();
        let app = Router::new()
            .route("/a", get(|| async { "a" }))
            .layer(GatewayLayer::new(&gateway));
        let from = |peer: &str| {
            let mut request = Request::get("/a").body(axum::body::Body::empty()).unwrap();
            request.extensions_mut().insert(axum::extract::ConnectInfo(
                peer.parse::<SocketAddr>().unwrap(),
            ));
            request
        };
        let named = app.clone().oneshot(from("192.0.2.1:1234")).await.unwrap();
        assert_eq!(named.status(), StatusCode::TOO_MANY_REQUESTS);
        let other = app.oneshot(from("192.0.2.2:1234")).await.unwrap();
        assert_eq!(other.status(), StatusCode::OK);
    });
}
