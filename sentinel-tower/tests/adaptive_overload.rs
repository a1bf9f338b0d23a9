//! Adaptive concurrency against a fixed concurrency limit, in a real axum
//! service on 127.0.0.1 whose dependency degrades under a 3x overload.
//!
//! The scenario, the same for every run:
//!
//! - **The dependency** is a pool of [`POOL`] connections (a tokio
//!   semaphore); each call holds one for [`SERVICE_MS`] on average (80 to
//!   120 ms, spread evenly), so calls beyond the connections free wait their
//!   turn in the pool's queue, first in first out: the queueing is real.
//! - **Unloaded**: requests arrive at a fixed rate of [`UNLOADED_RATE`] a
//!   second (open loop: one every [`TICK`], whatever the replies), a
//!   sixteenth of what the healthy pool serves. The p99 of the requests'
//!   latency, measured at the client, in a run without any rule, is the
//!   baseline.
//! - **Overloaded**: the arrivals triple (three every [`TICK`]) and the
//!   dependency degrades: all but [`DEGRADED_POOL`] of its connections hang
//!   (they stay taken), so it completes [`DEGRADED_POOL`] calls per
//!   service time, a twentieth of its healthy capacity. Its service time
//!   stays the same: a dependency whose every call got twice as slow would
//!   double every admitted call's latency, which no admission control can
//!   undo; losing capacity is what a limit can answer, by admitting fewer.
//!
//! Two runs go through the unloaded phase and then the overload:
//!
//! - **Fixed**: a concurrency-grade flow rule of [`POOL`] calls in flight,
//!   the limit an operator sets from the unloaded case: as many calls as
//!   the healthy dependency takes at once, many times the unloaded peak in
//!   flight, so it never refuses a request there. Degraded, the dependency
//!   takes [`DEGRADED_POOL`]: the limit admits [`POOL`], and the calls
//!   past the working connections queue behind them.
//! - **Adaptive**: a Gradient2 rule. Gradient2 compares each window's
//!   average RTT with a long-term average learned while the service was
//!   healthy, and shrinks the limit as soon as calls queue, by at most half
//!   a window; it settles at the dependency's concurrency plus its
//!   `queue_size`. Its parameters, and why: a 100 ms window (the shortest,
//!   a service time: about ten samples at these rates, and a quick answer
//!   to the degradation); `rtt_tolerance: 1.0`, so any queueing counts (the
//!   default 1.5 lets the latency reach 1.5 times the long-term RTT before
//!   the limit moves, and with the queue allowance that settles near 2x);
//!   `queue_size: 2`, a small queue on top of the [`DEGRADED_POOL`]
//!   connections (a quarter of a service time's wait on average);
//!   `smoothing: 0.5`, half of each new estimate a window, quick and
//!   without overshoot; `min_limit: 2`, since Gradient2's default minimum
//!   (20) is above the degraded dependency's concurrency.
//!
//! The p99 under overload counts the requests admitted (200) that were
//! sent once the overload had run [`SETTLE`], in both runs alike: the
//! adaptive limit's way down from its unloaded value takes up to a second,
//! the fixed limit's queue under a second to fill. Refused requests
//! (429) are counted apart. Every phase has a fixed length and rate, so
//! the test sends a fixed number of requests and ends within
//! [`DEADLINE`].
//!
//! The figures are printed (`--nocapture`); BENCHMARKS.md has them.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use bytes::Bytes;
use common::serve;
use hdrhistogram::Histogram;
use http::Request;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use sentinel_flow_core::adaptive::{AdaptiveAlgorithm, AdaptiveRule};
use sentinel_flow_core::flow::{FlowGrade, FlowRule};
use sentinel_flow_core::{Sentinel, SystemClock};
use sentinel_flow_tower::SentinelLayer;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// How long one dependency call holds its connection: from
/// `SERVICE_MS - SERVICE_SPREAD_MS` to `SERVICE_MS + SERVICE_SPREAD_MS`,
/// spread evenly by a fixed sequence.
const SERVICE_MS: u64 = 100;
/// How far a call's service time is from [`SERVICE_MS`], at most.
const SERVICE_SPREAD_MS: u64 = 20;
/// The healthy dependency's connections.
const POOL: u32 = 160;
/// The connections that still work once the dependency degrades.
const DEGRADED_POOL: u32 = 8;
/// The arrivals' period: one request a tick unloaded, three overloaded.
const TICK: Duration = Duration::from_millis(10);
/// Requests a second, unloaded.
const UNLOADED_RATE: u128 = 1_000 / TICK.as_millis();
/// How much the overload multiplies the arrivals.
const OVERLOAD: usize = 3;
/// The unloaded phase.
const UNLOADED_PHASE: Duration = Duration::from_millis(2_000);
/// The overloaded phase.
const OVERLOAD_PHASE: Duration = Duration::from_millis(4_000);
/// The start of the overload left out of its p99.
const SETTLE: Duration = Duration::from_millis(1_500);
/// The longest the whole test may take.
const DEADLINE: Duration = Duration::from_secs(30);
/// The route's resource name.
const RESOURCE: &str = "GET:/orders";

