//! `#[sentinel_resource]` through the umbrella crate: the expansion names
//! `sentinel_flow`, the crate the caller's `Cargo.toml` names.

use sentinel_flow::flow::FlowRule;
use sentinel_flow::{BlockError, BlockKind, ManualClock, Sentinel, sentinel_resource};
use std::sync::OnceLock;

fn instance() -> &'static Sentinel {
    static SENTINEL: OnceLock<Sentinel> = OnceLock::new();
    SENTINEL.get_or_init(|| {
        let sentinel = Sentinel::builder()
            .clock(ManualClock::new(1_700_000_000_000))
            .build();
        sentinel
            .flow_rules()
            .load(vec![FlowRule::new("umbrella:guarded", 1.0)])
            .expect("a valid rule");
        sentinel
    })
}

#[sentinel_resource("umbrella:guarded", sentinel = instance)]
fn guarded(x: u32) -> Result<u32, BlockError> {
    Ok(x + 1)
}

#[test]
fn the_attribute_expands_through_the_umbrella_and_its_rule_holds() {
    assert_eq!(guarded(1).expect("the first call passes"), 2);
    let refused = guarded(2).expect_err("the second call in the same second is refused");
    assert_eq!(refused.kind(), BlockKind::Flow);
}
