//! `cargo run --release -p axum-service [-- [SECONDS] [PATH]]`
//! (default 60 seconds, rules from `examples/axum-service/rules.yaml`)
//!
//! An axum service behind `SentinelLayer`, with its rules in a YAML file
//! that is hot-reloaded.
//!
//! Routes: `GET /orders/{id}` (a flow rule limits it to 20 QPS),
//! `GET /payments` (fails every other call, so the file's breaker opens),
//! `GET /admin` (a white list admits only the origin `ops-console`, taken
//! from the `x-caller` header). The layer runs with `require_origin(true)`:
//! a request without the header has no origin, and on a resource with
//! authority rules it is refused like a caller off the list, so `/admin`
//! answers `429 blocked by authority` to it (without `require_origin`, a
//! request with no origin passes every list, as in Sentinel).
//!
//! On start it sends three requests to `/admin` itself and prints what each
//! got; then it serves for SECONDS, printing each second what passed and
//! what was blocked in the second before, per route (seconds with no
//! request print nothing). Try
//! `curl -i localhost:PORT/orders/7`, `curl -i localhost:PORT/payments`,
//! `curl -i -H 'x-caller: ops-console' localhost:PORT/admin`.
//!
//! A tracing subscriber prints the library's log on stderr (rule loads,
//! refused rule files).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::get;
use sentinel_flow::rules::RuleWatcher;
use sentinel_flow::tower::SentinelLayer;

const RESOURCES: [&str; 3] = ["GET:/orders/{id}", "GET:/payments", "GET:/admin"];

static PAYMENTS: AtomicU64 = AtomicU64::new(0);

async fn order(Path(id): Path<u64>) -> String {
    format!("order {id}\n")
}

/// Fails every other call: half the calls are errors.
async fn payments() -> (StatusCode, &'static str) {
    if PAYMENTS.fetch_add(1, Ordering::Relaxed) % 2 == 0 {
        (
            StatusCode::INTERNAL_SERVER_ERROR,
            "payment backend failed\n",
        )
    } else {
        (StatusCode::OK, "paid\n")
    }
}

/// Sends `GET path` with the given headers and returns the status line.
fn status_of(addr: SocketAddr, path: &str, headers: &str) -> String {
    let ask = || -> std::io::Result<String> {
        let mut stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(Duration::from_secs(2)))?;
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n"
        )?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        let status = response.lines().next().unwrap_or_default().to_owned();
        let body = response.split("\r\n\r\n").nth(1).unwrap_or_default().trim();
        Ok(format!("{status} ({body})"))
    };
    ask().unwrap_or_else(|error| format!("no answer: {error}"))
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .with_writer(std::io::stderr)
        .init();
    let mut seconds = 60u64;
    let mut path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/rules.yaml"));
    for arg in std::env::args().skip(1) {
        match arg.parse() {
            Ok(n) => seconds = n,
            Err(_) => path = PathBuf::from(arg),
        }
    }

    let sentinel = sentinel_flow::global();
    let watch = RuleWatcher::new(&path)
        .interval(Duration::from_millis(500))
        .on_success(|loaded| println!("rules loaded: {:?}", loaded.counts))
        .on_failure(|error| println!("rule file refused, the rules in force stay:\n{error}"));
    let _watch = match watch.start(sentinel) {
        Ok(handle) => handle,
        Err(error) => {
            eprintln!("cannot load the rules:\n{error}");
            std::process::exit(1);
        }
    };

    let app = Router::new()
        .route("/orders/{id}", get(order))
        .route("/payments", get(payments))
        .route("/admin", get(|| async { "admin\n" }))
        .layer(
            SentinelLayer::new()
                .origin_header("x-caller")
                .require_origin(true),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    println!(
        "listening on http://{addr} for {seconds} s (rules: {})",
        path.display()
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    for (caller, header) in [
        ("no x-caller header", ""),
        ("x-caller: web", "x-caller: web\r\n"),
        ("x-caller: ops-console", "x-caller: ops-console\r\n"),
    ] {
        let status = tokio::task::spawn_blocking(move || status_of(addr, "/admin", header))
            .await
            .expect("the request task");
        println!("GET /admin with {caller:<22} -> {status}");
    }
    println!(
        "(a request with no origin is refused before its entry: GET:/admin counts the other two)"
    );
    println!("per second, the requests of the second before (quiet seconds print nothing):");

    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.tick().await;
    for _ in 0..seconds {
        ticker.tick().await;
        let now = sentinel.now_ms();
        let line: Vec<String> = RESOURCES
            .iter()
            .filter_map(|name| {
                let stats = sentinel.resource_node(name)?.stats();
                let (pass, block) = (stats.previous_pass_qps(now), stats.previous_block_qps(now));
                (pass + block > 0.0).then(|| format!("{name} pass {pass} block {block}"))
            })
            .collect();
        if !line.is_empty() {
            println!("{}", line.join(" | "));
        }
    }
}
