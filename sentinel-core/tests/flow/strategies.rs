//! The relate strategy (limited by another resource's QPS) and the chain
//! strategy (only entries through a named context).

use sentinel_flow_core::flow::{FlowRule, FlowStrategy};

use crate::blocking_rule;
use crate::support::{admit, admitted, instance, load, stats};

#[test]
fn relate_limits_a_resource_by_the_qps_of_another() {
    let (clock, sentinel) = instance();
    load(
        &sentinel,
        [FlowRule {
            strategy: FlowStrategy::Relate,
            ref_resource: Some("read".into()),
            ..FlowRule::new("write", 2.0)
        }],
    );

    // "read" not entered yet: the rule selects no node and does not apply.
    assert_eq!(admit(&sentinel, "write", 5), 5);
    assert!(sentinel.entry("read").is_ok());
    assert_eq!(admit(&sentinel, "write", 5), 5, "read at 1 QPS: 1 + 1 <= 2");
    assert!(sentinel.entry("read").is_ok());
    let err = sentinel.entry("write").unwrap_err();
    assert_eq!(blocking_rule(&err).ref_resource.as_deref(), Some("read"));
    assert_eq!(err.resource(), "write");
    // "read" itself is not limited.
    assert_eq!(admit(&sentinel, "read", 10), 10);
    assert_eq!(admit(&sentinel, "write", 3), 0);

    // A second later "read" is quiet again.
    clock.advance_ms(1_000);
    assert_eq!(admit(&sentinel, "write", 5), 5);
    let now = sentinel.now_ms();
    assert_eq!(stats(&sentinel, "write").total_block(now), 4);
    assert_eq!(stats(&sentinel, "read").total_block(now), 0);
}

#[test]
fn relate_to_a_resource_never_entered_limits_nothing() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [FlowRule {
            strategy: FlowStrategy::Relate,
            ref_resource: Some("never".into()),
            ..FlowRule::new("write", 1.0)
        }],
    );
    // Nothing entered the reference, so it has no node (a load makes none;
    // its first entry will, past any cap): "write" is limited by a quiet
    // reference, as Sentinel passes a relate rule whose node is missing.
    assert_eq!(admit(&sentinel, "write", 10), 10);
    assert!(sentinel.resource_node("never").is_none());
    assert!(sentinel.is_reserved("never"));
}

#[test]
fn chain_limits_only_entries_through_the_named_context() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [FlowRule {
            strategy: FlowStrategy::Chain,
            ref_resource: Some("ctx-a".into()),
            ..FlowRule::new("r", 1.0)
        }],
    );
    let in_context = |context: &str, n: usize| {
        admitted(n, || sentinel.entry_builder("r").context(context).enter())
    };

    assert_eq!(in_context("ctx-a", 1), 1);
    let err = sentinel
        .entry_builder("r")
        .context("ctx-a")
        .enter()
        .unwrap_err();
    assert_eq!(blocking_rule(&err).strategy, FlowStrategy::Chain);
    assert_eq!(in_context("ctx-b", 5), 5);
    assert_eq!(
        admit(&sentinel, "r", 5),
        5,
        "the default context is not limited"
    );
    assert_eq!(in_context("ctx-a", 3), 0, "ctx-a stays limited");
}
