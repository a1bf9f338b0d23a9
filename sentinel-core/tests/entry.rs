//! Integration tests of the entry API: counting on resource, context, origin
//! and inbound nodes, the invocation tree, the caps, the switch, user slots,
//! `Resource` handles, entries across threads and futures, and concurrency.
//!
//! Every test builds its own [`Sentinel`] on a [`ManualClock`] (one small test
//! touches the global instance, on a resource name no other test uses).

use std::fmt;
use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, Barrier, Mutex};
use std::task::{Context, Poll, Waker};

use sentinel_flow_core::node::{ContextNode, NodeSnapshot};
use sentinel_flow_core::slot::{self, EntryContext, ExitContext, Slot};
use sentinel_flow_core::stat::{StatConfig, WindowShape};
use sentinel_flow_core::{
    BlockError, BlockKind, DEFAULT_CONTEXT, Entry, EntryType, ParamValue, Sentinel,
};

mod support;
use support::{T0, instance, instance_with};

/// Everything the resource node of `name` reports now.
fn res(sentinel: &Sentinel, name: &str) -> NodeSnapshot {
    sentinel
        .resource_node(name)
        .unwrap_or_else(|| panic!("no resource node for {name}"))
        .stats()
        .snapshot(sentinel.now_ms())
}

/// Everything the node of `name` in `context` reports now.
fn ctx_node(sentinel: &Sentinel, context: &str, name: &str) -> NodeSnapshot {
    sentinel
        .context_node(context, name)
        .unwrap_or_else(|| panic!("no node for {name} in {context}"))
        .snapshot(sentinel.now_ms())
}

fn origin(sentinel: &Sentinel, name: &str, origin: &str) -> NodeSnapshot {
    sentinel
        .resource_node(name)
        .unwrap()
        .find_origin(origin)
        .unwrap_or_else(|| panic!("no origin node {origin} on {name}"))
        .stats()
        .snapshot(sentinel.now_ms())
}

fn names(nodes: &[ContextNode<'_>]) -> Vec<String> {
    nodes.iter().map(|n| n.resource_name().to_owned()).collect()
}

#[derive(Debug)]
struct Oops;

impl fmt::Display for Oops {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("oops")
    }
}

impl std::error::Error for Oops {}

// ---- 1. pass, success, response time ----

#[test]
fn drop_counts_pass_success_and_rt() {
    let (clock, sentinel) = instance();
    let entry = sentinel.entry("A").unwrap();
    assert!(entry.is_counted());
    assert_eq!(entry.resource_name(), Some("A"));
    let s = res(&sentinel, "A");
    assert_eq!(s.total_pass, 1);
    assert_eq!(s.total_success, 0);
    assert_eq!(s.concurrency, 1);
    assert_eq!(s.pass_qps, 1.0);

    clock.advance_ms(12);
    drop(entry);

    let now = sentinel.now_ms();
    let stats = sentinel.resource_node("A").unwrap().stats();
    assert_eq!(stats.total_pass(now), 1);
    assert_eq!(stats.total_success(now), 1);
    assert_eq!(stats.total_exception(now), 0);
    assert_eq!(stats.total_block(now), 0);
    assert_eq!(stats.avg_rt(now), 12.0);
    assert_eq!(stats.min_rt(now), 12);
    assert_eq!(stats.success_qps(now), 1.0);
    assert_eq!(stats.cur_concurrency(), 0);
}

#[test]
fn explicit_exit_is_the_same_as_drop() {
    let (clock, sentinel) = instance();
    let entry = sentinel.entry("A").unwrap();
    clock.advance_ms(12);
    entry.exit();
    let s = res(&sentinel, "A");
    assert_eq!(s.total_pass, 1);
    assert_eq!(s.total_success, 1);
    assert_eq!(s.avg_rt, 12.0);
    assert_eq!(s.min_rt, 12);
    assert_eq!(s.concurrency, 0);
}

#[test]
fn response_times_average_over_entries_and_are_capped() {
    let (clock, sentinel) = instance();
    for rt in [10, 20, 30] {
        let entry = sentinel.entry("A").unwrap();
        clock.advance_ms(rt);
        drop(entry);
    }
    let s = res(&sentinel, "A");
    assert_eq!(s.total_success, 3);
    assert_eq!(s.avg_rt, 20.0);
    assert_eq!(s.min_rt, 10);

    // A call longer than the default ceiling (5 000 ms) is recorded as it.
    let entry = sentinel.entry("slow").unwrap();
    clock.advance_ms(7_000);
    drop(entry);
    let s = res(&sentinel, "slow");
    assert_eq!(s.avg_rt, 5_000.0);
    assert_eq!(s.total_pass, 1);
    assert_eq!(s.pass_qps, 0.0, "the pass left the second window");
    assert_eq!(s.success_qps, 1.0);
}

#[test]
fn a_clock_set_back_reads_as_standing_still() {
    let (clock, sentinel) = instance();
    clock.advance_ms(100);
    let entry = sentinel.entry("A").unwrap();
    clock.set(T0);
    assert_eq!(sentinel.now_ms(), T0 + 100);
    drop(entry);
    let s = res(&sentinel, "A");
    assert_eq!((s.total_success, s.avg_rt, s.concurrency), (1, 0.0, 0));
    assert_eq!(s.min_rt, 1, "min RT is at least 1");
}

#[test]
fn an_entry_describes_itself() {
    let (_clock, sentinel) = instance();
    let entry = sentinel
        .entry_builder("A")
        .context("web")
        .origin("app")
        .entry_type(EntryType::Inbound)
        .batch_count(2)
        .enter()
        .unwrap();
    entry.set_error(&Oops);
    assert_eq!(
        format!("{entry:?}"),
        format!(
            "Entry {{ resource: \"A\", context: \"web\", origin: \"app\", \
             entry_type: Inbound, batch: 2, start_ms: {T0}, error: true }}"
        )
    );
}

