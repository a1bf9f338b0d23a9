//! The rule memory budget counts a hot-parameter rule's value table full:
//! what the table takes once every value it can track has come, as the
//! process's resident memory shows, is at most what the budget counted. A
//! table laid out otherwise (more bytes a value, growth past its capacity)
//! fails here until `PARAM_VALUE_BYTES` follows it.
//!
//! One test alone in its binary, so that no other test's memory moves the
//! reading.

#![cfg(target_os = "linux")]

mod support;

use sentinel_flow_core::ParamValue;
use sentinel_flow_core::param_flow::{PARAM_VALUE_BYTES, ParamFlowRule};
use support::{instance, load};

/// The process's resident memory, bytes (pages of 4 KiB).
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .expect("resident pages");
    pages * 4_096
}

#[test]
fn a_full_hot_param_table_takes_at_most_what_the_budget_counts() {
    const CAPACITY: usize = 1 << 17;
    let (_, sentinel) = instance();
    let enter = |value: i64| {
        let args = [ParamValue::from(value)];
        drop(sentinel.entry_builder("r").args(&args).enter());
    };
    // The resource's node and its windows, and the code of a load and of
    // a hot-parameter check (pages of the binary, resident once run),
    // before the reading.
    load(&sentinel, [ParamFlowRule::new("r", 0, 1_000_000.0)]);
    enter(-1);
    load(&sentinel, Vec::<ParamFlowRule>::new());
    let counted_before = sentinel.rule_memory();
    let resident_before = resident_bytes();

    load(
        &sentinel,
        [ParamFlowRule {
            capacity: Some(CAPACITY),
            ..ParamFlowRule::new("r", 0, 1_000_000.0)
        }],
    );
    // Every value it can track, twice over.
    for value in 0..2 * CAPACITY as i64 {
        enter(value);
    }

    let resident = resident_bytes().saturating_sub(resident_before);
    let counted = sentinel.rule_memory() - counted_before;
    let table = (CAPACITY * PARAM_VALUE_BYTES) as u64;
    assert!(counted >= table, "counted {counted}, table {table}");
    // The reading moves by whole pages, and the allocator keeps a little
    // of its own: 256 KiB of slack on a 3 MiB table.
    assert!(
        resident <= counted + (256 << 10),
        "the table took {resident} bytes resident, the budget counted {counted}"
    );
}
