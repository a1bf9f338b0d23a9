//! Reloads that keep a breaker (a changed rule starts closed), and refused
//! rule lists.

use sentinel_flow_core::Sentinel;
use sentinel_flow_core::degrade::{BreakerState, DegradeGrade, DegradeRule};

use crate::support::{enter, fail, instance, load, stats, succeed};
use crate::{breaker, degrade_rule, opens_at_first_error, state};

use BreakerState::{Closed, HalfOpen, Open};

#[test]
fn reloading_an_unchanged_rule_keeps_its_breaker_and_a_changed_one_starts_closed() {
    let (clock, sentinel) = instance();
    let rule = opens_at_first_error("r", 10);
    let elsewhere = opens_at_first_error("other", 10);
    load(&sentinel, [rule.clone()]);
    succeed(&sentinel, "r");
    fail(&sentinel, "r");
    assert_eq!(state(&sentinel, &rule), Open);
    assert_eq!(degrade_rule(&sentinel.entry("r").unwrap_err()), &rule);
    let open = breaker(&sentinel, &rule);
    let node = |sentinel: &Sentinel| {
        let now = sentinel.now_ms();
        let node = stats(sentinel, "r");
        (
            node.total_pass(now),
            node.total_block(now),
            node.total_exception(now),
            node.total_success(now),
        )
    };
    assert_eq!(node(&sentinel), (2, 1, 1, 2));

    // The same list, then the same rule beside a new one: still open, same
    // retry time, same window.
    load(&sentinel, [rule.clone()]);
    assert_eq!(breaker(&sentinel, &rule), open);
    load(&sentinel, [elsewhere.clone(), rule.clone()]);
    assert_eq!(breaker(&sentinel, &rule), open);
    assert_eq!(degrade_rule(&sentinel.entry("r").unwrap_err()), &rule);
    assert_eq!(node(&sentinel), (2, 2, 1, 2));

    // A probe held across an unchanged reload still decides.
    clock.advance_ms(10_000);
    let probe = enter(&sentinel, "r");
    load(&sentinel, [rule.clone()]);
    assert_eq!(state(&sentinel, &rule), HalfOpen);
    drop(probe);
    assert_eq!(state(&sentinel, &rule), Closed);

    // Opened again, then changed: a new breaker, closed, with an empty
    // window; the resource's statistics stay.
    fail(&sentinel, "r");
    assert_eq!(state(&sentinel, &rule), Open);
    let changed = DegradeRule {
        time_window_sec: 20,
        ..rule.clone()
    };
    load(&sentinel, [changed.clone()]);
    let snapshot = breaker(&sentinel, &changed);
    assert_eq!(
        (snapshot.state, snapshot.total, snapshot.bad),
        (Closed, 0, 0)
    );
    assert_eq!(node(&sentinel), (4, 2, 2, 4));
    succeed(&sentinel, "r");
    assert_eq!(node(&sentinel), (5, 2, 2, 5));
    // And it works on its own terms.
    fail(&sentinel, "r");
    assert_eq!(
        breaker(&sentinel, &changed).next_retry_ms,
        Some(sentinel.now_ms() + 20_000)
    );

    // Removing the rules lets every call through.
    sentinel.degrade_rules().load(vec![]).unwrap();
    assert!(sentinel.degrade_rules().breakers().is_empty());
    succeed(&sentinel, "r");
}

#[test]
fn bad_rules_are_refused_by_field_and_the_rules_in_force_stay() {
    let (_clock, sentinel) = instance();
    let in_force = opens_at_first_error("r", 10);
    load(&sentinel, [in_force.clone()]);
    fail(&sentinel, "r");
    let open = breaker(&sentinel, &in_force);
    assert_eq!(open.state, Open);

    let base = || DegradeRule::new("r", DegradeGrade::ErrorCount, 1.0);
    let cases: Vec<(&str, DegradeRule)> = vec![
        (
            "count",
            DegradeRule::new("r", DegradeGrade::ErrorCount, -1.0),
        ),
        (
            "count",
            DegradeRule::new("r", DegradeGrade::SlowRequestRatio, -0.5),
        ),
        (
            "count",
            DegradeRule::new("r", DegradeGrade::ErrorRatio, 1.5),
        ),
        (
            "count",
            DegradeRule::new("r", DegradeGrade::ErrorCount, f64::NAN),
        ),
        (
            "time_window_sec",
            DegradeRule {
                time_window_sec: 0,
                ..base()
            },
        ),
        (
            "probe_num",
            DegradeRule {
                probe_num: 0,
                ..base()
            },
        ),
        (
            "stat_interval_ms",
            DegradeRule {
                stat_interval_ms: 0,
                ..base()
            },
        ),
        (
            "min_request_amount",
            DegradeRule {
                min_request_amount: 0,
                ..base()
            },
        ),
        (
            "slow_ratio_threshold",
            DegradeRule {
                slow_ratio_threshold: 1.5,
                ..DegradeRule::new("r", DegradeGrade::SlowRequestRatio, 100.0)
            },
        ),
        (
            "resource",
            DegradeRule {
                resource: String::new(),
                ..base()
            },
        ),
    ];
    for (field, bad) in cases {
        // A good rule first, which would close the breaker if the list went in.
        let errors = sentinel
            .degrade_rules()
            .load(vec![base(), bad.clone()])
            .expect_err(field);
        let [error] = errors.errors() else {
            panic!("one error for {bad:?}: {errors}");
        };
        assert_eq!(error.kind, "degrade");
        assert_eq!(error.field, field, "{error}");
        assert_eq!(error.index, 1, "{error}");
        let shown = error.to_string();
        assert!(
            shown.starts_with(&format!("degrade[1] ({}): {field} ", bad.resource)),
            "{shown}"
        );
        assert_eq!(
            sentinel.degrade_rules().rules(),
            std::slice::from_ref(&in_force),
            "after {field}"
        );
        assert_eq!(breaker(&sentinel, &in_force), open, "after {field}");
    }

    let errors = sentinel
        .degrade_rules()
        .load(vec![DegradeRule {
            probe_num: 0,
            ..base()
        }])
        .unwrap_err();
    assert_eq!(
        errors.to_string(),
        "1 invalid rule(s): degrade[0] (r): probe_num must be in 1..=32767, got 0"
    );
    // The rule in force still blocks.
    assert_eq!(degrade_rule(&sentinel.entry("r").unwrap_err()), &in_force);
}
