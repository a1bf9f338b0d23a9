//! Reloads that keep a rule's values and held counts, and a changed rule
//! that starts afresh.
//! What every kind shares (refused lists, listeners, state kept across a
//! load) is the contract in `tests/kinds/contract.rs`.

use sentinel_flow_core::param_flow::{ParamFlowItem, ParamFlowRule};

use crate::support::{instance, load};
use crate::{admit, arg, concurrency, enter, table_of};

#[test]
fn reloading_an_unchanged_rule_keeps_its_values_and_a_changed_one_starts_afresh() {
    let (_clock, sentinel) = instance();
    let rule = ParamFlowRule::new("r", 0, 1.0);
    load(&sentinel, [rule.clone()]);
    let a = arg("a");
    assert_eq!(admit(&sentinel, "r", &a, 3), 1);

    // Unchanged, beside a new rule elsewhere: a stays spent.
    load(
        &sentinel,
        [ParamFlowRule::new("other", 0, 5.0), rule.clone()],
    );
    assert_eq!(admit(&sentinel, "r", &a, 3), 0);
    assert_eq!(table_of(&sentinel, "r").values, 1);

    // A changed count is a new rule: a starts afresh.
    let changed = ParamFlowRule::new("r", 0, 2.0);
    load(&sentinel, [changed.clone()]);
    assert_eq!(table_of(&sentinel, "r").values, 0);
    assert_eq!(admit(&sentinel, "r", &a, 3), 2);
    // So does a changed item list.
    let with_item = ParamFlowRule {
        param_flow_item_list: vec![ParamFlowItem::new("b", 3.0)],
        ..changed
    };
    load(&sentinel, [with_item.clone()]);
    assert_eq!(admit(&sentinel, "r", &a, 3), 2);
    assert_eq!(sentinel.param_flow_rules().rules(), vec![with_item]);
}

#[test]
fn a_reload_keeps_held_counts_and_a_replaced_rule_takes_its_counts_back_to_itself() {
    let (_clock, sentinel) = instance();
    let rule = concurrency("r", 0, 1.0);
    load(&sentinel, [rule.clone()]);
    let k = arg("k");

    let held = enter(&sentinel, "r", &k).unwrap();
    load(&sentinel, [rule.clone()]);
    assert!(enter(&sentinel, "r", &k).is_err(), "the count survives");
    drop(held);
    let old = enter(&sentinel, "r", &k).expect("released on the same rule");

    // A changed rule starts with no count; the old entry's exit gives its
    // count to the old rule, not to the new one.
    load(
        &sentinel,
        [ParamFlowRule {
            id: Some(2),
            ..rule
        }],
    );
    let new = enter(&sentinel, "r", &k).expect("a fresh rule");
    drop(old);
    assert!(enter(&sentinel, "r", &k).is_err(), "new still holds k");
    drop(new);
    assert!(enter(&sentinel, "r", &k).is_ok());
}
