//! Caps never switch a rule off. Every cap is filled with names
//! that no rule mentions, from several threads; then rules of every kind
//! are loaded on new names, and each one applies.

use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::{FlowGrade, FlowRule, FlowStrategy};
use sentinel_flow_core::param_flow::ParamFlowRule;
use sentinel_flow_core::{BlockKind, ManualClock, ParamValue, RuleBook, Sentinel};

use crate::support::{instance, instance_with, load};

#[derive(Debug)]
struct Oops;

impl std::fmt::Display for Oops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("oops")
    }
}

impl std::error::Error for Oops {}

/// An instance with small caps: 50 resources, 10 contexts, 5 origins.
fn small_caps() -> (ManualClock, Sentinel) {
    instance_with(|builder| builder.max_resources(50).max_contexts(10).max_origins(5))
}

/// Fills every cap from four threads: 1 000 resource names, 100 contexts,
/// 100 origins on `crowded`, all distinct, none named by a rule.
fn fill_every_cap(sentinel: &Sentinel) {
    drop(sentinel.entry("crowded").unwrap());
    std::thread::scope(|s| {
        for t in 0..4 {
            s.spawn(move || {
                for i in 0..250 {
                    drop(sentinel.entry(&format!("noise/{t}/{i}")).unwrap());
                }
                for i in 0..25 {
                    let context = format!("ctx/{t}/{i}");
                    let entry = sentinel.entry_builder("crowded").context(&context);
                    drop(entry.enter().unwrap());
                }
                for i in 0..25 {
                    let origin = format!("app/{t}/{i}");
                    let entry = sentinel.entry_builder("crowded").origin(&origin);
                    drop(entry.enter().unwrap());
                }
            });
        }
    });
    let caps = sentinel.caps();
    assert_eq!(caps.resources.used, 50);
    assert!(caps.resources.refused >= 950, "{caps:?}");
    assert_eq!(caps.contexts.used, 10);
    assert_eq!(caps.contexts.refused, 90);
    assert_eq!(caps.origins.used, 5);
    assert_eq!(caps.origins.refused, 95);
    assert!(sentinel.resource_node("flow/new").is_none());
}

fn blocked_kind(
    result: Result<sentinel_flow_core::Entry<'_>, sentinel_flow_core::BlockError>,
) -> BlockKind {
    result.expect_err("the rule should refuse").kind()
}

#[test]
fn a_flow_rule_on_a_new_name_applies_past_a_full_cap() {
    let (_clock, sentinel) = small_caps();
    fill_every_cap(&sentinel);
    let refused_before = sentinel.refused_resources();
    load(&sentinel, [FlowRule::new("flow/new", 0.0)]);
    assert_eq!(blocked_kind(sentinel.entry("flow/new")), BlockKind::Flow);
    assert_eq!(sentinel.refused_resources(), refused_before);
    assert!(sentinel.is_reserved("flow/new"));
    assert!(!sentinel.is_reserved("noise/0/0"));
    let caps = sentinel.caps();
    assert_eq!((caps.resources.used, caps.resources.reserved), (50, 1));
}

