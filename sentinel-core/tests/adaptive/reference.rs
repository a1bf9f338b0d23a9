//! The convergence scenarios (`convergence.rs`: capacity 100, 50 ms calls,
//! three times the load the service completes; 30 s at capacity, 10 s at
//! half, 30 s recovered; from a limit of 20 and of 200) run against
//! tower-resilience's AIMD and Vegas layers, beside ours with the `fitted`
//! parameters, as a reference for the adaptive kind.
//!
//! tower-resilience's `AdaptiveService` measures a call's latency with
//! `std::time::Instant`, so neither a `ManualClock` nor tokio's paused
//! clock reaches it. The layer itself is run here, on the simulated clock,
//! with its futures polled by hand: the inner service's call ends when the
//! simulation says, and the layer's algorithm is wrapped in
//! [`Simulated`], which hands it the call's simulated response time in
//! place of the one the layer measured (the instant between two polls).
//! Admission (its semaphore, a permit reserved by `poll_ready`), limit
//! changes and the algorithms are the layer's own.
//!
//! `cargo test -p sentinel-flow-core --test adaptive reference -- --nocapture`
//! prints the comparison table (`BENCHMARKS.md`).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tower_layer::Layer;
use tower_resilience::adaptive::{
    AdaptiveFuture, AdaptiveLimiterLayer, Aimd, ConcurrencyAlgorithm, Vegas,
};
use tower_service::Service;

use crate::convergence::fitted;
use crate::convergence::{BACK_END, BASE_MS, CAPACITY, HALF_END, KNEE_END};
use crate::service::{Trace, between, offered_per_ms, per_second, response_time, settles_within};

/// A tower-resilience algorithm fed the simulated response time of the call
/// that completes (set by [`SimulatedCall`] just before it is ready) in
/// place of the latency the layer measured with the real clock.
struct Simulated<A> {
    inner: A,
    rt_ms: Arc<AtomicU64>,
}

impl<A: ConcurrencyAlgorithm> ConcurrencyAlgorithm for Simulated<A> {
    fn record_success(&self, _measured: Duration) {
        let rt = self.rt_ms.load(Ordering::Relaxed);
        self.inner.record_success(Duration::from_millis(rt));
    }

    fn record_failure(&self) {
        self.inner.record_failure();
    }

    fn record_dropped(&self) {
        self.inner.record_dropped();
    }

    fn limit(&self) -> usize {
        self.inner.limit()
    }

    fn min_limit(&self) -> usize {
        self.inner.min_limit()
    }

    fn max_limit(&self) -> usize {
        self.inner.max_limit()
    }
}

/// One call in the simulated service: its response time, and whether the
/// simulation has ended it.
struct Call {
    rt_ms: u64,
    done: AtomicBool,
}

/// The simulated service behind the layer: a call's future is ready once
/// the simulation ends it.
struct SimulatedService {
    rt_ms: Arc<AtomicU64>,
}

struct SimulatedCall {
    call: Arc<Call>,
    rt_ms: Arc<AtomicU64>,
}

impl Future for SimulatedCall {
    type Output = Result<(), Infallible>;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        if self.call.done.load(Ordering::Relaxed) {
            self.rt_ms.store(self.call.rt_ms, Ordering::Relaxed);
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }
}

impl Service<Arc<Call>> for SimulatedService {
    type Response = ();
    type Error = Infallible;
    type Future = SimulatedCall;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, call: Arc<Call>) -> SimulatedCall {
        SimulatedCall {
            call,
            rt_ms: Arc::clone(&self.rt_ms),
        }
    }
}

/// What a run of the layer shows besides its limit.
struct Run {
    trace: Trace,
    /// Calls completed in each phase (at capacity, halved, recovered).
    completed: [u64; 3],
}

/// Runs the scenario's phases through tower-resilience's layer with
/// `algorithm`: each simulated ms the due calls end (their futures
/// polled to completion), then up to three times the service's throughput
/// is offered, each admitted while `poll_ready` is ready; the limit every
/// 100 ms.
fn run_layer<A: ConcurrencyAlgorithm + 'static>(algorithm: A) -> Run {
    let rt_ms = Arc::new(AtomicU64::new(0));
    let layer = AdaptiveLimiterLayer::new(Simulated {
        inner: algorithm,
        rt_ms: Arc::clone(&rt_ms),
    });
    let mut service = layer.layer(SimulatedService {
        rt_ms: Arc::clone(&rt_ms),
    });
    let mut cx = Context::from_waker(Waker::noop());
    let offered = offered_per_ms(CAPACITY, BASE_MS);
    let phases = [
        (KNEE_END, CAPACITY),
        (HALF_END - KNEE_END, CAPACITY / 2),
        (BACK_END - HALF_END, CAPACITY),
    ];
    let mut calls: Vec<(u64, Arc<Call>, AdaptiveFuture<(), Infallible>)> = Vec::new();
    let mut run = Run {
        trace: Trace::new(),
        completed: [0; 3],
    };
    let mut now = 0;
    for (phase, &(ms, capacity)) in phases.iter().enumerate() {
        for _ in 0..ms {
            now += 1;
            let mut ended = 0;
            calls.retain_mut(|(end, call, future)| {
                if *end > now {
                    return true;
                }
                call.done.store(true, Ordering::Relaxed);
                let polled = Pin::new(future).poll(&mut cx);
                assert!(
                    matches!(polled, Poll::Ready(Ok(()))),
                    "a call the service ended is not complete"
                );
                ended += 1;
                false
            });
            run.completed[phase] += ended;
            for _ in 0..offered {
                if !matches!(service.poll_ready(&mut cx), Poll::Ready(Ok(()))) {
                    break;
                }
                let rt = response_time(BASE_MS, capacity, calls.len() as u64 + 1);
                let call = Arc::new(Call {
                    rt_ms: rt,
                    done: AtomicBool::new(false),
                });
                let future = service.call(Arc::clone(&call));
                calls.push((now + rt, call, future));
            }
            if now % 100 == 0 {
                run.trace.push((now, service.limit() as u32));
            }
        }
    }
    run
}

