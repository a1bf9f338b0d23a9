//! `cargo run --release -p loadgen [-- SECONDS [QPS]]` (default 10 s, 200 QPS)
//!
//! A load generator for `SentinelLayer` on loopback: it starts an axum
//! service in-process on an ephemeral port with a flow rule of QPS on
//! `GET:/orders/{id}`, sends 3 x QPS requests a second for SECONDS, and
//! prints per second: sent, 200s, 429s, and p50/p99 latency of the admitted
//! requests; then an unloaded run (QPS / 2 a second) for comparison.
//! Each run starts on a whole second of the clock, so that each row's
//! second is one of the rule's windows (two 500 ms buckets) and admits at
//! most QPS; a second counted from an arbitrary instant overlaps three
//! buckets and may admit more, although the rule holds.
//!
//! Pacing lags by up to a 5 ms tick, so a row may show a few requests
//! sent more or fewer than its share.
//!
//! Bounded: at most 3 x QPS x SECONDS requests, each with a 2 s timeout,
//! at most 1024 in flight, 127.0.0.1 only.
//!
//! A tracing subscriber prints the library's log on stderr.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Path;
use axum::routing::get;
use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use sentinel_flow::Sentinel;
use sentinel_flow::flow::FlowRule;
use sentinel_flow::tower::SentinelLayer;
use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;

const RESOURCE: &str = "GET:/orders/{id}";
const MAX_IN_FLIGHT: usize = 1024;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// What one second of sending gave.
struct Second {
    sent: u64,
    ok: u64,
    blocked: u64,
    other: u64,
    /// Latency of admitted (200) requests, microseconds.
    admitted: Histogram<u64>,
}

impl Second {
    fn new() -> Self {
        Second {
            sent: 0,
            ok: 0,
            blocked: 0,
            other: 0,
            admitted: Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
        }
    }
}

async fn order(Path(id): Path<u64>) -> String {
    format!("order {id}")
}

fn main() {
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args().skip(1).map(|arg| {
        arg.parse::<u64>()
            .unwrap_or_else(|_| panic!("not a number: {arg}"))
    });
    let seconds = args.next().unwrap_or(10).clamp(1, 120);
    let qps = args.next().unwrap_or(200).clamp(1, 5_000);
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(run(seconds, qps));
}

async fn run(seconds: u64, qps: u64) {
    let sentinel: &'static Sentinel = Box::leak(Box::new(Sentinel::builder().build()));
    sentinel
        .flow_rules()
        .load(vec![FlowRule::new(RESOURCE, qps as f64)])
        .expect("a valid rule");
    let app = Router::new()
        .route("/orders/{id}", get(order))
        .layer(SentinelLayer::with_sentinel(sentinel));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serving") });
    let client: HttpClient = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(MAX_IN_FLIGHT)
        .build_http();

    println!(
        "loaded run: {} req/s for {seconds} s at {addr}, flow rule {RESOURCE} count {qps}",
        3 * qps
    );
    whole_second(sentinel).await;
    let loaded = drive(sentinel, &client, addr, 3 * qps, seconds).await;
    print_seconds(&loaded);

    // Let the rule's window (1 s) forget the loaded run.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let calm_seconds = seconds.min(5);
    println!("\nunloaded run: {} req/s for {calm_seconds} s", qps / 2);
    whole_second(sentinel).await;
    let unloaded = drive(sentinel, &client, addr, (qps / 2).max(1), calm_seconds).await;
    print_seconds(&unloaded);

    // The first second ramps up: judge the steady seconds.
    let steady = if loaded.len() > 1 {
        &loaded[1..]
    } else {
        &loaded[..]
    };
    let worst = steady
        .iter()
        .map(|s| (s.ok as f64 - qps as f64).abs() / qps as f64)
        .fold(0.0, f64::max);
    println!(
        "\nadmitted per second (seconds 2..): min {} max {} (rule {qps}), worst deviation {:.1}%",
        steady.iter().map(|s| s.ok).min().unwrap_or(0),
        steady.iter().map(|s| s.ok).max().unwrap_or(0),
        worst * 100.0
    );
    let (l50, l99) = percentiles(&loaded);
    let (u50, u99) = percentiles(&unloaded);
    println!("admitted latency, loaded:   p50 {l50} us, p99 {l99} us");
    println!("admitted latency, unloaded: p50 {u50} us, p99 {u99} us");
}

