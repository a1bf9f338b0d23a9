//! `Resource` handles (one on the global instance), and entries sent
//! across threads and held by futures.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use sentinel_flow_core::{BlockError, DEFAULT_CONTEXT, Entry, EntryType, Sentinel};

use crate::support::instance;
use crate::{Oops, ctx_node, origin, res};

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
