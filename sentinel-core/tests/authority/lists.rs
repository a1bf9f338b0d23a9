//! White and black lists by origin, every rule of a resource, and the
//! place of authority before flow.

use sentinel_flow_core::BlockKind;
use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::flow::FlowRule;

use crate::enter;
use crate::support::{instance, load};

#[test]
fn a_white_list_admits_only_its_origins() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [AuthorityRule::new(
            "GET:/admin",
            AuthorityStrategy::White,
            ["ops", "billing"],
        )],
    );
    assert_eq!(enter(&sentinel, "GET:/admin", "ops"), Ok(()));
    assert_eq!(enter(&sentinel, "GET:/admin", "billing"), Ok(()));
    assert_eq!(
        enter(&sentinel, "GET:/admin", "shop"),
        Err(BlockKind::Authority)
    );
    assert_eq!(
        enter(&sentinel, "GET:/admin", "op"),
        Err(BlockKind::Authority),
        "exact match only"
    );
    assert_eq!(
        enter(&sentinel, "GET:/admin", ""),
        Ok(()),
        "no origin passes"
    );
    assert_eq!(
        enter(&sentinel, "GET:/other", "shop"),
        Ok(()),
        "other resources"
    );

    let err = sentinel
        .entry_builder("GET:/admin")
        .origin("shop")
        .enter()
        .unwrap_err();
    assert_eq!(err.resource(), "GET:/admin");
    let rule = err.rule_as::<AuthorityRule>().expect("names its rule");
    assert_eq!(rule.strategy, AuthorityStrategy::White);
    assert!(
        err.to_string().contains("white list [ops, billing]"),
        "{err}"
    );

    let node = sentinel.resource_node("GET:/admin").unwrap();
    let now = sentinel.now_ms();
    assert_eq!(node.stats().total_pass(now), 3);
    assert_eq!(node.stats().total_block(now), 3, "blocks are counted");
    assert_eq!(
        node.find_origin("shop").unwrap().stats().total_block(now),
        2,
        "and on the origin's node"
    );
}

#[test]
fn a_black_list_keeps_out_only_its_origins() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [AuthorityRule::new(
            "GET:/feed",
            AuthorityStrategy::Black,
            ["crawler"],
        )],
    );
    assert_eq!(
        enter(&sentinel, "GET:/feed", "crawler"),
        Err(BlockKind::Authority)
    );
    assert_eq!(enter(&sentinel, "GET:/feed", "app"), Ok(()));
    assert_eq!(enter(&sentinel, "GET:/feed", ""), Ok(()));
}

#[test]
fn every_authority_rule_of_a_resource_must_pass() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [
            AuthorityRule::new("r", AuthorityStrategy::White, ["a", "b"]),
            AuthorityRule::new("r", AuthorityStrategy::Black, ["b"]),
        ],
    );
    assert_eq!(enter(&sentinel, "r", "a"), Ok(()));
    assert_eq!(enter(&sentinel, "r", "b"), Err(BlockKind::Authority));
    assert_eq!(enter(&sentinel, "r", "c"), Err(BlockKind::Authority));
}

#[test]
fn authority_runs_before_flow_so_refused_callers_use_no_quota() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [AuthorityRule::new("r", AuthorityStrategy::Black, ["bot"])],
    );
    load(&sentinel, [FlowRule::new("r", 2.0)]);
    for _ in 0..5 {
        assert_eq!(enter(&sentinel, "r", "bot"), Err(BlockKind::Authority));
    }
    assert_eq!(enter(&sentinel, "r", "app"), Ok(()));
    assert_eq!(enter(&sentinel, "r", "app"), Ok(()));
    assert_eq!(enter(&sentinel, "r", "app"), Err(BlockKind::Flow));
}
