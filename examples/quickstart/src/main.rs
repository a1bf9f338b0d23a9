//! `cargo run --release -p quickstart [-- SECONDS]` (default 5 seconds)
//!
//! Live statistics of one resource under load, with the core alone
//! (`sentinel-flow` without features).
//!
//! Four worker threads call a guarded function: each call enters the
//! resource `GET:/orders` (a `Resource` handle in a `static`), "works" for a
//! varying time and exits; one call in fifty records an error. A flow rule
//! caps the resource at 1 000 QPS; a refused call backs off for a
//! millisecond. The workers start on a whole second of the clock, and the
//! main thread prints one row per whole second after it: what the
//! resource's node counted in that second (exact: the minute window's
//! bucket of that second, as Sentinel's metric log writes it), the calls
//! inside at the moment of printing, and `pass_sum`, the passes of the rows
//! so far. The last line gives the node's own totals over the last minute,
//! which also hold the calls made in the part of a second after the last
//! row.
//!
//! It does not print `pass_qps()`: that is Sentinel's sliding window, the
//! last two 500 ms buckets with the current one still filling, so read at
//! an instant early in a bucket it shows the bucket before plus a part of
//! this one (correct for the window, but not the passes of a second).
//!
//! A tracing subscriber prints the library's warnings (none are expected
//! here) on stderr.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use sentinel_flow::flow::{self, FlowRule};
use sentinel_flow::{BlockError, Resource};

const WORKERS: u64 = 4;

static ORDERS: LazyLock<Resource<'static>> = LazyLock::new(|| Resource::new("GET:/orders"));

/// The guarded call: 0-3 ms of simulated work, an error one time in fifty.
fn list_orders(worker: u64, call: u64) -> Result<(), BlockError> {
    let entry = ORDERS.entry()?;
    std::thread::sleep(Duration::from_micros((call * 7 + worker * 311) % 3_000));
    if call % 50 == 0 {
        entry.set_error("simulated failure");
    }
    Ok(())
}

fn main() {
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .with_writer(std::io::stderr)
        .init();
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(5);
    let sentinel = sentinel_flow::global();
    flow::load_rules(vec![FlowRule::new("GET:/orders", 1_000.0)]).expect("a valid rule");
    let node = ORDERS
        .node()
        .expect("one resource is under the cap")
        .stats();
    let stop = Arc::new(AtomicBool::new(false));

    // Start on a whole second, so that every row is a whole second of
    // calls and nothing is counted before the first.
    let first = sentinel.now_ms() / 1_000 + 1;
    std::thread::sleep(Duration::from_millis(
        (first * 1_000).saturating_sub(sentinel.now_ms()),
    ));
    let workers: Vec<_> = (0..WORKERS)
        .map(|worker| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut calls = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if list_orders(worker, calls).is_err() {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    calls += 1;
                }
            })
        })
        .collect();

    println!(
        "{WORKERS} threads call GET:/orders, limited to 1000 QPS; one row per whole second:\n\
         pass/block/success/errors/avg_rt/min_rt: that second's counts; \
         conc: calls inside now; pass_sum: passes of the rows so far\n"
    );
    println!(
        "{:>4} {:>7} {:>7} {:>8} {:>7} {:>8} {:>7} {:>5} {:>9}",
        "sec", "pass", "block", "success", "errors", "avg_rt", "min_rt", "conc", "pass_sum"
    );
    // Each row is read 100 ms into a second, for the second before (the
    // bucket of the minute window that has just been completed).
    let mut pass_sum = 0;
    for (row, second) in (first..first + seconds).enumerate() {
        let read_at = (second + 1) * 1_000 + 100;
        let wait = read_at.saturating_sub(sentinel.now_ms());
        std::thread::sleep(Duration::from_millis(wait));
        let now = sentinel.now_ms();
        let done = node
            .metrics_since(second * 1_000, now)
            .into_iter()
            .find(|m| m.timestamp_ms == second * 1_000)
            .unwrap_or_default();
        pass_sum += done.pass;
        println!(
            "{:>4} {:>7} {:>7} {:>8} {:>7} {:>6.2}ms {:>5} {:>5} {:>9}",
            row + 1,
            done.pass,
            done.block,
            done.success,
            done.exception,
            done.rt_sum as f64 / done.success.max(1) as f64,
            done.min_rt.map_or("-".to_owned(), |rt| format!("{rt}ms")),
            node.cur_concurrency(),
            pass_sum
        );
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().expect("worker panicked");
    }
    let now = sentinel.now_ms();
    let total_pass = node.total_pass(now);
    println!(
        "\nthe node's totals over the last minute: {total_pass} passed ({pass_sum} in the rows, \
         {} in the {} ms after the last one), {} blocked, {} completed, {} errors; \
         concurrency now {}",
        total_pass.saturating_sub(pass_sum),
        now.saturating_sub((first + seconds) * 1_000),
        node.total_block(now),
        node.total_success(now),
        node.total_exception(now),
        node.cur_concurrency()
    );
}
