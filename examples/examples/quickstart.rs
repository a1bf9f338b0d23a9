//! Live statistics of one resource under load.
//!
//! Four worker threads call a guarded function: each call enters the
//! resource `GET:/orders` (a `Resource` handle in a `static`), "works" for a
//! varying time and exits; one call in fifty records an error. A flow rule
//! caps the resource at 1 000 QPS; a refused call backs off for a
//! millisecond. The main thread prints what the resource's node reports
//! once per second.
//!
//! Run: `cargo run --release -p examples --example quickstart [-- SECONDS]`
//! (default 5 seconds).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use once_cell::sync::Lazy;
use sentinel_core::flow::{self, FlowRule};
use sentinel_core::{BlockError, Resource};

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
    let sentinel = sentinel_core::global();
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
        "{:>4} {:>9} {:>9} {:>9} {:>9} {:>8} {:>7} {:>6} {:>11}",
        "sec",
        "pass/s",
        "block/s",
        "success/s",
        "errors/s",
        "avg_rt",
        "min_rt",
        "conc",
        "total_pass"
    );
    for second in 1..=seconds {
        std::thread::sleep(Duration::from_secs(1));
        let s = node.snapshot(sentinel.now_ms());
        println!(
            "{second:>4} {:>9.0} {:>9.0} {:>9.0} {:>9.0} {:>6.2}ms {:>5}ms {:>6} {:>11}",
            s.pass_qps,
            s.block_qps,
            s.success_qps,
            s.exception_qps,
            s.avg_rt,
            s.min_rt,
            s.concurrency,
            s.total_pass
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