/// The dependency: a pool of connections, some of which may hang.
struct Dependency {
    pool: Arc<Semaphore>,
    /// Calls inside (waiting or served) and the most seen at once.
    inside: AtomicUsize,
    peak: AtomicUsize,
    /// Calls so far, which pick each call's service time.
    calls: AtomicU64,
}

impl Dependency {
    fn new() -> Arc<Self> {
        Arc::new(Dependency {
            pool: Arc::new(Semaphore::new(POOL as usize)),
            inside: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            calls: AtomicU64::new(0),
        })
    }

    async fn call(&self) {
        let inside = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(inside, Ordering::SeqCst);
        // Service times spread evenly, so that the connections do not
        // free in step (as fixed times would keep them from the start).
        let n = self.calls.fetch_add(1, Ordering::Relaxed);
        let spread = (n.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) % (2 * SERVICE_SPREAD_MS + 1);
        let service = Duration::from_millis(SERVICE_MS - SERVICE_SPREAD_MS + spread);
        let connection = self.pool.acquire().await.unwrap();
        tokio::time::sleep(service).await;
        drop(connection);
        self.inside.fetch_sub(1, Ordering::SeqCst);
    }

    /// All connections but `DEGRADED_POOL` hang from now on (once the
    /// calls holding them finish, they are taken for good).
    fn degrade(&self) {
        let pool = Arc::clone(&self.pool);
        tokio::spawn(async move {
            pool.acquire_many_owned(POOL - DEGRADED_POOL)
                .await
                .unwrap()
                .forget();
        });
    }

    /// Forgets the peak seen so far; the peak before.
    fn take_peak(&self) -> usize {
        self.peak.swap(0, Ordering::SeqCst)
    }
}

/// What one phase measured.
#[derive(Debug)]
struct Phase {
    /// Latencies of the admitted requests sent after the settling time, µs.
    admitted: Histogram<u64>,
    refused: u64,
    sent: u64,
}

impl Phase {
    fn p99_ms(&self) -> f64 {
        self.admitted.value_at_quantile(0.99) as f64 / 1_000.0
    }
}

type HttpClient = Client<HttpConnector, Empty<Bytes>>;