// ---- 2. batch count ----

#[test]
fn batch_count_counts_pass_and_success_by_the_batch() {
    let (clock, sentinel) = instance();
    let entry = sentinel.entry_builder("A").batch_count(3).enter().unwrap();
    let s = res(&sentinel, "A");
    assert_eq!(s.total_pass, 3);
    assert_eq!(s.pass_qps, 3.0);
    assert_eq!(s.concurrency, 1, "concurrency counts calls, not permits");
    clock.advance_ms(12);
    drop(entry);
    let s = res(&sentinel, "A");
    assert_eq!(s.total_pass, 3);
    assert_eq!(s.total_success, 3);
    assert_eq!(s.success_qps, 3.0);
    // One response time for 3 successes, as Sentinel's addRtAndSuccess.
    assert_eq!(s.avg_rt, 4.0);
    assert_eq!(s.concurrency, 0);
}

#[test]
fn batch_count_zero_is_one() {
    let (_clock, sentinel) = instance();
    drop(sentinel.entry_builder("A").batch_count(0).enter().unwrap());
    let s = res(&sentinel, "A");
    assert_eq!(s.total_pass, 1);
    assert_eq!(s.total_success, 1);
}

// ---- 3. errors ----

#[test]
fn errors_count_once_per_entry_with_its_batch() {
    let (_clock, sentinel) = instance();
    let entry = sentinel.entry_builder("A").batch_count(3).enter().unwrap();
    assert!(!entry.has_error());
    entry.set_error(&Oops);
    entry.set_error("a second error");
    sentinel_flow_core::trace_error(&entry, &Oops as &dyn std::error::Error);
    assert!(entry.has_error());
    assert_eq!(res(&sentinel, "A").total_exception, 0, "counted on exit");
    drop(entry);

    let clean = sentinel.entry("A").unwrap();
    drop(clean);

    let traced = sentinel.entry("A").unwrap();
    sentinel_flow_core::trace_error(&traced, &Oops);
    assert!(traced.has_error());
    drop(traced);

    let s = res(&sentinel, "A");
    assert_eq!(s.total_pass, 5);
    assert_eq!(s.total_success, 5);
    assert_eq!(s.total_exception, 4);
    assert_eq!(s.exception_qps, 4.0);
}

#[test]
fn errors_count_on_every_node_of_the_entry() {
    let (_clock, sentinel) = instance();
    let entry = sentinel
        .entry_builder("A")
        .entry_type(EntryType::Inbound)
        .origin("app")
        .context("web")
        .batch_count(2)
        .enter()
        .unwrap();
    entry.set_error(&Oops);
    drop(entry);
    assert_eq!(res(&sentinel, "A").total_exception, 2);
    assert_eq!(ctx_node(&sentinel, "web", "A").total_exception, 2);
    assert_eq!(origin(&sentinel, "A", "app").total_exception, 2);
    let inbound = sentinel.inbound_node();
    assert_eq!(inbound.total_exception(sentinel.now_ms()), 2);
}

// ---- 4. inbound and outbound ----

#[test]
fn only_inbound_entries_count_on_the_inbound_node() {
    let (clock, sentinel) = instance();
    let inbound = sentinel
        .entry_builder("in")
        .entry_type(EntryType::Inbound)
        .batch_count(2)
        .enter()
        .unwrap();
    let outbound = sentinel.entry("out").unwrap(); // outbound by default
    let explicit = sentinel
        .entry_builder("out")
        .entry_type(EntryType::Outbound)
        .enter()
        .unwrap();
    let node = sentinel.inbound_node();
    assert_eq!(node.cur_concurrency(), 1);
    assert_eq!(node.total_pass(sentinel.now_ms()), 2);
    clock.advance_ms(8);
    drop((inbound, outbound, explicit));

    let now = sentinel.now_ms();
    assert_eq!(EntryType::default(), EntryType::Outbound);
    assert_eq!(node.total_pass(now), 2);
    assert_eq!(node.total_success(now), 2);
    assert_eq!(node.avg_rt(now), 4.0);
    assert_eq!(node.cur_concurrency(), 0);
    assert_eq!(res(&sentinel, "out").total_pass, 2);
    assert_eq!(res(&sentinel, "in").total_pass, 2);
}

// ---- 5. origins ----

#[test]
fn origin_counts_on_the_origin_node() {
    let (clock, sentinel) = instance();
    let a = sentinel.entry_builder("A").origin("app").enter().unwrap();
    assert_eq!(origin(&sentinel, "A", "app").concurrency, 1);
    clock.advance_ms(5);
    drop(a);
    drop(
        sentinel
            .entry_builder("A")
            .origin("app")
            .batch_count(2)
            .enter()
            .unwrap(),
    );
    drop(sentinel.entry_builder("A").origin("other").enter().unwrap());
    drop(sentinel.entry("A").unwrap());

    let app = origin(&sentinel, "A", "app");
    assert_eq!(app.total_pass, 3);
    assert_eq!(app.total_success, 3);
    assert_eq!(app.concurrency, 0);
    assert_eq!(origin(&sentinel, "A", "other").total_pass, 1);
    assert_eq!(res(&sentinel, "A").total_pass, 5);
    let node = sentinel.resource_node("A").unwrap();
    let origins: Vec<_> = node.origins().map(|o| o.name().to_owned()).collect();
    assert_eq!(origins, ["app", "other"]);
    assert_eq!(node.find_origin("app").unwrap().name(), "app");
    assert!(node.find_origin("nobody").is_none());
}

