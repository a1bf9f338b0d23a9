//! Loading every kind of rule at once (`RuleBook`): one swap, all or
//! nothing, listeners of each kind, and no entry ever seeing a mix.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sentinel_flow_core::adaptive::{AdaptiveAlgorithm, AdaptiveRule};
use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::gateway::{ApiDefinition, ApiPredicate, GatewayRule};
use sentinel_flow_core::param_flow::ParamFlowRule;
use sentinel_flow_core::system::SystemRule;
use sentinel_flow_core::{BlockKind, RuleBook};

use crate::support::{instance, refusals};

#[test]
fn a_book_replaces_every_kind_and_reads_back() {
    let (_clock, sentinel) = instance();
    let book = RuleBook {
        flow: vec![FlowRule::new("a", 10.0)],
        degrade: vec![DegradeRule::new("a", DegradeGrade::ErrorCount, 3.0)],
        system: vec![SystemRule {
            qps: Some(100.0),
            ..SystemRule::default()
        }],
        authority: vec![AuthorityRule::new("a", AuthorityStrategy::Black, ["x"])],
        param_flow: vec![ParamFlowRule::new("a", 0, 5.0)],
        adaptive: vec![AdaptiveRule::new("a", AdaptiveAlgorithm::gradient2())],
        gateway: vec![GatewayRule::api_group("api", 5.0)],
        api_definitions: vec![ApiDefinition::new(
            "api",
            vec![ApiPredicate::prefix("/a/**")],
        )],
    };
    sentinel.load_rule_book(book.clone()).unwrap();
    assert_eq!(sentinel.rule_book(), book);
    assert_eq!(sentinel.flow_rules().rules(), book.flow);
    assert_eq!(sentinel.degrade_rules().rules(), book.degrade);
    // An empty book clears every kind.
    sentinel.load_rule_book(RuleBook::default()).unwrap();
    assert_eq!(sentinel.rule_book(), RuleBook::default());
}

#[test]
fn one_bad_rule_refuses_the_whole_book_and_every_error_is_reported() {
    let (_clock, sentinel) = instance();
    let good = RuleBook {
        flow: vec![FlowRule::new("a", 1.0)],
        ..RuleBook::default()
    };
    sentinel.load_rule_book(good.clone()).unwrap();
    let errors = sentinel
        .load_rule_book(RuleBook {
            flow: vec![FlowRule::new("a", 5.0), FlowRule::new("b", -1.0)],
            degrade: vec![DegradeRule {
                time_window_sec: 0,
                ..DegradeRule::new("a", DegradeGrade::ErrorRatio, 0.5)
            }],
            authority: vec![AuthorityRule::new("", AuthorityStrategy::White, ["x"])],
            ..RuleBook::default()
        })
        .unwrap_err();
    assert_eq!(
        refusals(&errors),
        // Kind by kind, in the chain's order (the book's fields).
        [
            ("authority", 0, "resource"),
            ("flow", 1, "count"),
            ("degrade", 0, "time_window_sec")
        ]
    );
    assert_eq!(sentinel.rule_book(), good, "nothing changed");
}

#[test]
fn each_kinds_listeners_hear_a_book() {
    let (_clock, sentinel) = instance();
    let heard = Arc::new(Mutex::new(Vec::new()));
    let (flow, system) = (Arc::clone(&heard), Arc::clone(&heard));
    sentinel
        .flow_rules()
        .on_change(move |rules| flow.lock().unwrap().push(("flow", rules.len())));
    sentinel
        .system_rules()
        .on_change(move |rules| system.lock().unwrap().push(("system", rules.len())));
    sentinel
        .load_rule_book(RuleBook {
            flow: vec![FlowRule::new("a", 1.0), FlowRule::new("b", 1.0)],
            ..RuleBook::default()
        })
        .unwrap();
    // In the chain's order.
    assert_eq!(*heard.lock().unwrap(), [("system", 0), ("flow", 2)]);
}

#[test]
fn entries_never_see_a_mix_of_two_books() {
    // Book A refuses origin "x" by flow, book B by authority; a mix (flow
    // from B and authority from A) would let the entry through.
    let (_clock, sentinel) = instance();
    let book_a = RuleBook {
        flow: vec![FlowRule::new("r", 0.0)],
        ..RuleBook::default()
    };
    let book_b = RuleBook {
        authority: vec![AuthorityRule::new("r", AuthorityStrategy::Black, ["x"])],
        ..RuleBook::default()
    };
    sentinel.load_rule_book(book_a.clone()).unwrap();
    let done = AtomicBool::new(false);
    let (flow, authority, passed) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    match sentinel.entry_builder("r").origin("x").enter() {
                        Ok(_) => passed.fetch_add(1, Ordering::Relaxed),
                        Err(e) if e.kind() == BlockKind::Flow => {
                            flow.fetch_add(1, Ordering::Relaxed)
                        }
                        Err(_) => authority.fetch_add(1, Ordering::Relaxed),
                    };
                }
            });
        }
        for i in 0..100 {
            let book = if i % 2 == 0 { &book_b } else { &book_a };
            sentinel.load_rule_book(book.clone()).unwrap();
            std::thread::yield_now();
        }
        done.store(true, Ordering::Relaxed);
    });
    assert_eq!(passed.into_inner(), 0, "an entry saw a mix of two books");
    assert!(flow.into_inner() > 0 && authority.into_inner() > 0);
}