/// Sends `per_tick` requests every [`TICK`] for `length`, whatever the
/// replies, and waits for them all; records those sent after `settle`.
async fn offer(
    client: &HttpClient,
    url: &str,
    per_tick: usize,
    length: Duration,
    settle: Duration,
) -> Phase {
    let mut requests = JoinSet::new();
    let mut ticks = tokio::time::interval(TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let start = Instant::now();
    let ticks_total = length.as_millis() / TICK.as_millis();
    for _ in 0..ticks_total {
        ticks.tick().await;
        let counted = start.elapsed() >= settle;
        for _ in 0..per_tick {
            let (client, url) = (client.clone(), url.to_owned());
            requests.spawn(async move {
                let sent = Instant::now();
                let request = Request::get(url).body(Empty::new()).unwrap();
                let response = client.request(request).await.expect("a reply");
                let status = response.status();
                response.into_body().collect().await.expect("a body");
                (counted, status, sent.elapsed())
            });
        }
    }
    let mut phase = Phase {
        admitted: Histogram::new_with_bounds(1, 60_000_000, 3).unwrap(),
        refused: 0,
        sent: 0,
    };
    while let Some(outcome) = requests.join_next().await {
        let (counted, status, latency) = outcome.unwrap();
        phase.sent += 1;
        match status {
            StatusCode::OK if counted => phase
                .admitted
                .record(latency.as_micros().max(1) as u64)
                .unwrap(),
            StatusCode::OK => {}
            StatusCode::TOO_MANY_REQUESTS => phase.refused += 1,
            other => panic!("unexpected status {other}"),
        }
    }
    phase
}

/// One run: the unloaded phase, then the overload unless told otherwise.
#[derive(Debug)]
struct Run {
    unloaded: Phase,
    unloaded_peak_inside: usize,
    overloaded: Option<Phase>,
    /// The adaptive limit at the end, if any.
    limit: Option<u32>,
}

impl Run {
    fn overloaded(&self) -> &Phase {
        self.overloaded.as_ref().expect("an overload phase")
    }
}

/// A fresh instance under `rules`, a fresh dependency, a fresh server.
async fn run_scenario(rules: impl FnOnce(&Sentinel), overload: bool) -> Run {
    let sentinel: &'static Sentinel =
        Box::leak(Box::new(Sentinel::builder().clock(SystemClock).build()));
    rules(sentinel);
    let dependency = Dependency::new();
    let handler = {
        let dependency = Arc::clone(&dependency);
        get(move || {
            let dependency = Arc::clone(&dependency);
            async move {
                dependency.call().await;
                "ok"
            }
        })
    };
    let app = Router::new()
        .route("/orders", handler)
        .layer(SentinelLayer::with_sentinel(sentinel));
    let addr = serve(app).await;
    let url = format!("http://{addr}/orders");
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    // The unloaded phase counts but its first ticks (connections being
    // opened).
    let unloaded = offer(&client, &url, 1, UNLOADED_PHASE, TICK * 20).await;
    let unloaded_peak_inside = dependency.take_peak();
    let overloaded = if overload {
        dependency.degrade();
        let trace = tokio::spawn(trace_limit(sentinel));
        let phase = offer(&client, &url, OVERLOAD, OVERLOAD_PHASE, SETTLE).await;
        trace.abort();
        Some(phase)
    } else {
        None
    };
    let limit = sentinel
        .adaptive_rules()
        .limits()
        .first()
        .map(|(_, state)| state.limit);
    Run {
        unloaded,
        unloaded_peak_inside,
        overloaded,
        limit,
    }
}

/// Prints the adaptive limit, the calls in flight and the last window's RTT
/// every 250 ms, if the instance has an adaptive rule.
async fn trace_limit(sentinel: &'static Sentinel) {
    let start = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if let Some((_, state)) = sentinel.adaptive_rules().limits().first() {
            println!(
                "  {:>5} ms: limit {}, in flight {}, last window's RTT {:.0} ms (long-term {:.0} ms)",
                start.elapsed().as_millis(),
                state.limit,
                state.in_flight,
                state.last_rtt_ms,
                state.reference_rtt_ms
            );
        }
    }
}

/// The adaptive rule (the module's docs say why these parameters).
fn gradient2_rule() -> AdaptiveRule {
    AdaptiveRule {
        min_limit: 2,
        window_ms: 100,
        ..AdaptiveRule::new(
            RESOURCE,
            AdaptiveAlgorithm::Gradient2 {
                smoothing: 0.5,
                rtt_tolerance: 1.0,
                long_window: 600,
                queue_size: 2,
            },
        )
    }
}

