//! `cargo run --release -p stress [-- SECONDS [THREADS [SEED]]]`
//! (default 10 seconds, 4 threads, seed 1)
//!
//! Differential stress test, for as long as asked: worker threads make
//! random entries on an isolated instance driven by a `ManualClock`, log
//! every call, and a reference model computed from the logs alone is
//! compared with every reading the library gives (node snapshots, lifetime
//! totals, the metric log, block counts, Prometheus counters) and with the
//! rules' promises. The workload and the model are those of
//! `sentinel-core/tests/differential/` (see its `model/`).
//!
//! Each seed runs in phase mode (the clock moves only while every worker is
//! parked: every reading must equal the model), then in racing mode (the
//! clock moves while workers run: totals exact, windows within the bounds
//! the logged intervals allow); then the next seed, until the time is up.
//! Racing runs depend on the scheduler: a seed fixes the workload, not the
//! interleaving.
//!
//! Prints, per rule kind, the events and readings compared, the reject
//! rule's wrongful refusals, the most entries held against the concurrency
//! rules' counts, and every mismatch with its seed; exits with status 1 on
//! a mismatch.
//!
//! A tracing subscriber prints the library's warnings on stderr (WARN and
//! above: every seed loads rules into fresh instances, and their INFO
//! lines would bury the report).

#[path = "../../../sentinel-core/tests/differential/model/mod.rs"]
mod model;

use std::time::{Duration, Instant};

use model::{Config, Mode, Report};

fn main() {
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::WARN)
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args().skip(1);
    let mut number = |default: u64| {
        args.next()
            .map(|a| a.parse().expect("arguments: SECONDS THREADS [SEED]"))
            .unwrap_or(default)
    };
    let seconds = number(10);
    let threads = number(4).clamp(1, 64) as usize;
    let first_seed = number(1);

    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut totals = [Report::default(), Report::default()];
    let mut seed = first_seed;
    println!("stress: {seconds} s, {threads} threads, seeds from {first_seed}");
    while Instant::now() < deadline {
        for (i, mode) in [Mode::Phase, Mode::Racing].into_iter().enumerate() {
            let config = Config {
                seed,
                threads,
                mode,
                steps: match mode {
                    Mode::Phase => 400,
                    Mode::Racing => 40,
                },
                ops: 16,
                ticks: 1_000,
                checkpoint_every: 4,
                prometheus: Some(sentinel_flow_core::prometheus::render_prometheus),
            };
            let started = Instant::now();
            let report = model::run(&config);
            println!(
                "seed {seed:>4} {:<6} {:>8} calls ({:>5} straddling, {:>4} reject across an edge) {:>9} readings, reject wrongful {:>3}, held {}/{} and {}/{}, {:>5.2} s, {} mismatches",
                mode.label(),
                report.calls,
                report.straddling,
                report.reject.edge_calls,
                report.readings,
                report.reject.wrongful,
                report.max_concurrency,
                model::CONCURRENCY_COUNT,
                report.max_hot_concurrency,
                model::HOT_CONCURRENCY_COUNT,
                started.elapsed().as_secs_f64(),
                report.mismatch_count,
            );
            for m in &report.mismatches {
                println!("  MISMATCH {m}");
            }
            totals[i].merge(&report);
        }
        seed += 1;
    }
    let mut failed = false;
    for (total, mode) in totals.iter().zip([Mode::Phase, Mode::Racing]) {
        println!(
            "\n{} mode, {threads} threads: {}",
            mode.label(),
            total.summary()
        );
        failed |= total.mismatch_count > 0;
    }
    if failed {
        println!("FAILED: mismatches above (rerun one with its SEED as the third argument)");
        std::process::exit(1);
    }
    println!("ok: no mismatch");
}