#[test]
fn empty_origin_makes_no_origin_node() {
    let (_clock, sentinel) = instance();
    drop(sentinel.entry_builder("A").origin("").enter().unwrap());
    drop(sentinel.entry("A").unwrap());
    let node = sentinel.resource_node("A").unwrap();
    assert_eq!(node.origins().count(), 0);
    assert!(node.find_origin("").is_none());
    assert_eq!(node.refused_origins(), 0);
    assert_eq!(res(&sentinel, "A").total_pass, 2);
}

#[test]
fn nested_entry_inherits_its_parents_origin_unless_given() {
    let (_clock, sentinel) = instance();
    let parent = sentinel.entry_builder("A").origin("app").enter().unwrap();
    let inherits = sentinel.entry_builder("B").parent(&parent).enter().unwrap();
    let own = sentinel
        .entry_builder("C")
        .parent(&parent)
        .origin("mine")
        .enter()
        .unwrap();
    drop((inherits, own));
    drop(parent);
    assert_eq!(origin(&sentinel, "B", "app").total_pass, 1);
    assert_eq!(origin(&sentinel, "C", "mine").total_pass, 1);
    let c = sentinel.resource_node("C").unwrap();
    assert!(c.find_origin("app").is_none());
    assert_eq!(c.origins().count(), 1);
}

// ---- 6. contexts and the invocation tree ----

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

// ---- 7. caps ----

#[test]
fn resources_past_the_cap_pass_uncounted() {
    let (_clock, sentinel) = instance_with(|builder| builder.max_resources(2));
    drop(sentinel.entry("a").unwrap());
    drop(sentinel.entry("b").unwrap());
    assert_eq!(sentinel.refused_resources(), 0);

    let c = sentinel.entry("c").unwrap();
    assert!(!c.is_counted());
    assert_eq!(c.resource_name(), None);
    assert_eq!(format!("{c:?}"), "Entry(uncounted)");
    c.set_error(&Oops);
    assert!(!c.has_error(), "nothing is recorded on an uncounted entry");
    drop(c);
    drop(sentinel.entry_builder("c").batch_count(5).enter().unwrap());
    drop(sentinel.entry("d").unwrap());
    assert_eq!(sentinel.refused_resources(), 3);
    assert!(sentinel.resource_node("c").is_none());
    assert!(sentinel.resource_node("d").is_none());
    assert!(sentinel.context_node(DEFAULT_CONTEXT, "c").is_none());
    let all: Vec<_> = sentinel
        .resource_nodes()
        .map(|r| r.name().to_owned())
        .collect();
    assert_eq!(all, ["a", "b"]);
    assert_eq!(names(&sentinel.entrances()[0].children()), ["a", "b"]);

    // Existing resources are still counted.
    let a = sentinel.entry("a").unwrap();
    assert!(a.is_counted());
    drop(a);
    assert_eq!(res(&sentinel, "a").total_pass, 2);
    assert_eq!(res(&sentinel, "b").total_pass, 1);
    assert_eq!(sentinel.refused_resources(), 3);
}

#[test]
fn contexts_past_the_cap_run_in_the_default_context() {
    let (_clock, sentinel) = instance_with(|builder| builder.max_contexts(1));
    drop(sentinel.entry_builder("A").context("web").enter().unwrap());
    // Past the cap the entry still counts (and is checked) on its
    // resource, in the default context, so a full context cap never
    // switches a resource's rules off.
    let refused = sentinel.entry_builder("A").context("api").enter().unwrap();
    assert!(refused.is_counted());
    drop(refused);
    drop(sentinel.entry_builder("B").context("api").enter().unwrap());
    assert_eq!(sentinel.refused_contexts(), 2);

    // The default context is not a named one: it still works.
    drop(sentinel.entry("A").unwrap());
    drop(sentinel.entry_builder("A").context("web").enter().unwrap());
    assert_eq!(sentinel.refused_contexts(), 2);

    let r = res(&sentinel, "A");
    assert_eq!(r.total_pass, 4);
    assert_eq!(ctx_node(&sentinel, "web", "A").total_pass, 2);
    assert_eq!(ctx_node(&sentinel, DEFAULT_CONTEXT, "A").total_pass, 2);
    assert!(sentinel.context_node("api", "A").is_none());
    let ctx_names: Vec<_> = sentinel.entrances().iter().map(|e| e.name()).collect();
    assert_eq!(ctx_names, [DEFAULT_CONTEXT, "web"]);
    assert_eq!(res(&sentinel, "B").total_pass, 1);
    assert_eq!(ctx_node(&sentinel, DEFAULT_CONTEXT, "B").total_pass, 1);
}

#[test]
fn origins_past_the_cap_count_on_the_resource_and_a_shared_node() {
    let (_clock, sentinel) = instance_with(|builder| builder.max_origins(1));
    drop(sentinel.entry_builder("A").origin("first").enter().unwrap());
    let second = sentinel
        .entry_builder("A")
        .origin("second")
        .enter()
        .unwrap();
    assert!(second.is_counted());
    drop(second);
    drop(
        sentinel
            .entry_builder("A")
            .origin("second")
            .enter()
            .unwrap(),
    );
    drop(sentinel.entry_builder("A").origin("first").enter().unwrap());
    // The cap is per resource.
    drop(
        sentinel
            .entry_builder("B")
            .origin("second")
            .enter()
            .unwrap(),
    );

    let a = sentinel.resource_node("A").unwrap();
    assert!(a.find_origin("second").is_none());
    assert_eq!(a.refused_origins(), 2);
    assert_eq!(origin(&sentinel, "A", "first").total_pass, 2);
    assert_eq!(res(&sentinel, "A").total_pass, 4);
    assert_eq!(res(&sentinel, "A").total_success, 4);
    assert_eq!(origin(&sentinel, "B", "second").total_pass, 1);
    // The origins past the cap share one node.
    let shared = a.origins_past_cap().expect("an origin came past the cap");
    assert_eq!(shared.stats().total_pass(sentinel.now_ms()), 2);
    assert!(
        sentinel
            .resource_node("B")
            .unwrap()
            .origins_past_cap()
            .is_none()
    );
}

