//! `cargo run --release -p hot-reload [-- [SECONDS] [PATH]]`
//! (default 30 seconds, `examples/hot-reload/rules.yaml`)
//!
//! Hot reload of a YAML rule file.
//!
//! Loads the rule file, watches it, and runs three threads calling
//! `GET:/orders`, which the file's first flow rule limits (20 QPS as
//! shipped). Once a second it prints how many calls passed and how many
//! were blocked in the whole second of the clock that has just ended (the
//! resource node's minute-window bucket of that second), and the limit in
//! force. Edit the file while it runs (change that rule's `count`, or
//! break the file on purpose): the change shows within a second, and a bad
//! edit is reported with its line and column while the rules in force stay.
//!
//! Why whole seconds of the clock: the rule's window is one second of two
//! 500 ms buckets, and it admits at most `count` in any two adjacent
//! buckets. A whole second of the clock is two such buckets, so it never
//! shows more than the limit; a second counted from an arbitrary instant
//! overlaps three buckets and may show up to twice the limit (a burst at the
//! end of one second, another at the start of the next), although the rule
//! holds.
//!
//! A tracing subscriber prints the library's log on stderr (each reload,
//! and each refused file, at INFO and WARN).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sentinel_flow::Sentinel;
use sentinel_flow::rules::RuleWatcher;

const WORKERS: usize = 3;
const RESOURCE: &str = "GET:/orders";

fn main() {
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .with_writer(std::io::stderr)
        .init();
    let mut seconds = 30u64;
    let mut path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/rules.yaml"));
    for arg in std::env::args().skip(1) {
        match arg.parse() {
            Ok(n) => seconds = n,
            Err(_) => path = PathBuf::from(arg),
        }
    }

    let sentinel = sentinel_flow::global();
    let watch = RuleWatcher::new(&path)
        .interval(Duration::from_millis(500))
        .on_success(|loaded| {
            // `version` is the file's own label (its `version:` key), not
            // a count of loads.
            let label = loaded.version.as_deref().unwrap_or("none");
            let counts: Vec<String> = loaded
                .counts
                .iter()
                .map(|(kind, n)| format!("{kind} {n}"))
                .collect();
            println!(
                "  rules loaded (file version label: {label}): {}",
                counts.join(", ")
            );
        })
        .on_failure(|error| println!("  rule file refused, the rules in force stay:\n{error}"));
    let _watch = match watch.start(sentinel) {
        Ok(handle) => handle,
        Err(error) => {
            eprintln!("cannot load the rules:\n{error}");
            std::process::exit(1);
        }
    };
    let limit = |s: &Sentinel| {
        s.rule_book()
            .flow
            .iter()
            .find(|rule| rule.resource == RESOURCE)
            .map_or("none".to_owned(), |rule| rule.count.to_string())
    };
    println!(
        "Calling {RESOURCE} from {WORKERS} threads for {seconds} s.\n\
         Edit {} (the count of the flow rule on {RESOURCE}) and watch the limit change.\n\
         Each row: the calls passed and blocked in the whole second of the clock just ended.",
        path.display()
    );

    // Start on a whole second: every row is a whole second of calls.
    let first = sentinel.now_ms() / 1_000 + 1;
    std::thread::sleep(Duration::from_millis(
        (first * 1_000).saturating_sub(sentinel.now_ms()),
    ));
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            scope.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    match sentinel.entry(RESOURCE) {
                        Ok(_entry) => std::thread::sleep(Duration::from_millis(2)),
                        Err(_) => std::thread::sleep(Duration::from_millis(1)),
                    }
                }
            });
        }
        for (row, second) in (first..first + seconds).enumerate() {
            // 50 ms into the next second, the bucket of this one is complete.
            let read_at = (second + 1) * 1_000 + 50;
            std::thread::sleep(Duration::from_millis(
                read_at.saturating_sub(sentinel.now_ms()),
            ));
            let counted = sentinel
                .resource_node(RESOURCE)
                .and_then(|node| {
                    node.stats()
                        .metrics_since(second * 1_000, sentinel.now_ms())
                        .into_iter()
                        .find(|m| m.timestamp_ms == second * 1_000)
                })
                .unwrap_or_default();
            println!(
                "{:>3} s  pass {:>5}  block {:>5}  (flow limit now {})",
                row + 1,
                counted.pass,
                counted.block,
                limit(sentinel)
            );
        }
        done.store(true, Ordering::Relaxed);
    });
}