/// The fixed limit: the healthy dependency's connections.
fn fixed_rule() -> FlowRule {
    FlowRule {
        grade: FlowGrade::Concurrency,
        ..FlowRule::new(RESOURCE, f64::from(POOL))
    }
}

fn print(name: &str, run: &Run) {
    print!(
        "{name}: unloaded p99 {:.1} ms ({} admitted, {} refused, at most {} inside the dependency)",
        run.unloaded.p99_ms(),
        run.unloaded.admitted.len(),
        run.unloaded.refused,
        run.unloaded_peak_inside,
    );
    if let Some(overloaded) = &run.overloaded {
        print!(
            "; overloaded p99 {:.1} ms, max {:.1} ms ({} admitted after settling, {} refused of {} sent)",
            overloaded.p99_ms(),
            overloaded.admitted.max() as f64 / 1_000.0,
            overloaded.admitted.len(),
            overloaded.refused,
            overloaded.sent,
        );
    }
    match run.limit {
        Some(limit) => println!("; adaptive limit at the end {limit}"),
        None => println!(),
    }
}

#[test]
fn under_3x_overload_with_a_degraded_dependency_the_adaptive_limit_keeps_p99_within_2x_where_a_fixed_limit_lets_it_pass_10x()
 {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            tokio::time::timeout(DEADLINE, async {
                // The baseline: the service unloaded, without any rule.
                let baseline = run_scenario(|_| {}, false).await;
                print("no rule", &baseline);
                let adaptive = run_scenario(
                    |sentinel| {
                        let rules = sentinel.adaptive_rules();
                        rules.load(vec![gradient2_rule()]).unwrap();
                    },
                    true,
                )
                .await;
                print("adaptive (gradient2)", &adaptive);
                let fixed = run_scenario(
                    |sentinel| sentinel.flow_rules().load(vec![fixed_rule()]).unwrap(),
                    true,
                )
                .await;
                print("fixed (concurrency)", &fixed);

                let unloaded_p99 = baseline.unloaded.p99_ms();
                // The baseline is the dependency's own latency: the
                // unloaded load queues nowhere.
                let slowest_service = (SERVICE_MS + SERVICE_SPREAD_MS) as f64;
                assert!(
                    unloaded_p99 < slowest_service * 1.5,
                    "unloaded p99 {unloaded_p99} ms"
                );
                assert_eq!(baseline.unloaded.refused, 0);
                // The fixed limit is set for the unloaded case: it never
                // refused a request there.
                assert_eq!(fixed.unloaded.refused, 0);
                assert!(fixed.unloaded_peak_inside < POOL as usize);
                // Both runs admitted and refused under the overload.
                for run in [&adaptive, &fixed] {
                    assert!(run.overloaded().admitted.len() > 100);
                    assert!(run.overloaded().refused > 100);
                }
                let adaptive_p99 = adaptive.overloaded().p99_ms();
                let fixed_p99 = fixed.overloaded().p99_ms();
                println!(
                    "{UNLOADED_RATE}/s unloaded, {}/s overloaded: unloaded p99 {unloaded_p99:.1} ms; \
                     adaptive p99 {adaptive_p99:.1} ms ({:.2}x); fixed p99 {fixed_p99:.1} ms ({:.2}x)",
                    UNLOADED_RATE * OVERLOAD as u128,
                    adaptive_p99 / unloaded_p99,
                    fixed_p99 / unloaded_p99,
                );
                assert!(
                    adaptive_p99 <= 2.0 * unloaded_p99,
                    "adaptive p99 {adaptive_p99} ms > 2 x {unloaded_p99} ms"
                );
                assert!(
                    fixed_p99 >= 10.0 * unloaded_p99,
                    "fixed p99 {fixed_p99} ms < 10 x {unloaded_p99} ms"
                );
            })
            .await
            .expect("the test finished within its deadline")
        });
}
