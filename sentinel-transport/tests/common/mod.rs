//! What the integration tests share: an instance on a manual clock, a
//! server on 127.0.0.1:0, a bounded HTTP client, and raw requests for
//! what a client library would not send.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use sentinel_flow_core::{ManualClock, Sentinel};
use sentinel_flow_transport::{CommandCenter, CommandCenterHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// 2023-11-14 22:13:20 UTC: a whole second.
pub const T0: u64 = 1_700_000_000_000;

/// Every request a test makes is bounded by this.
pub const TIMEOUT: Duration = Duration::from_secs(10);

pub fn instance() -> (Arc<Sentinel>, ManualClock) {
    let clock = ManualClock::new(T0);
    let sentinel = Sentinel::builder()
        .clock(clock.clone())
        .system_status(sentinel_flow_core::system::ManualStatus::new())
        .build();
    (Arc::new(sentinel), clock)
}

/// A command center for `sentinel` on a port the system picks; further
/// settings chain on it.
pub fn center(sentinel: &Arc<Sentinel>) -> CommandCenter {
    CommandCenter::new(Arc::clone(sentinel)).port(0)
}

/// A started command center for `sentinel` that takes writes (from
/// loopback, without a token). Call it inside a Tokio runtime.
pub fn writable_server(sentinel: &Arc<Sentinel>) -> CommandCenterHandle {
    center(sentinel).allow_writes(true).start().unwrap()
}

/// A multi-threaded runtime with two workers, for tests that drive the
/// server from synchronous code.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// One answer: status, Content-Type and body.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub content_type: Option<String>,
    pub body: String,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

/// Sends one request; `content_type` `None` sends none.
pub async fn send(
    method: Method,
    addr: SocketAddr,
    path_and_query: &str,
    headers: &[(&str, &str)],
    body: Option<String>,
) -> Answer {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let mut request = Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path_and_query}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .unwrap();
    let exchange = async {
        let response = client.request(request).await.expect("request failed");
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned());
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        Answer {
            status,
            content_type,
            body: String::from_utf8(bytes.to_vec()).unwrap(),
        }
    };
    tokio::time::timeout(TIMEOUT, exchange)
        .await
        .expect("no answer in time")
}

pub async fn get(addr: SocketAddr, path_and_query: &str) -> Answer {
    send(Method::GET, addr, path_and_query, &[], None).await
}

/// A form POST as the dashboard sends it.
pub async fn post_form(addr: SocketAddr, path: &str, pairs: &[(&str, &str)]) -> Answer {
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish();
    send(
        Method::POST,
        addr,
        path,
        &[(
            "content-type",
            "application/x-www-form-urlencoded; charset=UTF-8",
        )],
        Some(body),
    )
    .await
}

/// A GET with extra headers.
pub async fn get_with(addr: SocketAddr, path_and_query: &str, headers: &[(&str, &str)]) -> Answer {
    send(Method::GET, addr, path_and_query, headers, None).await
}

/// A form POST of a body already encoded, with extra headers.
pub async fn post_with(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut all = vec![("content-type", "application/x-www-form-urlencoded")];
    all.extend_from_slice(headers);
    send(Method::POST, addr, path, &all, Some(body.into())).await
}

/// The status line of the answer to `request`, written raw on a new
/// connection; the wait for it is bounded by [`TIMEOUT`].
pub async fn raw_status(addr: SocketAddr, request: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    let read = tokio::time::timeout(TIMEOUT, async {
        while !answer.windows(2).any(|w| w == b"\r\n") {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no answer within {TIMEOUT:?}");
    let text = String::from_utf8_lossy(&answer).into_owned();
    text.lines().next().unwrap_or("").to_owned()
}

/// `value` with every key named `timestamp` or `id`/`parentId` left as is:
/// golden files are compared as JSON values, not bytes.
pub fn assert_golden(name: &str, actual: &serde_json::Value) {
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, serde_json::to_string_pretty(actual).unwrap() + "\n").unwrap();
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let expected: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        actual,
        &expected,
        "{name} differs; actual:\n{}",
        serde_json::to_string_pretty(actual).unwrap()
    );
}

/// What Apache's HttpAsyncClient 4.1, the dashboard's client, puts on
/// every request.
pub const DASHBOARD_USER_AGENT: &str = "Apache-HttpAsyncClient/4.1.4 (Java/1.8.0_392)";

/// One request on its own connection, written as the dashboard's Apache
/// client writes it (`head` is the request line); the status and the
/// body of the answer, read up to its Content-Length.
pub async fn dashboard_exchange(addr: SocketAddr, head: &str, body: &str) -> (u16, String) {
    let request = format!(
        "{head}\r\nHost: {addr}\r\nConnection: Keep-Alive\r\nUser-Agent: {DASHBOARD_USER_AGENT}\r\n\r\n{body}"
    );
    let run = async {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            if let Some(done) = complete_answer(&answer) {
                return done;
            }
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "closed before a whole answer: {answer:?}");
            answer.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(TIMEOUT, run)
        .await
        .expect("an answer in time")
}

/// The status and body once `answer` holds its head and its
/// Content-Length of body.
fn complete_answer(answer: &[u8]) -> Option<(u16, String)> {
    let text = String::from_utf8_lossy(answer);
    let (head, body) = text.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let length: usize = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.eq_ignore_ascii_case("content-length")
            .then(|| value.trim().parse().ok())?
    })?;
    (body.len() >= length).then(|| (status, body[..length].to_owned()))
}
