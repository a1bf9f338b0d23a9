//! Live statistics of one resource under load.
//!
//! Four worker threads call a guarded function: each call enters the
//! resource `GET:/orders` (a `Resource` handle in a `static`), "works" for a
//! varying time and exits; one call in fifty records an error. A flow rule
//! caps the resource at 1 000 QPS; a refused call backs off for a
//! millisecond. The main thread prints what the resource's node reports
//! once per second: the counts of the second that has just ended (exact:
//! the minute window's bucket of that second, as Sentinel's metric log
//! writes it), the calls inside now, and the passes of the last minute.
//!
//! It does not print `pass_qps()`: that is Sentinel's sliding window, the
//! last two 500 ms buckets with the current one still filling, so read at
//! an instant early in a bucket it shows the bucket before plus a part of
//! this one (correct for the window, but not the passes of a second).
//!
//! Run: `cargo run --release -p examples --example quickstart [-- SECONDS]`
//! (default 5 seconds).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use once_cell::sync::Lazy;
use sentinel_flow_core::flow::{self, FlowRule};
use sentinel_flow_core::{BlockError, Resource};

const WORKERS: u64 = 4;

static ORDERS: Lazy<Resource<'static>> = Lazy::new(|| Resource::new("GET:/orders"));

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
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(5);
    let sentinel = sentinel_flow_core::global();
    flow::load_rules(vec![FlowRule::new("GET:/orders", 1_000.0)]).expect("a valid rule");
    let node = ORDERS
        .node()
        .expect("one resource is under the cap")
        .stats();
    let stop = Arc::new(AtomicBool::new(false));

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
        "{:>4} {:>7} {:>7} {:>8} {:>7} {:>8} {:>7} {:>5} {:>11}",
        "sec", "pass", "block", "success", "errors", "avg_rt", "min_rt", "conc", "total_pass"
    );
    // Each row is read 100 ms into a second, for the second before (the
    // bucket of the minute window that has just been completed).
    let first = sentinel.now_ms() / 1_000 + 1;
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
        println!(
            "{:>4} {:>7} {:>7} {:>8} {:>7} {:>6.2}ms {:>5} {:>5} {:>11}",
            row + 1,
            done.pass,
            done.block,
            done.success,
            done.exception,
            done.rt_sum as f64 / done.success.max(1) as f64,
            done.min_rt.map_or("-".to_owned(), |rt| format!("{rt}ms")),
            node.cur_concurrency(),
            node.total_pass(now)
        );
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        worker.join().expect("worker panicked");
    }
    let now = sentinel.now_ms();
    println!(
        "done: {} passed, {} blocked, {} completed, {} errors in the last minute; concurrency now {}",
        node.total_pass(now),
        node.total_block(now),
        node.total_success(now),
        node.total_exception(now),
        node.cur_concurrency()
    );
}