/// Waits for the next whole second of the instance's clock.
async fn whole_second(sentinel: &Sentinel) {
    let now = sentinel.now_ms();
    tokio::time::sleep(Duration::from_millis(1_000 - now % 1_000)).await;
}

/// Sends `rate` requests a second for `seconds`, paced on a 5 ms tick,
/// from a whole second of the clock on; a row is a second of the clock.
async fn drive(
    sentinel: &Sentinel,
    client: &HttpClient,
    addr: SocketAddr,
    rate: u64,
    seconds: u64,
) -> Vec<Second> {
    let total = rate * seconds;
    let (tx, mut rx) = mpsc::unbounded_channel::<(usize, u16, u64)>();
    let permits = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut per_second: Vec<Second> = (0..seconds).map(|_| Second::new()).collect();
    let start = Instant::now();
    // Each request is counted in the second of the clock it was sent in.
    let first_second = sentinel.now_ms() / 1_000;
    let mut tick = tokio::time::interval(Duration::from_millis(5));
    let mut sent = 0u64;
    'sending: while sent < total {
        tick.tick().await;
        let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
        while sent < due.min(total) {
            let second = usize::try_from(sentinel.now_ms() / 1_000 - first_second).expect("small");
            // A request due before the end but sent after it is not sent:
            // it would count against a second of the rule that no row shows.
            let Some(row) = per_second.get_mut(second) else {
                break 'sending;
            };
            row.sent += 1;
            let permit = Arc::clone(&permits).acquire_owned().await.expect("open");
            let (client, tx) = (client.clone(), tx.clone());
            let uri = format!("http://{addr}/orders/{}", sent % 1000);
            tokio::spawn(async move {
                let began = Instant::now();
                let status = tokio::time::timeout(REQUEST_TIMEOUT, async {
                    let request = http::Request::get(uri)
                        .body(Empty::new())
                        .expect("a request");
                    let response = client.request(request).await.ok()?;
                    let status = response.status().as_u16();
                    response.into_body().collect().await.ok()?;
                    Some(status)
                })
                .await
                .ok()
                .flatten()
                .unwrap_or(0);
                let micros = u64::try_from(began.elapsed().as_micros()).unwrap_or(u64::MAX);
                let _ = tx.send((second, status, micros));
                drop(permit);
            });
            sent += 1;
        }
    }
    drop(tx);
    while let Some((second, status, micros)) = rx.recv().await {
        let stats = &mut per_second[second];
        match status {
            200 => {
                stats.ok += 1;
                stats.admitted.saturating_record(micros);
            }
            429 => stats.blocked += 1,
            _ => stats.other += 1,
        }
    }
    per_second
}

fn print_seconds(seconds: &[Second]) {
    println!(
        "{:>4} {:>6} {:>6} {:>6} {:>6} {:>9} {:>9}",
        "sec", "sent", "200", "429", "other", "p50 us", "p99 us"
    );
    for (i, s) in seconds.iter().enumerate() {
        println!(
            "{:>4} {:>6} {:>6} {:>6} {:>6} {:>9} {:>9}",
            i + 1,
            s.sent,
            s.ok,
            s.blocked,
            s.other,
            s.admitted.value_at_quantile(0.5),
            s.admitted.value_at_quantile(0.99)
        );
    }
}

/// p50 and p99 of admitted requests over a whole run.
fn percentiles(seconds: &[Second]) -> (u64, u64) {
    let mut all = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("valid bounds");
    for s in seconds {
        all.add(&s.admitted).expect("same bounds");
    }
    (all.value_at_quantile(0.5), all.value_at_quantile(0.99))
}