#[test]
fn a_handle_past_the_cap_passes_uncounted() {
    let (_clock, sentinel) = instance_with(|builder| builder.max_resources(1));
    let a = sentinel.resource("a");
    assert!(a.node().is_some());
    let c = sentinel.resource("c");
    assert!(c.node().is_none());
    assert_eq!(c.name(), "c");
    let entry = c.entry().unwrap();
    assert!(!entry.is_counted());
    drop(entry);
    drop(c.builder().batch_count(2).enter().unwrap());
    drop(a.entry().unwrap());
    assert!(sentinel.resource_node("c").is_none());
    assert_eq!(res(&sentinel, "a").total_pass, 1);
    // Regression: a handle made past the cap counts one refusal per entry,
    // not one more for making the handle.
    assert_eq!(sentinel.refused_resources(), 2);
}

// ---- 8. the switch ----

#[test]
fn disabled_instance_passes_everything_uncounted() {
    let (_clock, sentinel) = instance_with(|builder| builder.slot(BlockAll));
    assert!(sentinel.is_enabled());
    assert!(sentinel.entry("A").is_err());

    sentinel.set_enabled(false);
    assert!(!sentinel.is_enabled());
    let entry = sentinel.entry("A").unwrap();
    assert!(!entry.is_counted());
    drop(entry);
    drop(sentinel.entry("B").unwrap());
    drop(
        sentinel
            .entry_builder("A")
            .entry_type(EntryType::Inbound)
            .context("web")
            .origin("app")
            .enter()
            .unwrap(),
    );
    let s = res(&sentinel, "A");
    assert_eq!((s.total_pass, s.total_block), (0, 1));
    assert!(sentinel.resource_node("B").is_none(), "nothing was made");
    assert_eq!(sentinel.entrances().len(), 1);
    assert_eq!(sentinel.inbound_node().total_request(sentinel.now_ms()), 0);
}

#[test]
fn re_enabling_counts_again_and_held_entries_count_their_exit() {
    let (clock, sentinel) = instance();
    let before = sentinel.entry("A").unwrap();
    sentinel.set_enabled(false);
    let during = sentinel.entry("A").unwrap();
    clock.advance_ms(6);
    drop(before);
    drop(during);
    let s = res(&sentinel, "A");
    assert_eq!((s.total_pass, s.total_success, s.concurrency), (1, 1, 0));
    assert_eq!(s.avg_rt, 6.0);

    sentinel.set_enabled(true);
    drop(sentinel.entry("A").unwrap());
    let s = res(&sentinel, "A");
    assert_eq!((s.total_pass, s.total_success, s.concurrency), (2, 2, 0));
}

// ---- 9. user slots ----

/// Blocks every entry, among the checks.
#[derive(Debug)]
struct BlockAll;

impl Slot for BlockAll {
    fn order(&self) -> i32 {
        slot::order::FLOW
    }
    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        Err(ctx.block(BlockKind::Custom("all")))
    }
}

/// Blocks entries carrying the argument `bad`, or from origin `evil`.
#[derive(Debug)]
struct Guard {
    order: i32,
}

impl Slot for Guard {
    fn order(&self) -> i32 {
        self.order
    }
    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        if ctx.args().contains(&ParamValue::from("bad")) {
            return Err(ctx.block(BlockKind::Custom("bad_arg")));
        }
        if ctx.origin() == "evil" {
            return Err(ctx.block(BlockKind::Custom("evil_origin")));
        }
        Ok(())
    }
}

#[test]
fn a_slot_among_the_checks_blocks_and_the_block_is_counted() {
    let (_clock, sentinel) = instance_with(|builder| {
        builder.slot(Guard {
            order: slot::order::FLOW,
        })
    });
    let bad = [ParamValue::from(1), ParamValue::from("bad")];
    let good = [ParamValue::from(1), ParamValue::from("good")];

    let err = sentinel.entry_builder("A").args(&bad).enter().unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("bad_arg"));
    assert_eq!(err.kind().as_str(), "bad_arg");
    assert_eq!(err.resource(), "A");
    assert!(err.rule().is_none());
    assert_eq!(err.to_string(), "blocked by bad_arg on resource `A`");
    let dyn_err: &dyn std::error::Error = &err;
    assert!(dyn_err.source().is_none());

    let s = res(&sentinel, "A");
    assert_eq!((s.total_pass, s.total_block, s.block_qps), (0, 1, 1.0));
    assert_eq!((s.total_success, s.concurrency, s.pass_qps), (0, 0, 0.0));

    // A batch is blocked by its count, on every node of the entry.
    let err = sentinel
        .entry_builder("A")
        .args(&bad)
        .batch_count(3)
        .context("web")
        .origin("app")
        .entry_type(EntryType::Inbound)
        .enter()
        .unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("bad_arg"));
    assert_eq!(res(&sentinel, "A").total_block, 4);
    let web = ctx_node(&sentinel, "web", "A");
    assert_eq!((web.total_block, web.total_pass), (3, 0));
    assert_eq!(origin(&sentinel, "A", "app").total_block, 3);
    assert_eq!(sentinel.inbound_node().total_block(sentinel.now_ms()), 3);
    assert_eq!(sentinel.inbound_node().total_pass(sentinel.now_ms()), 0);
    assert_eq!(ctx_node(&sentinel, DEFAULT_CONTEXT, "A").total_block, 1);

    // By origin.
    let err = sentinel
        .entry_builder("A")
        .origin("evil")
        .enter()
        .unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("evil_origin"));
    assert_eq!(err.to_string(), "blocked by evil_origin on resource `A`");
    assert_eq!(origin(&sentinel, "A", "evil").total_block, 1);

    // Others pass.
    drop(sentinel.entry_builder("A").args(&good).enter().unwrap());
    drop(sentinel.entry_builder("A").origin("app").enter().unwrap());
    let s = res(&sentinel, "A");
    assert_eq!((s.total_pass, s.total_block, s.concurrency), (2, 5, 0));
    assert_eq!(s.block_qps, 5.0);
}

