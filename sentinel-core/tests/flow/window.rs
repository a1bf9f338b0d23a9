//! Rules with a statistics window of their own: two seconds, the count
//! times its seconds, and only entries that pass.

use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::slot::{self, EntryContext, Slot};
use sentinel_flow_core::{BlockError, BlockKind};

use crate::blocking_rule;
use crate::support::{admit, instance, instance_with, load, stats};

fn two_second_rule() -> FlowRule {
    FlowRule {
        stat_interval_ms: 2_000,
        stat_sample_count: 4,
        ..FlowRule::new("r", 10.0)
    }
}

#[test]
fn a_rule_with_its_own_two_second_window_counts_passes_over_two_seconds() {
    let (clock, sentinel) = instance();
    load(&sentinel, [two_second_rule()]);

    // The check is `trunc(passes in 2 s / 2) + 1 <= 10`, as Sentinel's:
    // 20 fit at one instant (the next test pins it exactly).
    let first = admit(&sentinel, "r", 30);
    assert_eq!(first, 20, "admitted {first}");

    // A second later the node's own 1 s window is empty, the rule's is not.
    clock.advance_ms(1_000);
    assert_eq!(stats(&sentinel, "r").pass_qps(sentinel.now_ms()), 0.0);
    assert_eq!(admit(&sentinel, "r", 5), 0);
    clock.advance_ms(999);
    assert_eq!(admit(&sentinel, "r", 5), 0);
    // Two seconds after the first passes their bucket has left the window.
    clock.advance_ms(1);
    assert_eq!(admit(&sentinel, "r", 30), first);

    // Spread over the 4 buckets of 500 ms: the window sums all of them,
    // and each bucket leaves it 2 s after it started.
    clock.advance_ms(2_000);
    for i in 0..4 {
        assert_eq!(admit(&sentinel, "r", 4), 4, "bucket {i}");
        clock.advance_ms(500);
    }
    assert_eq!(admit(&sentinel, "r", 30), first - 12, "the first 4 left");
}

#[test]

fn a_rule_with_its_own_two_second_window_admits_count_times_its_seconds() {
    let (_clock, sentinel) = instance();
    load(&sentinel, [two_second_rule()]);
    // 10 QPS over a 2 s window: 20 passes in the window. Sentinel's
    // DefaultController reads `(int) node.passQps()`: 19 / 2 = 9 and
    // 9 + 1 <= 10 lets the 20th through; 20 / 2 + 1 > 10 blocks the 21st.
    assert_eq!(admit(&sentinel, "r", 20), 20);
    let err = sentinel.entry("r").unwrap_err();
    assert_eq!(blocking_rule(&err), &two_second_rule());
}

/// Blocks entries from origin `late`, after the flow check.
#[derive(Debug)]
struct BlockLate;

impl Slot for BlockLate {
    fn order(&self) -> i32 {
        slot::order::DEGRADE + 1
    }
    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        if ctx.origin() == "late" {
            return Err(ctx.block(BlockKind::Custom("late")));
        }
        Ok(())
    }
}

#[test]

fn a_rules_own_window_counts_only_entries_that_pass() {
    let (_clock, sentinel) = instance_with(|builder| builder.slot(BlockLate));
    load(
        &sentinel,
        [FlowRule {
            stat_interval_ms: 500,
            stat_sample_count: 1,
            ..FlowRule::new("r", 4.0)
        }],
    );

    // Passes the flow rule, then is blocked by the slot: no pass anywhere.
    let err = sentinel
        .entry_builder("r")
        .origin("late")
        .enter()
        .unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("late"));
    let now = sentinel.now_ms();
    assert_eq!(stats(&sentinel, "r").total_pass(now), 0);
    // 4 QPS over 500 ms: 2 passes fit in the bucket.
    assert_eq!(admit(&sentinel, "r", 5), 2);
}