#[test]
fn every_rule_kind_applies_on_new_names_past_every_full_cap() {
    let (clock, sentinel) = small_caps();
    fill_every_cap(&sentinel);

    let mut relate = FlowRule::new("relate/guarded", 1.0);
    relate.strategy = FlowStrategy::Relate;
    relate.ref_resource = Some("relate/ref".into());
    let mut chain = FlowRule::new("chain/guarded", 0.0);
    chain.strategy = FlowStrategy::Chain;
    chain.ref_resource = Some("chain/ctx".into());
    let mut by_origin = FlowRule::new("crowded", 0.0);
    by_origin.limit_app = "vip".into();
    let breaker = DegradeRule {
        min_request_amount: 1,
        ..DegradeRule::new("degrade/new", DegradeGrade::ErrorCount, 0.0)
    };
    sentinel
        .load_rule_book(RuleBook {
            flow: vec![FlowRule::new("flow/new", 0.0), relate, chain, by_origin],
            degrade: vec![breaker],
            authority: vec![AuthorityRule::new(
                "authority/new",
                AuthorityStrategy::White,
                ["good"],
            )],
            param_flow: vec![ParamFlowRule::new("param/new", 0, 0.0)],
            ..RuleBook::default()
        })
        .unwrap();

    // Flow, direct.
    assert_eq!(blocked_kind(sentinel.entry("flow/new")), BlockKind::Flow);

    // Degrade: one error opens the breaker.
    let entry = sentinel.entry("degrade/new").unwrap();
    assert!(entry.is_counted());
    clock.advance_ms(1);
    entry.set_error(&Oops);
    drop(entry);
    assert_eq!(
        blocked_kind(sentinel.entry("degrade/new")),
        BlockKind::Degrade
    );

    // Authority: only "good" gets in; its origin node exists.
    let good = sentinel.entry_builder("authority/new").origin("good");
    drop(good.enter().unwrap());
    let bad = sentinel.entry_builder("authority/new").origin("bad");
    assert_eq!(blocked_kind(bad.enter()), BlockKind::Authority);
    let node = sentinel.resource_node("authority/new").unwrap();
    assert!(node.find_origin("good").is_some());

    // Hot parameter: threshold 0 refuses every value.
    let args = [ParamValue::from("x")];
    let hot = sentinel.entry_builder("param/new").args(&args);
    assert_eq!(blocked_kind(hot.enter()), BlockKind::ParamFlow);

    // Relate: the ref resource has a node, so its traffic is seen.
    drop(sentinel.entry("relate/guarded").unwrap());
    drop(sentinel.entry("relate/ref").unwrap());
    assert_eq!(
        blocked_kind(sentinel.entry("relate/guarded")),
        BlockKind::Flow
    );

    // Chain: the rule's context exists past the context cap.
    let in_chain = sentinel.entry_builder("chain/guarded").context("chain/ctx");
    assert_eq!(blocked_kind(in_chain.enter()), BlockKind::Flow);
    drop(sentinel.entry("chain/guarded").unwrap());

    // limit_app: the origin named by the rule has its node past the
    // resource's full origin cap.
    let vip = sentinel.entry_builder("crowded").origin("vip");
    assert_eq!(blocked_kind(vip.enter()), BlockKind::Flow);
    let crowded = sentinel.resource_node("crowded").unwrap();
    assert!(crowded.find_origin("vip").is_some());
    let snapshot = sentinel.resources();
    let crowded_row = snapshot.iter().find(|r| &*r.name == "crowded").unwrap();
    assert_eq!(crowded_row.refused_origins, 95);
    assert!(crowded_row.named_by_rules);
    let noise = snapshot
        .iter()
        .find(|r| r.name.starts_with("noise/"))
        .unwrap();
    assert!(!noise.named_by_rules);
    drop(sentinel.entry_builder("crowded").origin("app/0/0").enter());

    let caps = sentinel.caps();
    assert_eq!(caps.resources.used, 50, "{caps:?}");
    // flow/new, relate/guarded, relate/ref, chain/guarded, degrade/new,
    // authority/new, param/new ("crowded" was made by an entry).
    assert_eq!(caps.resources.reserved, 7, "{caps:?}");
    assert_eq!((caps.contexts.used, caps.contexts.reserved), (10, 1));
    // Reserved: vip on crowded, good on authority/new; "bad" was made by
    // its entry on authority/new, under that resource's cap.
    assert_eq!((caps.origins.used, caps.origins.reserved), (6, 2));
}

#[test]
fn rules_loaded_while_threads_fill_the_caps_apply_at_once() {
    let (_clock, sentinel) = small_caps();
    std::thread::scope(|s| {
        for t in 0..3 {
            let sentinel = &sentinel;
            s.spawn(move || {
                for i in 0..400 {
                    drop(sentinel.entry(&format!("noise/{t}/{i}")).unwrap());
                }
            });
        }
        let sentinel = &sentinel;
        s.spawn(move || {
            for i in 0..40 {
                let name = format!("guarded/{i}");
                let rules: Vec<FlowRule> = (0..=i)
                    .map(|j| FlowRule::new(format!("guarded/{j}"), 0.0))
                    .collect();
                sentinel.flow_rules().load(rules).unwrap();
                assert!(sentinel.entry(&name).is_err(), "{name} passed");
            }
        });
    });
    for i in 0..40 {
        assert!(sentinel.entry(&format!("guarded/{i}")).is_err());
    }
    let caps = sentinel.caps();
    assert_eq!((caps.resources.used, caps.resources.reserved), (50, 40));
}

