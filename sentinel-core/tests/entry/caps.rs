//! The caps on resources, contexts, origins and handles (past them an
//! entry passes uncounted or shares a node), and the switch.

use sentinel_flow_core::{DEFAULT_CONTEXT, EntryType};

use crate::slots::BlockAll;
use crate::support::{instance, instance_with};
use crate::{Oops, ctx_node, names, origin, res};

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
