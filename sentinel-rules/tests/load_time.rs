//! What a load costs: a file at the size limit in each of the worst shapes
//! parses and applies in at most 1 s, and 10 000 rules reload in at most
//! 25 ms (release builds; the thread's CPU time, the least of five runs,
//! so that other work on the machine does not count).
//!
//! Run: `cargo test -p sentinel-flow-rules --release --test load_time`

use std::time::Duration;

use sentinel_flow_core::{ManualClock, Sentinel};
use sentinel_flow_rules::{DEFAULT_MAX_SIZE, LoadOptions, apply, parse_str, parse_str_with};

/// The CPU time this thread has used (Linux; elsewhere none, and the
/// bounds are not checked).
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos = stat.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

/// The least CPU time of five runs of `f`: what it costs, without what
/// other processes of a shared machine took from it.
fn least_of_five(mut f: impl FnMut()) -> Option<Duration> {
    (0..5)
        .map(|_| {
            let start = cpu_time()?;
            f();
            Some(cpu_time()? - start)
        })
        .min()
        .flatten()
}

/// `head`, then `line(0)`, `line(1)`... as many as fit in the size limit.
fn at_size_limit(head: &str, line: impl Fn(usize) -> String) -> String {
    let mut text = String::from(head);
    for i in 0.. {
        let next = line(i);
        if text.len() + next.len() > DEFAULT_MAX_SIZE {
            break;
        }
        text.push_str(&next);
    }
    text
}

/// Parses `text` and applies it to a fresh instance when it is valid.
fn parse_and_apply(text: &str) {
    // The caps on names and memory are raised so that the largest files
    // (over 100 000 distinct names) are applied in full, not refused.
    let sentinel = Sentinel::builder()
        .clock(ManualClock::new(0))
        .max_rule_names(10_000_000)
        .rule_memory_budget(usize::MAX)
        .build();
    if let Ok(file) = parse_str_with(text, "rules.yaml", &LoadOptions::default()) {
        apply(&sentinel, file).expect("a parsed file applies");
    }
}

fn assert_within(name: &str, text: &str, bound: Duration) {
    assert!(
        text.len() > DEFAULT_MAX_SIZE - 100,
        "{name}: {} bytes",
        text.len()
    );
    if let Some(took) = least_of_five(|| parse_and_apply(text)) {
        assert!(took <= bound, "{name}: {took:?} > {bound:?}");
    }
}

const FILE_BOUND: Duration = Duration::from_secs(1);

#[test]
#[cfg_attr(debug_assertions, ignore = "timed: run with --release")]
fn a_file_of_top_level_keys_loads_in_linear_time() {
    let text = at_size_limit("", |i| format!("k{i}: 1\n"));
    assert_within("top-level keys", &text, FILE_BOUND);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "timed: run with --release")]
fn a_rule_of_many_fields_loads_in_linear_time() {
    let text = at_size_limit("flow:\n  - resource: r\n    count: 1\n", |i| {
        format!("    f{i}: 1\n")
    });
    assert_within("fields of one rule", &text, FILE_BOUND);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "timed: run with --release")]
fn many_track_percentiles_names_load_in_linear_time() {
    let text = at_size_limit("track_percentiles:\n", |i| format!("  - r{i}\n"));
    assert_within("track_percentiles names", &text, FILE_BOUND);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "timed: run with --release")]
fn many_hot_parameter_items_load_in_linear_time() {
    let head = "param_flow:\n  - resource: r\n    param_idx: 0\n    count: 1\n    capacity: 100\n    param_flow_item_list:\n";
    let text = at_size_limit(head, |i| format!("      - {{value: {i}, count: 1}}\n"));
    assert_within("hot-parameter items", &text, FILE_BOUND);
}

#[test]
#[cfg_attr(debug_assertions, ignore = "timed: run with --release")]
fn many_distinct_flow_rules_load_in_linear_time() {
    let text = at_size_limit("flow:\n", |i| format!("  - {{resource: r{i}, count: 1}}\n"));
    assert_within("distinct flow rules", &text, FILE_BOUND);
}

/// 10 000 flow rules on as many resources, one line each.
pub fn ten_thousand_rules(count_offset: usize) -> String {
    let mut text = String::from("flow:\n");
    for i in 0..10_000 {
        text.push_str(&format!(
            "  - {{resource: GET:/api/v1/orders/{i}, count: {}, grade: qps}}\n",
            100 + i + count_offset
        ));
    }
    text
}

#[test]
#[cfg_attr(debug_assertions, ignore = "timed: run with --release")]
fn ten_thousand_rules_reload_in_25_ms() {
    let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
    let files = [ten_thousand_rules(0), ten_thousand_rules(1)];
    apply(&sentinel, parse_str(&files[1], "rules.yaml").unwrap()).unwrap();
    let mut round = 0;
    let took = least_of_five(|| {
        round += 1;
        let file = parse_str(&files[round % 2], "rules.yaml").unwrap();
        apply(&sentinel, file).unwrap();
    });
    if let Some(took) = took {
        println!("10 000 rules parsed and applied in {took:?} of CPU time");
        assert!(took <= Duration::from_millis(25), "{took:?}");
    }
}
