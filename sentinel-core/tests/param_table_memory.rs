//! What a hot-parameter rule costs when it is loaded, before any value
//! arrives: the resident memory a load of many default rules adds, per
//! rule (Linux: read from `/proc/self/statm`), and the bytes each rule's
//! value table reports. Alone in its test binary, so that no other test
//! moves the resident size meanwhile.
//!
//! Print the figures: `cargo test -p sentinel-flow-core --release --test
//! param_table_memory -- --nocapture`.

use sentinel_flow_core::param_flow::ParamFlowRule;
use sentinel_flow_core::{ManualClock, ParamValue, Sentinel};

/// Resident bytes of this process (Linux), if readable.
fn resident_bytes() -> Option<i64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: i64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4_096)
}

#[test]
fn a_freshly_loaded_default_rule_costs_a_small_fixed_amount() {
    const RULES: usize = 5_000;
    // The budget counts every table full (96 668 bytes a default rule);
    // this test measures what the rules cost before any value arrives.
    let sentinel = Sentinel::builder()
        .clock(ManualClock::new(0))
        .rule_memory_budget(1 << 30)
        .build();
    let rules: Vec<_> = (0..RULES)
        .map(|i| ParamFlowRule::new(format!("r{i}"), 0, 5.0))
        .collect();
    let before = resident_bytes();
    sentinel
        .param_flow_rules()
        .load(rules)
        .expect("valid rules");
    if let (Some(before), Some(after)) = (before, resident_bytes()) {
        let per_rule = (after - before) / RULES as i64;
        println!("resident bytes per freshly loaded default hot-parameter rule: {per_rule}");
        // The rule, its compiled form, its resource's node and its share
        // of the rule set: a few KiB, not its 4 000 values' 96 000 bytes.
        assert!(per_rule < 16_384, "{per_rule} bytes per rule");
    }
    let tables = sentinel.param_flow_rules().tables();
    assert_eq!(tables.len(), RULES);
    let fresh = tables[0].1.bytes;
    println!("value table of a freshly loaded default rule: {fresh} bytes");
    assert!(tables.iter().all(|(_, stats)| stats.bytes == fresh));
    assert!(fresh <= 256, "{fresh} bytes");

    // The first value allocates one chunk of the table (64 sets of 192
    // bytes, or the last chunk's 52 of the 500), not the whole table.
    drop(
        sentinel
            .entry_builder("r0")
            .args(&[ParamValue::from("v")])
            .enter(),
    );
    let r0 = sentinel
        .param_flow_rules()
        .tables()
        .into_iter()
        .find(|(rule, _)| rule.resource == "r0")
        .map(|(_, stats)| stats.bytes);
    println!("value table after its first value: {r0:?} bytes");
    // The value's chunk follows from its hash, under a seed drawn per table.
    let one_chunk = [fresh + 64 * 192 + 16, fresh + 52 * 192 + 16];
    assert!(r0.is_some_and(|bytes| one_chunk.contains(&bytes)), "{r0:?}");
}
