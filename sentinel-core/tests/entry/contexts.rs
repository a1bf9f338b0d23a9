//! Contexts and the invocation tree: context nodes, parents, the default
//! context's node.

use sentinel_flow_core::DEFAULT_CONTEXT;

use crate::support::instance;
use crate::{Oops, ctx_node, names, origin, res};

#[test]
fn named_context_counts_per_node_and_builds_the_tree() {
    let (clock, sentinel) = instance();
    let a = sentinel.entry_builder("A").context("web").enter().unwrap();
    // The context given to a nested entry is ignored: it joins its parent's.
    let b = sentinel
        .entry_builder("B")
        .parent(&a)
        .context("ignored")
        .batch_count(2)
        .enter()
        .unwrap();

    let web_a = ctx_node(&sentinel, "web", "A");
    let web_b = ctx_node(&sentinel, "web", "B");
    assert_eq!((web_a.total_pass, web_a.concurrency), (1, 1));
    assert_eq!((web_b.total_pass, web_b.concurrency), (2, 1));
    let entrance = sentinel
        .entrances()
        .into_iter()
        .find(|e| e.name() == "web")
        .unwrap();
    let snap = entrance.snapshot(sentinel.now_ms());
    assert_eq!(
        (snap.total_pass, snap.concurrency),
        (1, 1),
        "top nodes only"
    );

    clock.advance_ms(10);
    drop(b);
    clock.advance_ms(10);
    drop(a);

    let web_a = ctx_node(&sentinel, "web", "A");
    let web_b = ctx_node(&sentinel, "web", "B");
    assert_eq!(web_a.total_success, 1);
    assert_eq!(web_a.avg_rt, 20.0);
    assert_eq!(web_a.concurrency, 0);
    assert_eq!(web_b.total_success, 2);
    assert_eq!(web_b.avg_rt, 5.0);
    assert_eq!(web_b.concurrency, 0);

    // Neither entered the default context nor the ignored one.
    assert!(sentinel.context_node(DEFAULT_CONTEXT, "A").is_none());
    assert!(sentinel.context_node(DEFAULT_CONTEXT, "B").is_none());
    assert!(sentinel.context_node("ignored", "B").is_none());

    // The tree: default first, then web; web -> A -> B.
    let entrances = sentinel.entrances();
    let ctx_names: Vec<_> = entrances.iter().map(|e| e.name()).collect();
    assert_eq!(ctx_names, [DEFAULT_CONTEXT, "web"]);
    assert!(entrances[0].children().is_empty());
    let top = entrances[1].children();
    assert_eq!(names(&top), ["A"]);
    assert_eq!(top[0].context_name(), "web");
    assert!(!top[0].is_derived());
    assert!(top[0].stats().is_some());
    let under_a = top[0].children();
    assert_eq!(names(&under_a), ["B"]);
    assert_eq!(under_a[0].context_name(), "web");
    assert_eq!(under_a[0].snapshot(sentinel.now_ms()).total_pass, 2);
    assert!(under_a[0].children().is_empty());
}

#[test]
fn nested_entries_in_the_default_context_hang_under_their_parent() {
    let (_clock, sentinel) = instance();
    let a = sentinel.entry("A").unwrap();
    let b = sentinel.entry_builder("B").parent(&a).enter().unwrap();
    let c = sentinel.entry_builder("C").parent(&b).enter().unwrap();
    drop((c, b, a));
    let default = &sentinel.entrances()[0];
    assert_eq!(default.name(), DEFAULT_CONTEXT);
    let top = default.children();
    assert_eq!(names(&top), ["A"], "nested nodes are not at the top");
    assert!(top[0].is_derived());
    assert_eq!(names(&top[0].children()), ["B"]);
    assert_eq!(names(&top[0].children()[0].children()), ["C"]);
    assert_eq!(ctx_node(&sentinel, DEFAULT_CONTEXT, "C").total_pass, 1);
}

#[test]
fn a_node_hangs_under_every_parent_it_was_entered_from() {
    let (_clock, sentinel) = instance();
    let a = sentinel.entry_builder("A").context("web").enter().unwrap();
    drop(sentinel.entry_builder("C").parent(&a).enter().unwrap());
    drop(a);
    let b = sentinel.entry_builder("B").context("web").enter().unwrap();
    drop(sentinel.entry_builder("C").parent(&b).enter().unwrap());
    drop(b);
    // C, entered nested first, is later entered at the top of web too.
    drop(sentinel.entry_builder("C").context("web").enter().unwrap());

    let web = sentinel
        .entrances()
        .into_iter()
        .find(|e| e.name() == "web")
        .unwrap();
    let top = web.children();
    assert_eq!(names(&top), ["A", "B", "C"]);
    assert_eq!(names(&top[0].children()), ["C"]);
    assert_eq!(names(&top[1].children()), ["C"]);
    // One node per (context, resource): all three entries of C count on it.
    assert_eq!(ctx_node(&sentinel, "web", "C").total_pass, 3);
    assert_eq!(top[2].snapshot(sentinel.now_ms()).total_pass, 3);
}

#[test]
fn a_default_context_node_entered_nested_first_joins_the_top_when_entered_there() {
    let (_clock, sentinel) = instance();
    let a = sentinel.entry("A").unwrap();
    drop(sentinel.entry_builder("B").parent(&a).enter().unwrap());
    drop(a);
    // B is now entered at the top of the default context.
    drop(sentinel.entry("B").unwrap());
    assert_eq!(ctx_node(&sentinel, DEFAULT_CONTEXT, "B").total_pass, 2);

    let default = &sentinel.entrances()[0];
    // Regression: a default-context node first made by a nested entry must
    // still join the default entrance when a top-level entry uses it.
    assert_eq!(names(&default.children()), ["A", "B"]);
}

