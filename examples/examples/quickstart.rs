//! Live statistics of one node under load.
//!
//! Four worker threads hammer a `StatisticNode` the way entries will: each
//! call raises concurrency, records a pass, "works" for a varying time, then
//! records its response time and success (and, one call in fifty, an error).
//! The main thread prints what the node reports once per second.
//!
//! Run: `cargo run --release -p examples --example quickstart [-- SECONDS]`
//! (default 5 seconds).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sentinel_core::node::StatisticNode;
use sentinel_core::stat::StatConfig;
use sentinel_core::{Clock, SystemClock};

const WORKERS: u64 = 4;

fn main() {
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(5);
    let clock = SystemClock;
    let node = Arc::new(StatisticNode::new(&StatConfig::default()));
    let stop = Arc::new(AtomicBool::new(false));

    let workers: Vec<_> = (0..WORKERS)
        .map(|worker| {
            let (node, stop) = (Arc::clone(&node), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut calls = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let start = clock.now_ms();
                    node.increase_concurrency();
                    node.add_pass(start, 1);
                    // Simulated work: 0-3 ms, a little different per worker.
                    std::thread::sleep(Duration::from_micros((calls * 7 + worker * 311) % 3_000));
                    let end = clock.now_ms();
                    if calls % 50 == 0 {
                        node.add_exception(end, 1);
                    }
                    node.add_rt_and_success(end, end - start, 1);
                    node.decrease_concurrency();
                    calls += 1;
                }
            })
        })
        .collect();

    println!(
        "{:>4} {:>9} {:>9} {:>9} {:>8} {:>7} {:>6} {:>11}",
        "sec", "pass/s", "success/s", "errors/s", "avg_rt", "min_rt", "conc", "total_pass"
    );
    for second in 1..=seconds {
        std::thread::sleep(Duration::from_secs(1));
        let s = node.snapshot(clock.now_ms());
        println!(
            "{second:>4} {:>9.0} {:>9.0} {:>9.0} {:>6.2}ms {:>5}ms {:>6} {:>11}",
            s.pass_qps,
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
    let now = clock.now_ms();
    println!(
        "done: {} passed, {} completed, {} errors in the last minute; concurrency now {}",
        node.total_pass(now),
        node.total_success(now),
        node.total_exception(now),
        node.cur_concurrency()
    );
}
