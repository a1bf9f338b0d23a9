//! Reloads that keep state or apply a changed count at once, refused rule
//! lists, and listeners (one that loads rules itself).

use std::sync::{Arc, Mutex};

use sentinel_flow_core::flow::{ControlBehavior, FlowRule, FlowStrategy};
use sentinel_flow_core::{ManualClock, Sentinel};

use crate::support::{admit, instance, load, stats};
use crate::warm_up::warm_up_rule;
use crate::{blocking_rule, one_second_of_traffic};

#[test]
fn reloading_unchanged_rules_keeps_warm_up_state_and_statistics() {
    // Three instances see the same traffic: one never reloads, one reloads
    // the same rule (plus a rule elsewhere), one reloads a changed rule.
    let instances: Vec<(ManualClock, Sentinel)> = (0..3).map(|_| instance()).collect();
    let rule = warm_up_rule("r", 100.0);
    for (_, sentinel) in &instances {
        load(sentinel, [rule.clone()]);
    }
    let mut first_seconds = Vec::new();
    for (clock, sentinel) in &instances {
        let admitted: Vec<usize> = (0..3)
            .map(|_| one_second_of_traffic(clock, sentinel, "r", |_, _| {}))
            .collect();
        first_seconds.push(admitted);
    }
    assert!(first_seconds.iter().all(|s| *s == first_seconds[0]));

    let [(_, kept), (_, reloaded), (_, changed)] = &instances[..] else {
        unreachable!()
    };
    let now = reloaded.now_ms();
    let total_before = stats(reloaded, "r").total_pass(now);
    load(reloaded, [rule.clone(), FlowRule::new("elsewhere", 5.0)]);
    assert_eq!(reloaded.flow_rules().rules().len(), 2);
    assert_eq!(
        stats(reloaded, "r").total_pass(now),
        total_before,
        "statistics are not reset"
    );
    load(
        changed,
        [FlowRule {
            id: Some(7),
            ..rule.clone()
        }],
    );

    let next: Vec<usize> = instances
        .iter()
        .map(|(clock, sentinel)| one_second_of_traffic(clock, sentinel, "r", |_, _| {}))
        .collect();
    assert_eq!(
        next[1], next[0],
        "the reloaded rule continues its warm-up: {first_seconds:?} then {next:?}"
    );
    assert!(
        next[2] < next[0],
        "a changed rule starts cold again: {next:?}"
    );
    let now = reloaded.now_ms();
    assert_eq!(
        stats(reloaded, "r").total_pass(now),
        stats(kept, "r").total_pass(now)
    );
    assert_eq!(admit(reloaded, "elsewhere", 10), 5, "the new rule applies");
}

#[test]
fn reloading_a_changed_count_applies_at_once() {
    let (_clock, sentinel) = instance();
    load(&sentinel, [FlowRule::new("r", 10.0)]);
    assert_eq!(admit(&sentinel, "r", 5), 5);

    load(&sentinel, [FlowRule::new("r", 5.0)]);
    let err = sentinel.entry("r").unwrap_err();
    assert_eq!(blocking_rule(&err).count, 5.0);

    load(&sentinel, [FlowRule::new("r", 8.0)]);
    assert_eq!(
        admit(&sentinel, "r", 10),
        3,
        "5 passed this second, 8 allowed"
    );

    sentinel.flow_rules().load(vec![]).unwrap();
    assert_eq!(admit(&sentinel, "r", 10), 10, "no rule, no limit");
}