#[test]
fn an_other_rule_limits_the_origins_past_the_cap_together() {
    let (clock, sentinel) = small_caps();
    fill_every_cap(&sentinel);
    let mut other = FlowRule::new("crowded", 2.0);
    other.limit_app = "other".into();
    load(&sentinel, [other]);
    clock.advance_ms(1_000);
    let enter = |origin: &str| sentinel.entry_builder("crowded").origin(origin).enter();
    // Origins with their own node: 2 each.
    let crowded = sentinel.resource_node("crowded").unwrap();
    let own: Vec<String> = crowded.origins().map(|o| o.name().to_owned()).collect();
    assert_eq!(own.len(), 5);
    for origin in &own[..2] {
        assert_eq!((0..5).filter(|_| enter(origin).is_ok()).count(), 2);
    }
    // Origins past the cap: 2 together, never unlimited.
    let passed = (0..20)
        .filter(|i| enter(&format!("late/{i}")).is_ok())
        .count();
    assert_eq!(passed, 2);
    let shared = crowded.origins_past_cap().expect("made past the cap");
    assert_eq!(shared.name(), sentinel_flow_core::node::PAST_MAX_ORIGINS);
    assert!(shared.is_past_cap());
    assert_eq!(shared.stats().pass_qps(sentinel.now_ms()), 2.0);
    assert!(crowded.origins().all(|o| o.name() != shared.name()));
}

#[test]
fn a_load_makes_no_node_and_an_entry_makes_each_once() {
    let (_clock, sentinel) = small_caps();
    fill_every_cap(&sentinel);
    let rules = vec![FlowRule::new("a", 0.0), FlowRule::new("b", 0.0)];
    sentinel.flow_rules().load(rules.clone()).unwrap();
    sentinel.flow_rules().load(rules).unwrap();
    // Another kind on the same names, and a manager load after a book load.
    let breaker = DegradeRule::new("a", DegradeGrade::ErrorCount, 5.0);
    load(&sentinel, [breaker]);
    assert_eq!(sentinel.caps().resources.reserved, 0, "no entry yet");
    assert_eq!(sentinel.caps().rule_names.used, 2);
    assert!(sentinel.resource_node("a").is_none());
    assert!(
        sentinel.entry("a").is_err(),
        "the rule applies past the cap"
    );
    assert!(sentinel.entry("a").is_err());
    let names = || {
        sentinel
            .resource_nodes()
            .filter(|n| n.name() == "a")
            .count()
    };
    assert_eq!(names(), 1);
    assert_eq!(sentinel.caps().resources.reserved, 1);

    // Dropping "b"'s rule before any entry used it leaves nothing: past
    // the full cap, "b" is now a name like any other.
    load(&sentinel, [FlowRule::new("a", 0.0)]);
    assert!(sentinel.is_reserved("a"));
    assert!(!sentinel.is_reserved("b"));
    let b = sentinel.entry("b").unwrap();
    assert!(!b.is_counted());
    drop(b);
    sentinel.flow_rules().load(Vec::new()).unwrap();
    assert!(sentinel.is_reserved("a"), "the degrade rule still names it");
    sentinel.degrade_rules().load(Vec::new()).unwrap();
    assert!(!sentinel.is_reserved("a"));
    // "a"'s node, made by its entries, stays (entries may still borrow it),
    // no longer named by rules.
    let a = sentinel.resource_node("a").expect("kept");
    assert!(!a.is_named_by_rules());
    assert_eq!(sentinel.caps().resources.reserved, 1);
    assert_eq!(sentinel.caps().rule_names.used, 0);
    assert_eq!(
        sentinel.resource_nodes().count(),
        51,
        "the 50 of the cap and \"a\""
    );
}

#[test]
fn a_handle_made_past_the_cap_finds_the_node_a_later_rule_made() {
    let (_clock, sentinel) = small_caps();
    fill_every_cap(&sentinel);
    let handle = sentinel.resource("late");
    assert!(handle.node().is_none());
    let before = sentinel.refused_resources();
    drop(handle.entry().unwrap());
    assert_eq!(sentinel.refused_resources(), before + 1);
    load(&sentinel, [FlowRule::new("late", 0.0)]);
    assert_eq!(blocked_kind(handle.entry()), BlockKind::Flow);
    assert_eq!(sentinel.refused_resources(), before + 1);
}

#[test]
fn past_the_context_cap_an_entry_is_checked_in_the_default_context() {
    let (_clock, sentinel) = small_caps();
    fill_every_cap(&sentinel);
    // "crowded" exists; its rule must hold whatever context is named.
    load(&sentinel, [FlowRule::new("crowded", 0.0)]);
    let entry = sentinel.entry_builder("crowded").context("ctx/new");
    assert_eq!(blocked_kind(entry.enter()), BlockKind::Flow);
    assert!(sentinel.context_node("ctx/new", "crowded").is_none());
    assert_eq!(sentinel.caps().contexts.refused, 91);
}