#[test]
fn a_slot_sees_the_inherited_origin_of_a_nested_entry() {
    let (_clock, sentinel) = instance_with(|builder| builder.slot(EvilOnDb));
    let api = sentinel
        .entry_builder("api")
        .origin("evil")
        .enter()
        .unwrap();
    let err = sentinel
        .entry_builder("db")
        .parent(&api)
        .enter()
        .unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("evil_on_db"));
    assert_eq!(err.resource(), "db");
    drop(api);
    assert_eq!(res(&sentinel, "db").total_block, 1);
    assert_eq!(origin(&sentinel, "db", "evil").total_block, 1);
    assert_eq!(res(&sentinel, "api").total_pass, 1);
}

#[derive(Debug)]
struct EvilOnDb;

impl Slot for EvilOnDb {
    fn order(&self) -> i32 {
        slot::order::AUTHORITY
    }
    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        if ctx.resource_name() == "db" && ctx.origin() == "evil" {
            return Err(ctx.block(BlockKind::Custom("evil_on_db")));
        }
        Ok(())
    }
}

#[test]
fn a_block_before_the_statistic_slot_is_not_counted() {
    let (_clock, sentinel) = instance_with(|builder| {
        builder.slot(Guard {
            order: slot::order::STATISTIC - 1,
        })
    });
    let bad = [ParamValue::from("bad")];
    let err = sentinel
        .entry_builder("A")
        .args(&bad)
        .entry_type(EntryType::Inbound)
        .origin("app")
        .context("web")
        .enter()
        .unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("bad_arg"));
    let s = res(&sentinel, "A");
    assert_eq!((s.total_pass, s.total_block, s.block_qps), (0, 0, 0.0));
    assert_eq!(ctx_node(&sentinel, "web", "A").total_block, 0);
    assert_eq!(origin(&sentinel, "A", "app").total_block, 0);
    assert_eq!(sentinel.inbound_node().total_block(sentinel.now_ms()), 0);
    drop(sentinel.entry("A").unwrap());
    assert_eq!(res(&sentinel, "A").total_pass, 1);
}

#[test]
fn a_block_at_the_statistic_order_is_counted() {
    let (_clock, sentinel) = instance_with(|builder| {
        builder.slot(Guard {
            order: slot::order::STATISTIC,
        })
    });
    let bad = [ParamValue::from("bad")];
    assert!(sentinel.entry_builder("A").args(&bad).enter().is_err());
    assert_eq!(res(&sentinel, "A").total_block, 1);
}

/// Records its entries and exits into a shared log.
#[derive(Debug)]
struct Recorder {
    name: &'static str,
    order: i32,
    block: bool,
    log: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn new(name: &'static str, order: i32, log: &Arc<Mutex<Vec<String>>>) -> Self {
        Recorder {
            name,
            order,
            block: false,
            log: log.clone(),
        }
    }

    fn blocking(mut self) -> Self {
        self.block = true;
        self
    }
}

impl Slot for Recorder {
    fn order(&self) -> i32 {
        self.order
    }
    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        self.log
            .lock()
            .unwrap()
            .push(format!("entry {}", self.name));
        if self.block {
            return Err(ctx.block(BlockKind::Custom(self.name)));
        }
        Ok(())
    }
    fn exit(&self, ctx: &ExitContext<'_>) {
        self.log.lock().unwrap().push(format!(
            "exit {} rt={} error={}",
            self.name,
            ctx.rt_ms(),
            ctx.has_error()
        ));
    }
}

fn take(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

#[test]
fn slots_run_by_order_and_see_exits() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (clock, sentinel) = instance_with(|builder| {
        builder
            .slot(Recorder::new("max", i32::MAX, &log))
            .slot(Recorder::new("flow", slot::order::FLOW, &log))
            .slot(Recorder::new("auth", slot::order::AUTHORITY + 1, &log))
            .slot(Recorder::new("pre", slot::order::STATISTIC - 1, &log))
            .slot(Recorder::new("flow2", slot::order::FLOW, &log))
            .slot(Recorder::new("degrade", slot::order::DEGRADE + 1, &log))
            .slot(Recorder::new("min", i32::MIN, &log))
    });
    let entry = sentinel.entry("A").unwrap();
    assert_eq!(
        take(&log),
        [
            "entry min",
            "entry pre",
            "entry auth",
            "entry flow",
            "entry flow2",
            "entry degrade",
            "entry max"
        ]
    );
    clock.advance_ms(9);
    entry.set_error(&Oops);
    drop(entry);
    assert_eq!(
        take(&log),
        [
            "exit min rt=9 error=true",
            "exit pre rt=9 error=true",
            "exit auth rt=9 error=true",
            "exit flow rt=9 error=true",
            "exit flow2 rt=9 error=true",
            "exit degrade rt=9 error=true",
            "exit max rt=9 error=true"
        ]
    );
    drop(sentinel.entry("A").unwrap());
    assert!(take(&log).contains(&"exit flow rt=0 error=false".to_owned()));
}

#[test]
fn the_first_block_wins() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (_clock, sentinel) = instance_with(|builder| {
        builder
            .slot(Recorder::new("late", slot::order::DEGRADE, &log).blocking())
            .slot(Recorder::new("early", slot::order::SYSTEM, &log).blocking())
            .slot(Recorder::new("first", slot::order::AUTHORITY, &log))
    });
    let err = sentinel.entry("A").unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("early"));
    assert_eq!(
        take(&log),
        ["entry first", "entry early"],
        "no exit for a block"
    );
    assert_eq!(res(&sentinel, "A").total_block, 1);
}

