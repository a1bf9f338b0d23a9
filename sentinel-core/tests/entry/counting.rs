//! Counting: pass, success and response time, batch counts, errors,
//! inbound and outbound entries, origins, and the window's length.

use sentinel_flow_core::stat::{StatConfig, WindowShape};
use sentinel_flow_core::{DEFAULT_CONTEXT, EntryType};

use crate::support::{T0, instance, instance_with};
use crate::{Oops, ctx_node, origin, res};

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
