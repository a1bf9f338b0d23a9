//! `cargo run --release -p memory [-- RESOURCES]` (default 10 000; Linux:
//! reads /proc/self/statm)
//!
//! What resources cost in memory: enters 10 000 resources from one thread
//! for 61 seconds of (manual) time, so every bucket of every window has been
//! used, and prints the growth of the process's resident memory per resource.
//!
//! A tracing subscriber prints the library's log on stderr.

use sentinel_flow::{ManualClock, Sentinel};

/// The manual clock's start, unix ms.
const START_MS: u64 = 1_700_000_000_000;

/// Resident memory in bytes, from /proc/self/statm.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // Every Linux target Rust supports here uses 4 KiB pages for statm.
    Some(pages * 4096)
}

fn main() {
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .with_writer(std::io::stderr)
        .init();
    let resources: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let names: Vec<String> = (0..resources).map(|i| format!("GET:/memory/{i}")).collect();
    let clock = ManualClock::new(START_MS);
    let sentinel = Sentinel::builder()
        .clock(clock.clone())
        .max_resources(resources)
        .build();

    let Some(before) = resident_bytes() else {
        eprintln!("this example reads /proc/self/statm (Linux only)");
        return;
    };
    // Every 250 ms for 61 s: each resource gets traffic in every bucket of
    // both windows.
    for _ in 0..(61_000 / 250) {
        for name in &names {
            let entry = sentinel.entry(name).expect("no rules, nothing blocks");
            drop(entry);
        }
        clock.advance_ms(250);
    }
    let after = resident_bytes().unwrap_or(before);
    let now = sentinel.now_ms();
    let total: u64 = sentinel
        .resource_nodes()
        .map(|node| node.stats().lifetime().pass)
        .sum();
    println!(
        "{resources} resources, {total} passes in {} s of manual time: resident memory +{} KiB, {:.0} bytes per resource",
        now.saturating_sub(START_MS) / 1_000,
        (after - before) / 1024,
        (after - before) as f64 / resources as f64
    );
}
