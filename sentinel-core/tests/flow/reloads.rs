//! Reloads that keep warm-up state or apply a changed count at once, and a
//! listener that loads rules itself.
//! What every kind shares (refused lists, listeners, state kept across a
//! load) is the contract in `tests/kinds/contract.rs`.

use std::sync::{Arc, Mutex};

use sentinel_flow_core::flow::FlowRule;
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