#[test]
fn a_block_before_the_statistic_slot_skips_the_checks() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (_clock, sentinel) = instance_with(|builder| {
        builder
            .slot(Recorder::new("check", slot::order::FLOW, &log))
            .slot(Recorder::new("pre", slot::order::NODE_SELECTOR, &log).blocking())
    });
    let err = sentinel.entry("A").unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("pre"));
    assert_eq!(take(&log), ["entry pre"]);
    assert_eq!(res(&sentinel, "A").total_block, 0);
}

/// Checks what a slot sees of an entry and of its exit.
#[derive(Debug)]
struct Inspector {
    seen: Arc<Mutex<Vec<String>>>,
}

impl Slot for Inspector {
    fn order(&self) -> i32 {
        slot::order::FLOW
    }
    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        let now = ctx.now_ms();
        self.seen.lock().unwrap().push(format!(
            "entry {} {:?} batch={} origin={} node={} ctx={} ctx_stats={} args={:?} now={} passed_before={}",
            ctx.resource_name(),
            ctx.entry_type(),
            ctx.batch_count(),
            ctx.origin(),
            ctx.origin_node().map_or("-", |o| o.name()),
            ctx.context_name(),
            ctx.context_stats().is_some(),
            ctx.args(),
            now - T0,
            ctx.resource().stats().total_pass(now),
        ));
        Ok(())
    }
    fn exit(&self, ctx: &ExitContext<'_>) {
        let now = ctx.now_ms();
        let stats = ctx.resource().stats();
        self.seen.lock().unwrap().push(format!(
            "exit {} {:?} batch={} origin={} rt={} now={} success={} concurrency={}",
            ctx.resource_name(),
            ctx.entry_type(),
            ctx.batch_count(),
            ctx.origin(),
            ctx.rt_ms(),
            now - T0,
            stats.total_success(now),
            stats.cur_concurrency(),
        ));
    }
}

#[test]
fn slots_see_the_entry_and_its_exit() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (clock, sentinel) = instance_with(|builder| builder.slot(Inspector { seen: seen.clone() }));
    let args = [ParamValue::from(7u8), ParamValue::from("x")];
    let entry = sentinel
        .entry_builder("A")
        .entry_type(EntryType::Inbound)
        .batch_count(2)
        .origin("app")
        .context("web")
        .args(&args)
        .enter()
        .unwrap();
    clock.advance_ms(4);
    drop(entry);
    drop(sentinel.entry("A").unwrap());
    assert_eq!(
        take(&seen),
        [
            "entry A Inbound batch=2 origin=app node=app ctx=web ctx_stats=true args=[7, \"x\"] now=0 passed_before=0",
            "exit A Inbound batch=2 origin=app rt=4 now=4 success=2 concurrency=0",
            "entry A Outbound batch=1 origin= node=- ctx=sentinel_default_context ctx_stats=false args=[] now=4 passed_before=2",
            "exit A Outbound batch=1 origin= rt=0 now=4 success=3 concurrency=0",
        ]
    );
}

/// Records the origin each entry and exit shows.
#[derive(Debug)]
struct OriginLog(Arc<Mutex<Vec<String>>>);

impl Slot for OriginLog {
    fn order(&self) -> i32 {
        slot::order::AUTHORITY
    }
    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        let line = format!("entry {} origin={:?}", ctx.resource_name(), ctx.origin());
        self.0.lock().unwrap().push(line);
        Ok(())
    }
    fn exit(&self, ctx: &ExitContext<'_>) {
        let line = format!("exit {} origin={:?}", ctx.resource_name(), ctx.origin());
        self.0.lock().unwrap().push(line);
    }
}

#[test]
fn slots_see_the_origin_under_the_origin_cap() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (_clock, sentinel) = instance_with(|builder| builder.slot(OriginLog(log.clone())));
    let parent = sentinel.entry_builder("api").origin("app").enter().unwrap();
    drop(
        sentinel
            .entry_builder("db")
            .parent(&parent)
            .enter()
            .unwrap(),
    );
    drop(parent);
    assert_eq!(
        take(&log),
        [
            "entry api origin=\"app\"",
            "entry db origin=\"app\"",
            "exit db origin=\"app\"",
            "exit api origin=\"app\"",
        ]
    );
}

#[test]
fn slots_see_the_origin_past_the_origin_cap() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (_clock, sentinel) =
        instance_with(|builder| builder.max_origins(0).slot(OriginLog(log.clone())));
    let parent = sentinel.entry_builder("api").origin("app").enter().unwrap();
    drop(
        sentinel
            .entry_builder("db")
            .parent(&parent)
            .enter()
            .unwrap(),
    );
    drop(parent);
    assert_eq!(sentinel.resource_node("api").unwrap().refused_origins(), 1);
    // Regression: past `max_origins` the origin has no node, but the exit and
    // nested entries still see its name.
    assert_eq!(
        take(&log),
        [
            "entry api origin=\"app\"",
            "entry db origin=\"app\"",
            "exit db origin=\"app\"",
            "exit api origin=\"app\"",
        ]
    );
}

// ---- 10. Resource handles ----

