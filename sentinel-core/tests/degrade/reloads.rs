//! Reloads that keep a breaker (a probe held across one still decides) and
//! a changed rule that starts closed.
//! What every kind shares (refused lists, listeners, state kept across a
//! load) is the contract in `tests/kinds/contract.rs`.

use sentinel_flow_core::Sentinel;
use sentinel_flow_core::degrade::{BreakerState, DegradeRule};

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
