//! Differential stress test: 1 to 8 threads make random entries (held
//! across clock steps, batches, errors, origins, contexts, inbound and
//! outbound, arguments) on resources guarded by every rule kind, each
//! thread logging every call with the clock read around it; a reference
//! model computed from the logs alone is compared with every reading the
//! library gives (node snapshots, `resources()`, lifetime totals, the
//! metric log, the block log, block counts, Prometheus counters) and with
//! the rules' promises (a reject QPS rule's count per bucket-aligned
//! second, a concurrency rule's count, authority lists). See
//! `model/mod.rs`.
//!
//! Phase mode: the clock moves only while every worker is parked, so every
//! reading must equal the model. Racing mode: the clock moves while workers
//! run; totals stay exact and window readings must lie within what the
//! logged intervals allow. Fixed seeds; time comes from the `ManualClock`
//! only. `cargo run --release -p stress -- SECONDS THREADS` runs the same
//! for longer.

mod model;

use model::{CONCURRENCY_COUNT, Config, HOT_CONCURRENCY_COUNT, Mode, Report};

fn config(seed: u64, threads: usize, mode: Mode) -> Config {
    Config {
        seed,
        threads,
        mode,
        steps: match mode {
            Mode::Phase => 150,
            Mode::Racing => 12,
        },
        ops: 12,
        ticks: 600,
        checkpoint_every: 3,
        #[cfg(feature = "prometheus")]
        prometheus: Some(sentinel_flow_core::prometheus::render_prometheus),
        #[cfg(not(feature = "prometheus"))]
        prometheus: None,
    }
}

/// Runs `config`, prints what was compared, and fails on any mismatch.
fn check(config: &Config) -> Report {
    let report = model::run(config);
    eprintln!(
        "seed {} {} mode, {} threads:\n{}",
        config.seed,
        config.mode.label(),
        config.threads,
        report.summary()
    );
    assert_eq!(
        report.mismatch_count,
        0,
        "seed {}: mismatches:\n{}",
        config.seed,
        report.summary()
    );
    assert!(report.calls > 0 && report.readings > 0);
    assert_eq!(
        report.max_concurrency, CONCURRENCY_COUNT,
        "the concurrency rule's count was never reached: the check could not fail"
    );
    assert_eq!(
        report.max_hot_concurrency, HOT_CONCURRENCY_COUNT,
        "the hot parameter's concurrency count was never reached"
    );
    report
}

#[test]
fn phase_one_thread_matches_exactly_and_refuses_nothing_wrongly() {
    let report = check(&config(0x5EED_0001, 1, Mode::Phase));
    assert_eq!(
        report.reject.wrongful, 0,
        "one thread: the reject rule refused entries Sentinel's rule admits"
    );
    assert!(report.reject.refusals > 0, "the reject rule never refused");
}

#[test]
fn phase_two_threads() {
    check(&config(0x5EED_0002, 2, Mode::Phase));
}

#[test]
fn phase_four_threads() {
    check(&config(0x5EED_0004, 4, Mode::Phase));
}

#[test]
fn phase_eight_threads() {
    check(&config(0x5EED_0008, 8, Mode::Phase));
}

#[test]
fn racing_two_threads() {
    check(&config(0x8ACE_0002, 2, Mode::Racing));
}

#[test]
fn racing_four_threads() {
    check(&config(0x8ACE_0004, 4, Mode::Racing));
}

#[test]
fn racing_eight_threads() {
    check(&config(0x8ACE_0008, 8, Mode::Racing));
}
