//! `cargo run --release -p caps [-- NAMES]` (default 1 000 000; Linux: reads
//! /proc/self/statm)
//!
//! Caps under hostile names: enters 1 000 000 distinct resource
//! names of up to the length limit (and a few over it) on an instance with
//! the default caps, as a service naming resources after request data
//! might, and prints the growth of resident memory; then as many distinct
//! origins, then contexts, on one resource. Then loads a flow rule of count
//! 0 on a name never seen, and shows that it applies: a cap filled by other
//! names never switches a rule off.
//!
//! A tracing subscriber prints the library's log on stderr: the warning
//! each cap logs once when it is first reached.

use std::fmt::Write as _;

use sentinel_flow::flow::FlowRule;
use sentinel_flow::{DEFAULT_MAX_NAME_LEN, ManualClock, Sentinel};

/// Resident memory in bytes, from /proc/self/statm.
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // Every Linux target Rust supports here uses 4 KiB pages for statm.
    Some(pages * 4096)
}

/// Name `i`: distinct, 16 to `DEFAULT_MAX_NAME_LEN` bytes long; one in a
/// hundred is longer than the limit.
fn name(i: usize, buf: &mut String) {
    buf.clear();
    let _ = write!(buf, "GET:/items/{i:08}/");
    let len = match i % 100 {
        0 => DEFAULT_MAX_NAME_LEN + 1 + i % 1_000,
        _ => 16 + (i * 7_919) % (DEFAULT_MAX_NAME_LEN - 15),
    };
    while buf.len() < len {
        buf.push('x');
    }
    buf.truncate(len);
}

fn main() {
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .with_writer(std::io::stderr)
        .init();
    let names: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let clock = ManualClock::new(1_700_000_000_000);
    let sentinel = Sentinel::builder().clock(clock.clone()).build();
    let Some(before) = resident_bytes() else {
        eprintln!("this example reads /proc/self/statm (Linux only)");
        return;
    };

    // The resource the origin and context floods enter, made first.
    drop(sentinel.entry("GET:/api"));
    let mut buf = String::with_capacity(4 * DEFAULT_MAX_NAME_LEN);
    let mut longest = 0;
    for i in 0..names {
        name(i, &mut buf);
        longest = longest.max(buf.len());
        drop(sentinel.entry(&buf).expect("no rules yet, nothing blocks"));
        if i % 1_000 == 999 {
            clock.advance_ms(1);
        }
    }
    let after = resident_bytes().unwrap_or(before);
    let caps = sentinel.caps();
    println!(
        "{names} distinct names (up to {longest} bytes, 1 in 100 over the {} byte limit): \
         resident memory +{} MiB",
        caps.max_name_len,
        (after.saturating_sub(before)) >> 20
    );
    println!(
        "resources: {} made (cap {}), {} entries refused a node (counted, unchecked)",
        caps.resources.used, caps.resources.max, caps.resources.refused
    );

    // Origins, then contexts, named after request data.
    for (what, i0) in [("origins", 0), ("contexts", names)] {
        let start = resident_bytes().unwrap_or(before);
        for i in i0..i0 + names {
            name(i, &mut buf);
            let entry = sentinel.entry_builder("GET:/api");
            let entry = match what {
                "origins" => entry.origin(&buf),
                _ => entry.context(&buf),
            };
            drop(entry.enter().expect("no rules yet, nothing blocks"));
        }
        let end = resident_bytes().unwrap_or(start);
        let caps = sentinel.caps();
        let (made, max, refused) = match what {
            "origins" => (caps.origins.used, caps.origins.max, caps.origins.refused),
            _ => (caps.contexts.used, caps.contexts.max, caps.contexts.refused),
        };
        println!(
            "{names} distinct {what} on one resource: resident memory +{} MiB, {made} made \
             (cap {max}), {refused} entries refused one",
            (end.saturating_sub(start)) >> 20
        );
    }

    // A rule on a name never seen, loaded past the full cap.
    sentinel
        .flow_rules()
        .load(vec![FlowRule::new("POST:/checkout", 0.0)])
        .expect("a valid rule");
    let refused = sentinel.entry("POST:/checkout").is_err();
    let caps = sentinel.caps();
    println!(
        "flow rule of count 0 on a new name after the flood: entry refused = {refused}; \
         resources reserved by rules outside the cap: {}",
        caps.resources.reserved
    );
    assert!(refused, "a cap must never switch a rule off");
}