#[test]
fn a_handle_counts_on_the_same_node_as_entries_by_name() {
    let (clock, sentinel) = instance();
    let handle = sentinel.resource("r");
    assert_eq!(handle.name(), "r");
    let node = handle.node().unwrap();
    assert!(std::ptr::eq(node, sentinel.resource_node("r").unwrap()));
    assert_eq!(node.name(), "r");

    let e1 = handle.entry().unwrap();
    assert_eq!(e1.resource_name(), Some("r"));
    let e2 = handle.builder().batch_count(2).enter().unwrap();
    let e3 = sentinel.entry("r").unwrap();
    let e4 = handle
        .builder()
        .context("web")
        .origin("app")
        .entry_type(EntryType::Inbound)
        .enter()
        .unwrap();
    assert_eq!(node.stats().cur_concurrency(), 4);
    clock.advance_ms(3);
    drop((e1, e2, e3, e4));

    let s = res(&sentinel, "r");
    assert_eq!((s.total_pass, s.total_success, s.concurrency), (5, 5, 0));
    assert_eq!(ctx_node(&sentinel, DEFAULT_CONTEXT, "r").total_pass, 4);
    assert_eq!(ctx_node(&sentinel, "web", "r").total_pass, 1);
    assert_eq!(origin(&sentinel, "r", "app").total_pass, 1);
    assert_eq!(sentinel.inbound_node().total_pass(sentinel.now_ms()), 1);
    assert_eq!(sentinel.resource_nodes().count(), 1);

    let clone = handle.clone();
    drop(clone.entry().unwrap());
    assert_eq!(res(&sentinel, "r").total_pass, 6);
}

#[test]
fn global_entry_and_handle_share_a_node() {
    const NAME: &str = "tests/entry.rs:global_entry_and_handle_share_a_node";
    let handle = sentinel_flow_core::Resource::new(NAME);
    let a = sentinel_flow_core::entry(NAME).unwrap();
    let b = handle.entry().unwrap();
    let c = sentinel_flow_core::EntryBuilder::new(NAME)
        .batch_count(2)
        .enter()
        .unwrap();
    let entries: Vec<Entry<'static>> = vec![a, b, c];
    let global = sentinel_flow_core::global();
    let node = global.resource_node(NAME).unwrap();
    assert!(std::ptr::eq(node, handle.node().unwrap()));
    assert_eq!(node.stats().cur_concurrency(), 3);
    drop(entries);
    let now = global.now_ms();
    assert_eq!(node.stats().total_pass(now), 4);
    assert_eq!(node.stats().total_success(now), 4);
    assert_eq!(node.stats().cur_concurrency(), 0);
}

// ---- 11. Send and async ----

const fn assert_send<T: Send>() {}
const fn assert_sync<T: Sync>() {}
const _: () = assert_send::<Entry<'static>>();
const _: () = assert_send::<Sentinel>();
const _: () = assert_sync::<Sentinel>();
const _: () = assert_send::<BlockError>();
const _: () = assert_sync::<BlockError>();

#[test]
fn an_entry_dropped_on_another_thread_exits() {
    let (clock, sentinel) = instance();
    let entry = sentinel
        .entry_builder("A")
        .context("web")
        .origin("app")
        .enter()
        .unwrap();
    assert_eq!(res(&sentinel, "A").concurrency, 1);
    std::thread::scope(|s| {
        s.spawn(move || {
            clock.advance_ms(15);
            entry.set_error(&Oops);
            drop(entry);
        });
    });
    let s = res(&sentinel, "A");
    assert_eq!(
        (s.concurrency, s.total_success, s.total_exception, s.avg_rt),
        (0, 1, 1, 15.0)
    );
    assert_eq!(ctx_node(&sentinel, "web", "A").concurrency, 0);
    assert_eq!(origin(&sentinel, "A", "app").total_success, 1);
}

/// Pending on its first poll, ready on the next.
struct YieldOnce(bool);

impl Future for YieldOnce {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            Poll::Pending
        }
    }
}

#[test]
fn a_future_dropped_while_holding_an_entry_exits_it() {
    let (clock, sentinel) = instance();
    let mut cx = Context::from_waker(Waker::noop());
    {
        let mut fut = pin!(async {
            let _entry = sentinel.entry("A").unwrap();
            std::future::pending::<()>().await;
        });
        assert!(fut.as_mut().poll(&mut cx).is_pending());
        assert_eq!(res(&sentinel, "A").concurrency, 1);
        clock.advance_ms(5);
    } // dropped before completion
    let s = res(&sentinel, "A");
    assert_eq!((s.concurrency, s.total_pass, s.total_success), (0, 1, 1));
    assert_eq!(s.avg_rt, 5.0);

    // The same future run to completion on the same context.
    let mut fut = pin!(async {
        let entry = sentinel.entry("B").unwrap();
        YieldOnce(false).await;
        drop(entry);
        7
    });
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    assert_eq!(res(&sentinel, "B").concurrency, 1);
    clock.advance_ms(3);
    assert_eq!(fut.as_mut().poll(&mut cx), Poll::Ready(7));
    let s = res(&sentinel, "B");
    assert_eq!((s.concurrency, s.total_success, s.avg_rt), (0, 1, 3.0));
}

#[test]
fn a_future_holding_an_entry_is_send() {
    fn require_send<F: Future + Send>(f: F) -> F {
        f
    }
    let (_clock, sentinel) = instance();
    let fut = require_send(async {
        let _entry = sentinel.entry("A").unwrap();
        YieldOnce(false).await;
    });
    let mut cx = Context::from_waker(Waker::noop());
    let mut fut = Box::pin(fut);
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    // Finish it on another thread.
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut cx = Context::from_waker(Waker::noop());
            assert!(fut.as_mut().poll(&mut cx).is_ready());
        });
    });
    let s = res(&sentinel, "A");
    assert_eq!((s.concurrency, s.total_success), (0, 1));
}

// ---- 12. concurrency ----

