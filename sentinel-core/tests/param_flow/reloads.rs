//! Reloads that keep a rule's values and counts, and refused rule lists.

use sentinel_flow_core::RuleError;
use sentinel_flow_core::param_flow::{
    ParamControlBehavior, ParamFlowGrade, ParamFlowItem, ParamFlowRule,
};

use crate::support::{instance, load, refusals};
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

#[test]
fn bad_rules_are_refused_by_field_and_the_rules_in_force_stay() {
    let (_clock, sentinel) = instance();
    let in_force = vec![ParamFlowRule::new("r", 0, 1.0)];
    sentinel.param_flow_rules().load(in_force.clone()).unwrap();
    let a = arg("a");
    assert_eq!(admit(&sentinel, "r", &a, 2), 1);

    let base = || ParamFlowRule::new("r", 0, 1.0);
    let items = |list: Vec<ParamFlowItem>| ParamFlowRule {
        param_flow_item_list: list,
        ..base()
    };
    let cases: Vec<(&str, ParamFlowRule)> = vec![
        ("count", ParamFlowRule::new("r", 0, -1.0)),
        ("count", ParamFlowRule::new("r", 0, f64::NAN)),
        ("resource", ParamFlowRule::new(" ", 0, 1.0)),
        (
            "duration_in_sec",
            ParamFlowRule {
                duration_in_sec: 0,
                ..base()
            },
        ),
        (
            "control_behavior",
            ParamFlowRule {
                grade: ParamFlowGrade::Concurrency,
                control_behavior: ParamControlBehavior::RateLimiter,
                ..base()
            },
        ),
        (
            "param_flow_item_list",
            items(vec![
                ParamFlowItem::new("x", 1.0),
                ParamFlowItem::new("x", 2.0),
            ]),
        ),
        (
            "param_flow_item_list",
            items(vec![
                ParamFlowItem::new(7u8, 1.0),
                ParamFlowItem::new(7i64, 1.0),
            ]),
        ),
        (
            "param_flow_item_list",
            items(vec![ParamFlowItem::new("x", -1.0)]),
        ),
        (
            "capacity",
            ParamFlowRule {
                capacity: Some(0),
                ..base()
            },
        ),
    ];
    for (field, bad) in cases {
        let errors = sentinel
            .param_flow_rules()
            .load(vec![base(), bad.clone()])
            .expect_err(field);
        let [error]: &[RuleError; 1] = errors.errors().try_into().expect("one error");
        assert_eq!(
            (error.kind, error.index, error.field),
            ("param_flow", 1, field),
            "{bad:?}: {error}"
        );
        assert!(errors.to_string().contains(field), "{errors}");
        assert_eq!(sentinel.param_flow_rules().rules(), in_force);
    }

    // Every problem of a list is reported, in order.
    let errors = sentinel
        .param_flow_rules()
        .load(vec![
            ParamFlowRule::new("r", 0, -1.0),
            base(),
            ParamFlowRule {
                duration_in_sec: 0,
                ..base()
            },
        ])
        .unwrap_err();
    assert_eq!(
        refusals(&errors),
        [
            ("param_flow", 0, "count"),
            ("param_flow", 2, "duration_in_sec")
        ]
    );

    // The rule in force kept its state through every refused load.
    assert_eq!(admit(&sentinel, "r", &a, 2), 0);
    assert_eq!(sentinel.param_flow_rules().rules(), in_force);
}