#[test]
fn names_over_the_length_limit_are_refused_by_rules_and_never_stored() {
    let (_clock, sentinel) = instance();
    assert_eq!(sentinel.max_name_len(), 1_024);
    let long = "r".repeat(1_025);

    let errors = sentinel
        .flow_rules()
        .load(vec![FlowRule::new(long.clone(), 0.0)])
        .unwrap_err();
    assert_eq!(errors.errors().len(), 1);
    assert_eq!(errors.errors()[0].field, "resource");
    assert_eq!(
        errors.errors()[0].message,
        "is 1025 bytes long, over the limit of 1024 (max_name_len)"
    );
    let mut relate = FlowRule::new("ok", 0.0);
    relate.strategy = FlowStrategy::Relate;
    relate.ref_resource = Some(long.clone());
    let mut by_origin = FlowRule::new("ok", 0.0);
    by_origin.limit_app = long.clone();
    let book = RuleBook {
        flow: vec![relate, by_origin],
        authority: vec![AuthorityRule::new(
            "ok",
            AuthorityStrategy::Black,
            [long.as_str()],
        )],
        degrade: vec![DegradeRule::new(
            long.clone(),
            DegradeGrade::ErrorCount,
            1.0,
        )],
        param_flow: vec![ParamFlowRule::new(long.clone(), 0, 1.0)],
        ..RuleBook::default()
    };
    let errors = sentinel.load_rule_book(book.clone()).unwrap_err();
    let fields: Vec<_> = errors
        .errors()
        .iter()
        .map(|e| (e.kind, e.index, e.field))
        .collect();
    assert_eq!(
        fields,
        // Kind by kind, in the chain's order (the book's fields).
        [
            ("authority", 0, "limit_app"),
            ("param_flow", 0, "resource"),
            ("flow", 0, "ref_resource"),
            ("flow", 1, "limit_app"),
            ("degrade", 0, "resource"),
        ]
    );
    assert!(sentinel.rule_book().flow.is_empty(), "nothing changed");
    assert_eq!(sentinel.resource_nodes().count(), 0);

    // An entry with a long name: unchecked, counted, not stored.
    let entry = sentinel.entry(&long).unwrap();
    assert!(!entry.is_counted());
    drop(entry);
    let huge = "x".repeat(1 << 20);
    drop(sentinel.entry(&huge).unwrap());
    drop(sentinel.entry_builder("ok").context(&long).enter().unwrap());
    drop(sentinel.entry_builder("ok").origin(&long).enter().unwrap());
    assert_eq!(sentinel.refused_resources(), 2);
    assert_eq!(sentinel.refused_contexts(), 1);
    assert_eq!(sentinel.refused_origins(), 1);
    assert_eq!(sentinel.resource_nodes().count(), 1, "only \"ok\"");

    // A larger limit takes the same names.
    let (_clock, roomy) = instance_with(|builder| builder.max_name_len(2_048));
    roomy.load_rule_book(book).unwrap();
    assert!(roomy.entry(&long).is_ok());
    assert!(roomy.resource_node(&long).is_some());
}

#[test]
fn a_concurrency_rule_on_a_reserved_resource_is_exact_under_threads() {
    let (_clock, sentinel) = small_caps();
    fill_every_cap(&sentinel);
    let rule = FlowRule {
        grade: FlowGrade::Concurrency,
        ..FlowRule::new("pool", 3.0)
    };
    sentinel.flow_rules().load(vec![rule]).unwrap();
    let held = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..10 {
                    if let Ok(entry) = sentinel.entry("pool") {
                        held.lock().unwrap().push(entry);
                    }
                }
            });
        }
    });
    assert_eq!(held.lock().unwrap().len(), 3);
}

#[cfg(feature = "prometheus")]
#[test]
fn refusals_are_exported_to_prometheus() {
    let (_clock, sentinel) = small_caps();
    fill_every_cap(&sentinel);
    use crate::support::prometheus::{key, parse};

    let (samples, _) = parse(&sentinel_flow_core::prometheus::render_prometheus(
        &sentinel,
    ));
    let get = |name: &str, labels: &[(&str, &str)]| samples[&key(name, labels)];
    let refused = sentinel.refused_resources();
    assert_eq!(get("sentinel_refused_resources_total", &[]), refused as f64);
    assert_eq!(get("sentinel_refused_contexts_total", &[]), 90.0);
    assert_eq!(get("sentinel_refused_origins_total", &[]), 95.0);
    let made_by_entries = [("cap", "resources"), ("made_by", "entries")];
    assert_eq!(get("sentinel_cap_used", &made_by_entries), 50.0);
    assert_eq!(get("sentinel_cap", &[("cap", "resources")]), 50.0);
}