#[test]
fn default_context_node_is_the_resource_less_its_named_context_nodes() {
    let (clock, sentinel) = instance();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(sentinel.entry("R").unwrap());
    }
    for _ in 0..2 {
        held.push(sentinel.entry_builder("R").context("web").enter().unwrap());
    }
    let now = sentinel.now_ms();
    let default = sentinel.context_node(DEFAULT_CONTEXT, "R").unwrap();
    assert!(default.is_derived());
    assert!(default.stats().is_none());
    assert_eq!(default.context_name(), DEFAULT_CONTEXT);
    assert_eq!(default.resource_name(), "R");
    let d = default.snapshot(now);
    let w = ctx_node(&sentinel, "web", "R");
    let r = res(&sentinel, "R");
    assert_eq!((d.total_pass, d.concurrency, d.pass_qps), (3, 3, 3.0));
    assert_eq!((w.total_pass, w.concurrency, w.pass_qps), (2, 2, 2.0));
    assert_eq!((r.total_pass, r.concurrency, r.pass_qps), (5, 5, 5.0));

    // Exit one of each, 10 ms later, one of them with an error.
    clock.advance_ms(10);
    held[0].set_error(&Oops);
    let web_entry = held.pop().unwrap();
    drop(web_entry);
    drop(held.remove(0));
    let now = sentinel.now_ms();
    let d = sentinel
        .context_node(DEFAULT_CONTEXT, "R")
        .unwrap()
        .snapshot(now);
    let w = ctx_node(&sentinel, "web", "R");
    let r = res(&sentinel, "R");
    assert_eq!(
        (
            d.total_pass,
            d.total_success,
            d.total_exception,
            d.concurrency
        ),
        (3, 1, 1, 2)
    );
    assert_eq!(
        (
            w.total_pass,
            w.total_success,
            w.total_exception,
            w.concurrency
        ),
        (2, 1, 0, 1)
    );
    assert_eq!(
        (
            r.total_pass,
            r.total_success,
            r.total_exception,
            r.concurrency
        ),
        (5, 2, 1, 3)
    );
    assert_eq!(d.avg_rt, 10.0);
    drop(held);

    let d = sentinel
        .context_node(DEFAULT_CONTEXT, "R")
        .unwrap()
        .snapshot(sentinel.now_ms());
    assert_eq!((d.total_success, d.concurrency), (3, 0));
    assert_eq!(ctx_node(&sentinel, "web", "R").concurrency, 0);
    assert_eq!(res(&sentinel, "R").concurrency, 0);
}

#[test]
fn default_context_node_subtracts_every_named_context() {
    let (_clock, sentinel) = instance();
    for _ in 0..3 {
        drop(sentinel.entry("R").unwrap());
    }
    for _ in 0..2 {
        drop(sentinel.entry_builder("R").context("web").enter().unwrap());
    }
    let api = sentinel
        .entry_builder("api")
        .context("rpc")
        .enter()
        .unwrap();
    drop(
        sentinel
            .entry_builder("R")
            .parent(&api)
            .batch_count(4)
            .enter()
            .unwrap(),
    );
    drop(api);
    assert_eq!(res(&sentinel, "R").total_pass, 9);
    assert_eq!(ctx_node(&sentinel, DEFAULT_CONTEXT, "R").total_pass, 3);
    assert_eq!(ctx_node(&sentinel, "web", "R").total_pass, 2);
    assert_eq!(ctx_node(&sentinel, "rpc", "R").total_pass, 4);
    let default = &sentinel.entrances()[0];
    assert_eq!(default.snapshot(sentinel.now_ms()).total_pass, 3);
}

#[test]
fn an_uncounted_parent_is_ignored() {
    let (_clock, sentinel) = instance();
    sentinel.set_enabled(false);
    let parent = sentinel.entry_builder("A").context("web").enter().unwrap();
    sentinel.set_enabled(true);
    let child = sentinel
        .entry_builder("B")
        .parent(&parent)
        .context("api")
        .origin("app")
        .enter()
        .unwrap();
    assert!(child.is_counted());
    drop(child);
    drop(parent);
    assert_eq!(ctx_node(&sentinel, "api", "B").total_pass, 1);
    assert!(sentinel.context_node("web", "B").is_none());
    assert!(sentinel.resource_node("A").is_none());
    assert_eq!(origin(&sentinel, "B", "app").total_pass, 1);
}

#[test]
fn naming_the_default_context_is_the_default_context() {
    let (_clock, sentinel) = instance();
    drop(
        sentinel
            .entry_builder("A")
            .context(DEFAULT_CONTEXT)
            .enter()
            .unwrap(),
    );
    drop(sentinel.entry("A").unwrap());
    assert_eq!(sentinel.entrances().len(), 1);
    let d = ctx_node(&sentinel, DEFAULT_CONTEXT, "A");
    assert_eq!(d.total_pass, 2);
    assert_eq!(names(&sentinel.entrances()[0].children()), ["A"]);
}

#[test]
fn a_parent_from_another_instance_is_ignored() {
    let (_c1, one) = instance();
    let (_c2, two) = instance();
    let parent = one.entry_builder("A").context("web").enter().unwrap();
    let child = two.entry_builder("B").parent(&parent).enter().unwrap();
    assert!(child.is_counted());
    drop(child);
    drop(parent);
    assert_eq!(ctx_node(&two, DEFAULT_CONTEXT, "B").total_pass, 1);
    assert!(two.context_node("web", "B").is_none());
    assert!(one.resource_node("B").is_none());
    assert!(two.resource_node("A").is_none());
}
