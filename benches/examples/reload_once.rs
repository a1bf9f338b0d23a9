//! One 10 000-rule reload (parse + apply) of a file whose every count
//! changed, in a function of its own, for a profiler: an instance holding
//! the rules with other counts reloads them `ROUNDS` times (first
//! argument, default 1) in `reload`, and prints the CPU time of each (as
//! `sentinel-rules/tests/load_time.rs` reads it).
//!
//! `valgrind --tool=callgrind --toggle-collect='*reload_once*reload*'
//! target/release/examples/reload_once` counts the instructions of the
//! reloads alone.

use std::hint::black_box;

use sentinel_flow_core::{ManualClock, Sentinel};
use sentinel_flow_rules::{apply, parse_str};

fn ten_thousand(offset: usize) -> String {
    let mut text = String::from("flow:\n");
    for i in 0..10_000 {
        text.push_str(&format!(
            "  - {{resource: GET:/api/v1/orders/{i}, count: {}, grade: qps}}\n",
            100 + i + offset
        ));
    }
    text
}

/// The CPU time this thread has used (Linux), as the load_time test reads it.
fn cpu_time() -> Option<std::time::Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos = stat.split_whitespace().next()?.parse().ok()?;
    Some(std::time::Duration::from_nanos(nanos))
}

#[inline(never)]
fn reload(sentinel: &Sentinel, text: &str) {
    let file = parse_str(text, "rules.yaml").expect("a valid file");
    black_box(apply(sentinel, file).expect("a parsed file applies"));
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(1, |n| n.parse().expect("a number of rounds"));
    let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
    let files = [ten_thousand(0), ten_thousand(1)];
    apply(&sentinel, parse_str(&files[0], "rules.yaml").unwrap()).unwrap();
    for round in 1..=rounds {
        let start = cpu_time();
        reload(&sentinel, &files[round % 2]);
        if let (Some(start), Some(end)) = (start, cpu_time()) {
            eprintln!("reload {round}: {:?} of CPU time", end - start);
        }
    }
}
