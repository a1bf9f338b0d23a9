//! Entries in a loop on a `ManualClock`, for counting instructions per
//! entry and exit with `valgrind --tool=callgrind` (noise-free, unlike
//! timings on a shared machine). Cases: `name` (`entry("res")`, no rule),
//! `handle` (a `Resource` handle, no rule), `pass` (a reject QPS rule that
//! never blocks), `block` (one that always blocks). Run it with 0 and with
//! N entries and divide the difference by N, so that setup cancels out:
//!
//! ```sh
//! cargo build --release -p examples --example entry_loop
//! valgrind --tool=callgrind target/release/examples/entry_loop handle 0
//! valgrind --tool=callgrind target/release/examples/entry_loop handle 100000
//! ```

use sentinel_core::flow::FlowRule;
use sentinel_core::{ManualClock, Sentinel};

fn main() {
    let mut args = std::env::args().skip(1);
    let case = args.next().unwrap_or_default();
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let clock = ManualClock::new(1_700_000_000_000);
    let sentinel = Sentinel::builder().clock(clock.clone()).build();
    let count = match case.as_str() {
        "pass" => Some(1e12),
        "block" => Some(0.0),
        _ => None,
    };
    if let Some(count) = count {
        sentinel
            .flow_rules()
            .load(vec![FlowRule::new("res", count)])
            .unwrap();
    }
    let handle = sentinel.resource("res");
    let mut passed = 0u64;
    for i in 0..n {
        let entry = match case.as_str() {
            "name" => sentinel.entry("res"),
            _ => handle.entry(),
        };
        passed += u64::from(entry.is_ok());
        drop(entry);
        if i % 64 == 63 {
            clock.advance_ms(1);
        }
    }
    std::hint::black_box(passed);
}