#[test]
fn threads_entering_one_resource_count_exactly() {
    const THREADS: usize = 4;
    const PER_THREAD: u64 = 10_000;
    const OWN: u64 = 1_000;
    let (_clock, sentinel) = instance();
    let own_names: Vec<String> = (0..THREADS).map(|t| format!("own-{t}")).collect();
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for own in &own_names {
            let (sentinel, barrier) = (&sentinel, &barrier);
            s.spawn(move || {
                barrier.wait();
                for i in 0..PER_THREAD {
                    let entry = sentinel.entry("shared").unwrap();
                    if i % 10 == 0 {
                        let own = sentinel.entry_builder(own).parent(&entry).enter().unwrap();
                        own.set_error(&Oops);
                        drop(own);
                    }
                    drop(entry);
                }
            });
        }
    });
    let s = res(&sentinel, "shared");
    let total = THREADS as u64 * PER_THREAD;
    assert_eq!(s.concurrency, 0);
    assert_eq!(s.total_pass, total);
    assert_eq!(s.total_success, total);
    assert_eq!(s.pass_qps, total as f64);
    assert_eq!(s.total_exception, 0);
    for own in &own_names {
        let s = res(&sentinel, own);
        assert_eq!(
            (
                s.total_pass,
                s.total_success,
                s.total_exception,
                s.concurrency
            ),
            (OWN, OWN, OWN, 0),
            "{own}"
        );
    }
    let top = sentinel.entrances()[0].children();
    assert_eq!(names(&top), ["shared"]);
    let mut under: Vec<_> = names(&top[0].children());
    under.sort();
    assert_eq!(under, own_names);
}

#[test]
fn threads_entering_new_names_make_each_once() {
    const THREADS: u64 = 4;
    const NAMES: usize = 50;
    let (_clock, sentinel) = instance();
    let names_: Vec<String> = (0..NAMES).map(|i| format!("new-{i}")).collect();
    let barrier = Barrier::new(THREADS as usize);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (sentinel, barrier, list) = (&sentinel, &barrier, &names_);
            s.spawn(move || {
                barrier.wait();
                // Each thread walks the names from a different start.
                for i in 0..NAMES {
                    let name = &list[(i + t as usize * 13) % NAMES];
                    drop(sentinel.entry(name).unwrap());
                    let web = sentinel.entry_builder(name).context("web").enter().unwrap();
                    drop(sentinel.entry_builder("leaf").parent(&web).enter().unwrap());
                    drop(web);
                }
            });
        }
    });
    assert_eq!(sentinel.resource_nodes().count(), NAMES + 1);
    let mut ids: Vec<u32> = sentinel.resource_nodes().map(|r| r.id()).collect();
    ids.dedup();
    assert_eq!(ids.len(), NAMES + 1);
    for name in &names_ {
        assert_eq!(res(&sentinel, name).total_pass, 2 * THREADS, "{name}");
        assert_eq!(res(&sentinel, name).total_success, 2 * THREADS, "{name}");
        assert_eq!(
            ctx_node(&sentinel, DEFAULT_CONTEXT, name).total_pass,
            THREADS
        );
        assert_eq!(ctx_node(&sentinel, "web", name).total_pass, THREADS);
        let children = names(&sentinel.context_node("web", name).unwrap().children());
        assert_eq!(children, ["leaf"], "{name}");
    }
    assert_eq!(res(&sentinel, "leaf").total_pass, THREADS * NAMES as u64);
    let entrances = sentinel.entrances();
    assert_eq!(entrances.len(), 2);
    let mut default_top = names(&entrances[0].children());
    default_top.sort();
    let mut expected = names_.clone();
    expected.sort();
    assert_eq!(default_top, expected, "each node once at the top");
    let mut web_top = names(&entrances[1].children());
    web_top.sort();
    assert_eq!(web_top, expected);

    let (_clock, only_new) = instance();
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            let (sentinel, list) = (&only_new, &names_);
            s.spawn(move || {
                for name in list {
                    drop(sentinel.entry(name).unwrap());
                }
            });
        }
    });
    assert_eq!(only_new.resource_nodes().count(), NAMES);
    for name in &names_ {
        let s = res(&only_new, name);
        assert_eq!(
            (s.total_pass, s.total_success, s.concurrency),
            (THREADS, THREADS, 0)
        );
    }
}

// ---- 13. window sizes ----

#[test]
fn the_second_window_length_divides_the_rates() {
    let config = StatConfig::default().second_window(WindowShape::new(2_000, 4).unwrap());
    let (clock, sentinel) = instance_with(|builder| builder.stat_config(config));
    for _ in 0..10 {
        drop(sentinel.entry("A").unwrap());
    }
    for _ in 0..4 {
        drop(sentinel.entry_builder("A").context("web").enter().unwrap());
    }
    drop(
        sentinel
            .entry_builder("A")
            .entry_type(EntryType::Inbound)
            .origin("app")
            .enter()
            .unwrap(),
    );
    let s = res(&sentinel, "A");
    assert_eq!((s.total_pass, s.pass_qps, s.success_qps), (15, 7.5, 7.5));
    assert_eq!(ctx_node(&sentinel, "web", "A").pass_qps, 2.0);
    assert_eq!(ctx_node(&sentinel, DEFAULT_CONTEXT, "A").pass_qps, 5.5);
    assert_eq!(origin(&sentinel, "A", "app").pass_qps, 0.5);
    assert_eq!(sentinel.inbound_node().pass_qps(sentinel.now_ms()), 0.5);

    // 1.5 s later the first bucket is still in the 2 s window.
    clock.advance_ms(1_500);
    assert_eq!(res(&sentinel, "A").pass_qps, 7.5);
    clock.advance_ms(500);
    assert_eq!(res(&sentinel, "A").pass_qps, 0.0);
    assert_eq!(res(&sentinel, "A").total_pass, 15);

    // The default shape: one second.
    let (_clock, default) = instance();
    for _ in 0..10 {
        drop(default.entry("A").unwrap());
    }
    assert_eq!(res(&default, "A").pass_qps, 10.0);
}
