//! The layer in front of a real tonic server (the generated health
//! service, no protoc): gRPC clients see `RESOURCE_EXHAUSTED` for a flow
//! block and `UNAVAILABLE` for an open breaker, and gRPC errors trip
//! breakers.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{run, sentinel};
use sentinel_flow_core::Sentinel;
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_tower::SentinelLayer;
use tonic::Code;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Channel, Server};
use tonic_health::pb::HealthCheckRequest;
use tonic_health::pb::health_client::HealthClient;

/// The resource of the health check: `POST:` + the gRPC path (no route
/// template outside tonic's router; the path has no id-like segment).
const CHECK: &str = "POST:/grpc.health.v1.Health/Check";

async fn serve_health(sentinel: &'static Sentinel) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_reporter, health) = tonic_health::server::health_reporter();
    let server = Server::builder()
        .layer(SentinelLayer::with_sentinel(sentinel))
        .add_service(health)
        .serve_with_incoming(TcpIncoming::from(listener));
    tokio::spawn(async move { server.await.unwrap() });
    addr
}

async fn client(addr: SocketAddr) -> HealthClient<Channel> {
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    HealthClient::new(channel)
}

async fn check(client: &mut HealthClient<Channel>, service: &str) -> Result<(), tonic::Status> {
    let request = HealthCheckRequest {
        service: service.into(),
    };
    client.check(request).await.map(drop)
}

#[test]
fn a_flow_block_is_resource_exhausted() {
    run(async {
        let (sentinel, _clock) = sentinel();
        sentinel
            .flow_rules()
            .load(vec![FlowRule::new(CHECK, 2.0)])
            .unwrap();
        let addr = serve_health(sentinel).await;
        let mut client = client(addr).await;
        check(&mut client, "").await.unwrap();
        check(&mut client, "").await.unwrap();
        let status = check(&mut client, "").await.unwrap_err();
        assert_eq!(status.code(), Code::ResourceExhausted);
        assert_eq!(status.message(), "blocked by flow");
        let stats = sentinel.resource_node(CHECK).unwrap().stats();
        assert_eq!(stats.total_pass(sentinel.now_ms()), 2);
        assert_eq!(stats.total_block(sentinel.now_ms()), 1);
    });
}

#[test]
fn grpc_errors_open_a_breaker_which_answers_unavailable_then_recovers() {
    run(async {
        let (sentinel, clock) = sentinel();
        let mut rule = DegradeRule::new(CHECK, DegradeGrade::ErrorCount, 2.0);
        rule.min_request_amount = 3;
        rule.time_window_sec = 5;
        sentinel.degrade_rules().load(vec![rule]).unwrap();
        let addr = serve_health(sentinel).await;
        let mut client = client(addr).await;

        // An unknown service is NOT_FOUND: a non-OK status, an error.
        let mut failures = 0;
        let open = loop {
            let status = check(&mut client, "unknown").await.unwrap_err();
            if status.code() != Code::NotFound {
                break status;
            }
            failures += 1;
            assert!(failures <= 10, "the breaker never opened");
        };
        assert_eq!(open.code(), Code::Unavailable);
        assert_eq!(open.message(), "blocked by degrade");
        let errors = sentinel
            .resource_node(CHECK)
            .unwrap()
            .stats()
            .total_exception(sentinel.now_ms());
        assert_eq!(errors, failures);

        clock.advance(Duration::from_secs(5));
        check(&mut client, "").await.unwrap();
        check(&mut client, "").await.unwrap();
    });
}
