//! Hot reload of a YAML rule file.
//!
//! Loads `examples/rules.yaml` (or the file given), watches it, and runs
//! three threads calling `GET:/orders`, which the file's first flow rule
//! limits (20 QPS as shipped). Once a second it prints how many calls passed
//! and how many were blocked. Edit the file while it runs (change that
//! rule's `count`, or break the file on purpose): the change shows within a
//! second, and a bad edit is reported with its line and column while the
//! rules in force stay.
//!
//! Run: `cargo run -p examples --example hot_reload [-- SECONDS] [-- PATH]`
//! (default 30 seconds, `examples/rules.yaml`).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use sentinel_flow_rules::RuleWatcher;

const WORKERS: usize = 3;
const RESOURCE: &str = "GET:/orders";

fn main() {
    let mut seconds = 30u64;
    let mut path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/rules.yaml"));
    for arg in std::env::args().skip(1) {
        match arg.parse() {
            Ok(n) => seconds = n,
            Err(_) => path = PathBuf::from(arg),
        }
    }

    let sentinel = sentinel_flow_core::global();
    let watch = RuleWatcher::new(&path)
        .interval(Duration::from_millis(500))
        .on_success(|loaded| {
            println!(
                "  rules loaded: version {:?}, {:?}",
                loaded.version, loaded.counts
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
    let limit = |s: &sentinel_flow_core::Sentinel| {
        s.rule_book()
            .flow
            .iter()
            .find(|rule| rule.resource == RESOURCE)
            .map_or("none".to_owned(), |rule| rule.count.to_string())
    };
    println!(
        "Calling {RESOURCE} from {WORKERS} threads for {seconds} s.\n\
         Edit {} (the count of the flow rule on {RESOURCE}) and watch the limit change.",
        path.display()
    );

    let (passed, blocked, done) = (AtomicU64::new(0), AtomicU64::new(0), AtomicBool::new(false));
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            scope.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    match sentinel.entry(RESOURCE) {
                        Ok(_entry) => {
                            passed.fetch_add(1, Ordering::Relaxed);
                            std::thread::sleep(Duration::from_millis(2));
                        }
                        Err(_) => {
                            blocked.fetch_add(1, Ordering::Relaxed);
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                }
            });
        }
        for second in 1..=seconds {
            std::thread::sleep(Duration::from_secs(1));
            println!(
                "{second:>3} s  pass {:>5}  block {:>5}  (flow limit {})",
                passed.swap(0, Ordering::Relaxed),
                blocked.swap(0, Ordering::Relaxed),
                limit(sentinel)
            );
        }
        done.store(true, Ordering::Relaxed);
    });
}
