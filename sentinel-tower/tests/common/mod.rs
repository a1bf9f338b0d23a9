//! Helpers shared by the integration tests: an instance per test, a real
//! server on an ephemeral loopback port, and a hyper client.

#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use sentinel_flow_core::{ManualClock, Sentinel};

/// Every test finishes within this, or fails.
pub const TEST_DEADLINE: Duration = Duration::from_secs(20);

/// A leaked instance on a manual clock.
pub fn sentinel() -> (&'static Sentinel, ManualClock) {
    let clock = ManualClock::new(1_000_000);
    let sentinel = Sentinel::builder().clock(clock.clone()).build();
    (Box::leak(Box::new(sentinel)), clock)
}

/// Serves `app` on 127.0.0.1 at an ephemeral port.
pub async fn serve(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// A response: status, headers, body text.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

/// A client for HTTP/1.1 requests.
pub fn client() -> Client<HttpConnector, Empty<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// `GET http://addr{path}` with `headers`.
pub async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Reply {
    let mut request = Request::get(format!("http://{addr}{path}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client()
        .request(request.body(Empty::new()).unwrap())
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// Runs a test body on a multi-thread runtime, bounded by [`TEST_DEADLINE`].
pub fn run<F: Future<Output = ()>>(test: F) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            tokio::time::timeout(TEST_DEADLINE, test)
                .await
                .expect("test finished within its deadline")
        });
}

/// Polls `condition` until it holds, failing after `within`.
pub async fn eventually(within: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