#[test]
fn bad_rules_are_refused_by_field_and_the_rules_in_force_stay() {
    let (_clock, sentinel) = instance();
    let in_force = vec![FlowRule::new("r", 1.0)];
    sentinel.flow_rules().load(in_force.clone()).unwrap();

    let base = || FlowRule::new("r", 1.0);
    let cases: Vec<(&str, FlowRule)> = vec![
        ("count", FlowRule::new("r", -1.0)),
        ("count", FlowRule::new("r", f64::NAN)),
        (
            "ref_resource",
            FlowRule {
                strategy: FlowStrategy::Relate,
                ..base()
            },
        ),
        (
            "ref_resource",
            FlowRule {
                strategy: FlowStrategy::Chain,
                ..base()
            },
        ),
        (
            "limit_app",
            FlowRule {
                limit_app: String::new(),
                ..base()
            },
        ),
        (
            "limit_app",
            FlowRule {
                limit_app: "a,b".into(),
                ..base()
            },
        ),
        (
            "warm_up_period_sec",
            FlowRule {
                control_behavior: ControlBehavior::WarmUp,
                warm_up_period_sec: 0,
                ..base()
            },
        ),
        (
            "warm_up_cold_factor",
            FlowRule {
                control_behavior: ControlBehavior::WarmUp,
                warm_up_cold_factor: 1,
                ..base()
            },
        ),
        (
            "stat_interval_ms",
            FlowRule {
                stat_interval_ms: 0,
                ..base()
            },
        ),
    ];
    for (field, bad) in cases {
        // A good rule first that would lift the limit if the list went in.
        let errors = sentinel
            .flow_rules()
            .load(vec![FlowRule::new("r", 1_000.0), bad.clone()])
            .expect_err(field);
        let [error] = errors.errors() else {
            panic!("one error for {bad:?}: {errors}");
        };
        assert_eq!(error.kind, "flow");
        assert_eq!(error.field, field, "{error}");
        assert_eq!(error.index, 1, "{error}");
        assert_eq!(error.resource, "r", "{error}");
        let shown = error.to_string();
        assert!(
            shown.starts_with(&format!("flow[1] (r): {field} ")),
            "{shown}"
        );
        assert_eq!(sentinel.flow_rules().rules(), in_force, "after {field}");
    }

    let errors = sentinel
        .flow_rules()
        .load(vec![FlowRule::new("r", -1.0)])
        .unwrap_err();
    assert_eq!(
        errors.errors()[0].to_string(),
        "flow[0] (r): count must be a finite number >= 0, got -1"
    );

    // Two bad rules: both reported, in order.
    let errors = sentinel
        .flow_rules()
        .load(vec![
            FlowRule::new("x", f64::INFINITY),
            FlowRule::new("y", 3.0),
            FlowRule {
                strategy: FlowStrategy::Chain,
                ..FlowRule::new("z", 1.0)
            },
        ])
        .unwrap_err();
    let found: Vec<_> = errors
        .errors()
        .iter()
        .map(|e| (e.index, e.resource.as_str(), e.field))
        .collect();
    assert_eq!(found, [(0, "x", "count"), (2, "z", "ref_resource")]);
    let shown = errors.to_string();
    assert!(
        shown.starts_with("2 invalid rule(s): flow[0] (x): count"),
        "{shown}"
    );
    assert!(shown.contains("; flow[2] (z): ref_resource"), "{shown}");

    // The rules loaded first are still in force, and still block.
    assert_eq!(sentinel.flow_rules().rules(), in_force);
    assert_eq!(admit(&sentinel, "r", 3), 1);
    assert_eq!(
        admit(&sentinel, "y", 5),
        5,
        "the refused list's good rule is not in force"
    );
}

#[test]
fn listeners_hear_each_successful_load_and_no_refused_one() {
    let (_clock, sentinel) = instance();
    let heard: Arc<Mutex<Vec<Vec<FlowRule>>>> = Arc::default();
    let log = Arc::clone(&heard);
    sentinel
        .flow_rules()
        .on_change(move |rules| log.lock().unwrap().push(rules.to_vec()));

    let first = vec![FlowRule::new("r", 1.0), FlowRule::new("s", 2.0)];
    sentinel.flow_rules().load(first.clone()).unwrap();
    assert!(
        sentinel
            .flow_rules()
            .load(vec![FlowRule::new("r", -1.0)])
            .is_err()
    );
    let second = vec![warm_up_rule("r", 50.0)];
    sentinel.flow_rules().load(second.clone()).unwrap();
    sentinel.flow_rules().load(vec![]).unwrap();

    assert_eq!(*heard.lock().unwrap(), [first, second, vec![]]);
}

#[test]
fn a_listener_may_load_rules_itself() {
    // A listener that reacts to a load by loading again (say, adding a
    // derived rule) must not deadlock, and hears both loads.
    let (_clock, sentinel) = instance();
    let sentinel = Arc::new(sentinel);
    let heard = Arc::new(Mutex::new(Vec::new()));
    let (inner, log) = (Arc::downgrade(&sentinel), Arc::clone(&heard));
    sentinel.flow_rules().on_change(move |rules| {
        log.lock().unwrap().push(rules.len());
        if rules.len() == 1
            && let Some(sentinel) = inner.upgrade()
        {
            let mut more = rules.to_vec();
            more.push(FlowRule::new("derived", 5.0));
            sentinel.flow_rules().load(more).unwrap();
        }
    });
    load(&sentinel, [FlowRule::new("r", 1.0)]);
    assert_eq!(sentinel.flow_rules().rules().len(), 2);
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard, vec![1, 2]);
}
