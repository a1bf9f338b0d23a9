//! `limit_app`: a rule naming an origin, `other`, and the order in which
//! origin and default rules are checked.

use sentinel_flow_core::flow::{FlowRule, LIMIT_APP_DEFAULT, LIMIT_APP_OTHER};

use crate::support::{admit, instance, load, stats};
use crate::{admit_from, blocking_rule, for_app};

#[test]
fn a_rule_naming_an_origin_limits_only_that_origin() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [
            for_app("r", "a", 1.0),
            for_app("r", LIMIT_APP_DEFAULT, 100.0),
        ],
    );

    assert_eq!(admit_from(&sentinel, "r", "a", 1), 1);
    let err = sentinel.entry_builder("r").origin("a").enter().unwrap_err();
    assert_eq!(blocking_rule(&err).limit_app, "a");
    assert_eq!(blocking_rule(&err).count, 1.0);

    assert_eq!(
        admit_from(&sentinel, "r", "b", 5),
        5,
        "b is not limited by a's rule"
    );
    assert_eq!(
        admit(&sentinel, "r", 5),
        5,
        "nor are calls without an origin"
    );
    let now = sentinel.now_ms();
    assert_eq!(stats(&sentinel, "r").total_pass(now), 1 + 5 + 5);
    assert_eq!(stats(&sentinel, "r").total_block(now), 1);
}

#[test]
fn an_other_rule_limits_each_unnamed_origin_on_its_own() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [for_app("r", "a", 100.0), for_app("r", LIMIT_APP_OTHER, 1.0)],
    );

    assert_eq!(admit_from(&sentinel, "r", "b", 1), 1);
    let err = sentinel.entry_builder("r").origin("b").enter().unwrap_err();
    assert_eq!(blocking_rule(&err).limit_app, LIMIT_APP_OTHER);
    // Per origin: c has its own node and its own allowance.
    assert_eq!(admit_from(&sentinel, "r", "c", 5), 1);
    // a is named by a rule of the resource: "other" is not about it.
    assert_eq!(admit_from(&sentinel, "r", "a", 5), 5);
    // No origin: "other" is not about it either.
    assert_eq!(admit(&sentinel, "r", 5), 5);

    let node = sentinel.resource_node("r").unwrap();
    let now = sentinel.now_ms();
    assert_eq!(
        node.find_origin("b").unwrap().stats().total_block(now),
        1,
        "the block counts on the origin's node"
    );
    assert_eq!(node.find_origin("c").unwrap().stats().total_pass(now), 1);
}

#[test]
fn origin_rules_are_checked_before_default_rules_and_every_rule_applies() {
    let (_clock, sentinel) = instance();
    let origin_rule = |count| FlowRule {
        limit_app: "a".into(),
        ..FlowRule::new("r", count)
    };
    let default_rule = |count| FlowRule::new("r", count);

    // The origin rule lets it through; the default rule, listed first but
    // checked last, still applies and blocks.
    load(&sentinel, [default_rule(0.0), origin_rule(100.0)]);
    let err = sentinel.entry_builder("r").origin("a").enter().unwrap_err();
    assert_eq!(blocking_rule(&err), &default_rule(0.0));

    // The origin rule blocks: it is the one reported.
    load(&sentinel, [default_rule(100.0), origin_rule(0.0)]);
    let err = sentinel.entry_builder("r").origin("a").enter().unwrap_err();
    assert_eq!(blocking_rule(&err), &origin_rule(0.0));
    assert_eq!(admit(&sentinel, "r", 3), 3, "calls without an origin pass");

    // Both would block: the origin rule, checked first, is the one reported
    // although the default rule is listed first.
    load(&sentinel, [default_rule(0.0), origin_rule(0.0)]);
    let err = sentinel.entry_builder("r").origin("a").enter().unwrap_err();
    assert_eq!(blocking_rule(&err), &origin_rule(0.0));
    let err = sentinel.entry("r").unwrap_err();
    assert_eq!(blocking_rule(&err), &default_rule(0.0));
}
