//! Threads entering one resource, and new names, count exactly.

use std::sync::Barrier;

use sentinel_flow_core::DEFAULT_CONTEXT;

use crate::support::instance;
use crate::{Oops, ctx_node, names, res};

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