fn aimd(initial: usize) -> Aimd {
    Aimd::builder()
        .initial_limit(initial)
        .min_limit(20)
        .max_limit(200)
        .increase_by(1)
        .decrease_factor(0.9)
        .latency_threshold(Duration::from_millis(52))
        .build()
        .expect("a valid AIMD")
}

fn vegas(initial: usize) -> Vegas {
    Vegas::builder()
        .initial_limit(initial)
        .min_limit(1)
        .max_limit(1_000)
        .alpha(2)
        .beta(4)
        .build()
        .expect("a valid Vegas")
}

/// When the trace settles within 10% of the knee in each phase, as a
/// table cell: "1.3 s", or "no (150..=200)" with the range of the limit
/// in the phase's last second. A limit that enters the band only in the
/// phase's last second has not settled: it counts as "no".
fn cells(trace: &Trace) -> [String; 3] {
    let phases = [
        (0, KNEE_END, CAPACITY),
        (KNEE_END, HALF_END, CAPACITY / 2),
        (HALF_END, BACK_END, CAPACITY),
    ];
    phases.map(|(from, to, knee)| {
        let part = between(trace, from, to);
        match settles_within(&part, knee).filter(|&ms| ms + 1_000 <= to - from) {
            Some(ms) => format!("{:.1} s", ms as f64 / 1_000.0),
            None => {
                // The last second of the phase.
                let tail: Vec<u32> = part.iter().rev().take(10).map(|&(_, l)| l).collect();
                let (lo, hi) = (tail.iter().min(), tail.iter().max());
                match (lo, hi) {
                    (Some(lo), Some(hi)) if lo == hi => format!("no ({lo})"),
                    (Some(lo), Some(hi)) => format!("no ({lo}..={hi})"),
                    _ => "no samples".to_owned(),
                }
            }
        }
    })
}

/// The layer's run covers every phase: a limit every 100 ms to the end, and
/// calls completed in each phase; and its limit moved from where it
/// started.
fn covers_every_phase_and_moves(run: &Run, initial: u32) {
    assert_eq!(
        run.trace.len() as u64,
        BACK_END / 100,
        "a limit every 100 ms"
    );
    assert_eq!(run.trace.last().map(|&(at, _)| at), Some(BACK_END));
    for (phase, &completed) in run.completed.iter().enumerate() {
        assert!(completed > 0, "no call completed in phase {phase}");
    }
    assert!(
        run.trace.iter().any(|&(_, limit)| limit != initial),
        "the layer's limit never left {initial}"
    );
}

#[test]
fn tower_resilience_aimd_from_below_covers_every_phase_and_moves() {
    let run = run_layer(aimd(20));
    eprintln!("limit every second: {:?}", per_second(&run.trace));
    covers_every_phase_and_moves(&run, 20);
}

#[test]
fn tower_resilience_aimd_from_above_covers_every_phase_and_moves() {
    let run = run_layer(aimd(200));
    eprintln!("limit every second: {:?}", per_second(&run.trace));
    covers_every_phase_and_moves(&run, 200);
}

#[test]
fn tower_resilience_vegas_from_below_covers_every_phase_and_moves() {
    let run = run_layer(vegas(20));
    eprintln!("limit every second: {:?}", per_second(&run.trace));
    covers_every_phase_and_moves(&run, 20);
}

#[test]
fn tower_resilience_vegas_from_above_covers_every_phase_and_moves() {
    let run = run_layer(vegas(200));
    eprintln!("limit every second: {:?}", per_second(&run.trace));
    covers_every_phase_and_moves(&run, 200);
}

/// The comparison table of `BENCHMARKS.md`: per scenario and phase, the
/// time to settle within 10% of the knee, ours (the `fitted` parameters)
/// beside tower-resilience's (the same limits, backoff, timeout and
/// thresholds). Ours must settle in every cell.
#[test]
fn convergence_against_tower_resilience_table() {
    let rows = [
        (
            "AIMD from 20",
            fitted::fitted(fitted::aimd(), 20),
            run_layer(aimd(20)),
        ),
        (
            "AIMD from 200",
            fitted::fitted(fitted::aimd(), 200),
            run_layer(aimd(200)),
        ),
        (
            "Vegas from 20",
            fitted::fitted(fitted::vegas(), 20),
            run_layer(vegas(20)),
        ),
        (
            "Vegas from 200",
            fitted::fitted(fitted::vegas(), 200),
            run_layer(vegas(200)),
        ),
    ];
    let mut table = String::from(
        "| scenario | at capacity, 30 s: ours | theirs | halved, 10 s: ours | theirs | recovered, 30 s: ours | theirs |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for (name, ours, theirs) in &rows {
        let (ours, theirs) = (cells(ours), cells(&theirs.trace));
        for cell in &ours {
            assert!(cell.ends_with(" s"), "{name}: ours did not settle ({cell})");
        }
        table += &format!(
            "| {name} | {} | {} | {} | {} | {} | {} |\n",
            ours[0], theirs[0], ours[1], theirs[1], ours[2], theirs[2]
        );
    }
    eprintln!("{table}");
}
