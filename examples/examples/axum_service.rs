//! An axum service behind `SentinelLayer`, with its rules in a YAML file
//! that is hot-reloaded.
//!
//! Routes: `GET /orders/{id}` (a flow rule limits it), `GET /payments`
//! (fails every other call, so the file's breaker opens), `GET /admin`
//! (only for origin `ops-console`, from the `x-caller` header). It prints
//! its address and serves for SECONDS (default 60), printing each second
//! what passed and what was blocked.
//!
//! Run: `cargo run -p examples --example axum_service [-- SECONDS] [-- PATH]`
//! (rules from `examples/axum_rules.yaml` unless PATH is given), then e.g.
//! `curl -i localhost:PORT/orders/7`, `curl -i localhost:PORT/payments`,
//! `curl -i -H 'x-caller: ops-console' localhost:PORT/admin`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::Path;
use axum::http::StatusCode;
use axum::routing::get;
use sentinel_flow_rules::RuleWatcher;
use sentinel_flow_tower::SentinelLayer;

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

#[tokio::main]
async fn main() {
    let mut seconds = 60u64;
    let mut path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/axum_rules.yaml"));
    for arg in std::env::args().skip(1) {
        match arg.parse() {
            Ok(n) => seconds = n,
            Err(_) => path = PathBuf::from(arg),
        }
    }

    let sentinel = sentinel_flow_core::global();
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
        .layer(SentinelLayer::new().origin_header("x-caller"));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    println!(
        "listening on http://{addr} for {seconds} s (rules: {})",
        path.display()
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.tick().await;
    for _ in 0..seconds {
        ticker.tick().await;
        let now = sentinel.now_ms();
        let line: Vec<String> = RESOURCES
            .iter()
            .filter_map(|name| {
                let stats = sentinel.resource_node(name)?.stats();
                Some(format!(
                    "{name} pass {} block {}",
                    stats.previous_pass_qps(now),
                    stats.previous_block_qps(now)
                ))
            })
            .collect();
        if !line.is_empty() {
            println!("{}", line.join(" | "));
        }
    }
}
