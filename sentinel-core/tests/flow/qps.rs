//! QPS rules that reject: a count per second naming the rule, batches,
//! the window's accuracy under overload and under racing threads, permits
//! leased to idle threads or given back when a later check refuses, and
//! entries in flight across a bucket's edge.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sentinel_flow_core::flow::{FlowRule, FlowStrategy};
use sentinel_flow_core::slot::{self, EntryContext, Slot};
use sentinel_flow_core::{BlockError, BlockKind, ManualClock, Sentinel};

use crate::support::{T0, admit, admitted, instance, instance_with, load, stats};
use crate::{blocking_rule, one_second_of_traffic};

#[test]
fn qps_reject_admits_count_per_second_and_names_the_rule_when_blocking() {
    let (clock, sentinel) = instance();
    let rule = FlowRule::new("r", 5.0);
    load(&sentinel, [rule.clone()]);

    for i in 0..5 {
        assert!(sentinel.entry("r").is_ok(), "entry {i} is within the count");
    }
    for i in 5..10 {
        let err = sentinel.entry("r").unwrap_err();
        assert_eq!(err.kind(), BlockKind::Flow, "entry {i}");
        assert_eq!(err.resource(), "r");
        assert_eq!(err.rule_as::<FlowRule>(), Some(&rule));
    }
    let now = sentinel.now_ms();
    let node = stats(&sentinel, "r");
    assert_eq!(node.pass_qps(now), 5.0);
    assert_eq!(node.total_pass(now), 5);
    assert_eq!(node.total_block(now), 5);

    // Later in the same second the first bucket is still in the window.
    clock.advance_ms(999);
    assert_eq!(admit(&sentinel, "r", 3), 0);
    // A second after the first entries their bucket has left the window.
    clock.advance_ms(1);
    assert_eq!(admit(&sentinel, "r", 10), 5);
    assert_eq!(stats(&sentinel, "r").total_pass(sentinel.now_ms()), 10);
}

#[test]
fn qps_reject_counts_a_batch_as_that_many_permits() {
    let (_clock, sentinel) = instance();
    load(&sentinel, [FlowRule::new("r", 5.0)]);
    let batch = |n| sentinel.entry_builder("r").batch_count(n).enter();

    assert!(batch(3).is_ok(), "0 + 3 <= 5");
    let err = batch(3).unwrap_err();
    assert_eq!(blocking_rule(&err).count, 5.0, "3 + 3 > 5");
    assert!(batch(2).is_ok(), "3 + 2 <= 5");
    assert!(batch(1).is_err(), "5 + 1 > 5");

    let now = sentinel.now_ms();
    let node = stats(&sentinel, "r");
    assert_eq!(node.total_pass(now), 5);
    assert_eq!(node.total_block(now), 4, "blocks count their batch too");
}

#[test]
fn qps_reject_under_three_times_overload_admits_the_count_each_second() {
    let (clock, sentinel) = instance();
    let count = 100;
    load(&sentinel, [FlowRule::new("r", count as f64)]);

    let mut admitted_at = Vec::new();
    for _ in 0..10 {
        one_second_of_traffic(&clock, &sentinel, "r", |t, passed| {
            if passed {
                admitted_at.push(t);
            }
        });
    }
    let admitted_in = |from: u64, len: u64| {
        admitted_at
            .iter()
            .filter(|&&t| (from..from + len).contains(&t))
            .count()
    };

    // Per aligned second: the count, within 1%.
    for k in 0..10 {
        let n = admitted_in(T0 + k * 1_000, 1_000);
        assert!(n.abs_diff(count) <= 1, "second {k} admitted {n}");
    }
    // The rule's window is two 500 ms buckets: no such window (any two
    // consecutive buckets) ever holds more than the count.
    for b in 0..19 {
        let from = T0 + b * 500;
        let n = admitted_in(from, 1_000);
        assert!(n <= count, "window from {from} admitted {n}");
    }
    // An arbitrary 1 s interval straddles three buckets and is not what the
    // rule bounds; a two-bucket window can at most double the count there.
    let busiest = admitted_at
        .iter()
        .map(|&t| admitted_in(t, 1_000))
        .max()
        .unwrap_or(0);
    assert!(
        busiest <= 2 * count,
        "busiest 1 s interval admitted {busiest}"
    );

    let now = sentinel.now_ms();
    assert_eq!(
        stats(&sentinel, "r").total_pass(now),
        admitted_at.len() as u64
    );
    assert_eq!(
        stats(&sentinel, "r").total_block(now),
        3_000 - admitted_at.len() as u64
    );
}

/// `attempts` entries on each of `threads` threads at once; how many passed.
fn hammer(sentinel: &Sentinel, resource: &str, threads: usize, attempts: usize) -> usize {
    let passed = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let n = (0..attempts)
                    .filter(|_| sentinel.entry(resource).is_ok())
                    .count();
                passed.fetch_add(n as u64, Ordering::Relaxed);
            });
        }
    });
    passed.into_inner() as usize
}

#[test]
fn qps_reject_admits_exactly_the_count_to_threads_racing_for_it() {
    let (clock, sentinel) = instance();
    let count = 1_000;
    load(&sentinel, [FlowRule::new("r", count as f64)]);
    // Threads take permits in leases; every permit is spent and none twice,
    // in every bucket, while the window slides over 10 s.
    let mut per_bucket = Vec::new();
    for _ in 0..20 {
        per_bucket.push(hammer(&sentinel, "r", 4, 700));
        clock.advance_ms(500);
    }
    // The first bucket takes the whole count, the next sees it in its
    // window; from then on each bucket takes what the bucket before left.
    assert_eq!(per_bucket[0], count);
    for pair in per_bucket.windows(2) {
        assert_eq!(pair[0] + pair[1], count, "buckets {per_bucket:?}");
    }
    let now = sentinel.now_ms();
    assert_eq!(
        stats(&sentinel, "r").total_pass(now) as usize,
        per_bucket.iter().sum::<usize>(),
        "every pass counted on the node"
    );
}

#[test]
fn permits_leased_to_an_idle_thread_serve_the_others() {
    let (_clock, sentinel) = instance();
    let count = 800;
    load(&sentinel, [FlowRule::new("r", count as f64)]);
    let sentinel = &sentinel;
    let (entered_tx, entered) = std::sync::mpsc::channel();
    let (done, stay) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|s| {
        // One entry takes a lease (an eighth of the count), then the thread
        // stays alive and idle until the test is done (or has failed).
        s.spawn(move || {
            assert!(sentinel.entry("r").is_ok());
            entered_tx.send(()).unwrap();
            let _ = stay.recv();
        });
        entered.recv().unwrap();
        let admitted = admit(sentinel, "r", 2 * count);
        drop(done);
        assert_eq!(admitted, count - 1);
    });
}

/// Refuses every entry while set, after the flow check.
#[derive(Debug, Default)]
struct After(std::sync::atomic::AtomicBool);

impl Slot for After {
    fn order(&self) -> i32 {
        slot::order::DEGRADE + 1
    }

    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        match self.0.load(Ordering::Relaxed) {
            true => Err(ctx.block(BlockKind::Custom("after"))),
            false => Ok(()),
        }
    }
}

#[test]
fn permits_of_entries_refused_after_the_flow_check_are_given_back() {
    let after = Arc::new(After::default());
    let (_clock, sentinel) = instance_with(|builder| builder.slot(SharedSlot(Arc::clone(&after))));
    load(
        &sentinel,
        [FlowRule::new("r", 10.0), FlowRule::new("r", 20.0)],
    );
    after.0.store(true, Ordering::Relaxed);
    // Refused later, from this thread and others: nothing spent.
    assert_eq!(admit(&sentinel, "r", 50), 0);
    assert_eq!(hammer(&sentinel, "r", 3, 50), 0);
    after.0.store(false, Ordering::Relaxed);
    assert_eq!(hammer(&sentinel, "r", 3, 10), 10, "the whole count left");
    assert_eq!(admit(&sentinel, "r", 10), 0);
}

#[test]
fn a_rule_that_refuses_gives_back_the_permits_of_the_rules_before_it() {
    let (_clock, sentinel) = instance();
    // Every caller's 20 a second (checked first), and 5 of them through
    // context `c`.
    load(
        &sentinel,
        [
            FlowRule::new("r", 20.0),
            FlowRule {
                strategy: FlowStrategy::Chain,
                ref_resource: Some("c".into()),
                ..FlowRule::new("r", 5.0)
            },
        ],
    );
    let through_c = admitted(30, || sentinel.entry_builder("r").context("c").enter());
    assert_eq!(through_c, 5);
    // The 20-rule counted the 5 passes, not the 25 the chain rule refused.
    assert_eq!(admit(&sentinel, "r", 30), 15);
}

/// Holds an entry whose origin is `origin` at `order` in the chain until the
/// test lets it go: the entry has read the clock, and (past the flow slot)
/// spent its permit, but is not counted yet.
#[derive(Debug)]
struct Pause {
    order: i32,
    origin: &'static str,
    reached: std::sync::Barrier,
    release: std::sync::Barrier,
}

impl Pause {
    fn new(order: i32, origin: &'static str) -> Arc<Self> {
        Arc::new(Pause {
            order,
            origin,
            reached: std::sync::Barrier::new(2),
            release: std::sync::Barrier::new(2),
        })
    }
}

impl Slot for Pause {
    fn order(&self) -> i32 {
        self.order
    }

    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        if ctx.origin() == self.origin {
            self.reached.wait();
            self.release.wait();
        }
        Ok(())
    }
}

/// An instance at the last millisecond of a bucket, with a reject rule of
/// `count` on `r` and a [`Pause`] at `order` for entries from `origin`.
fn paused_at_an_edge(
    order: i32,
    origin: &'static str,
    count: f64,
) -> (ManualClock, Arc<Pause>, Sentinel) {
    let pause = Pause::new(order, origin);
    let (clock, sentinel) = instance_with(|builder| builder.slot(SharedSlot(Arc::clone(&pause))));
    clock.set(T0 + 499);
    load(&sentinel, [FlowRule::new("r", count)]);
    (clock, pause, sentinel)
}

/// A rule of 10^11 must not refuse an entry that read the clock just
/// before another thread began the rule's next bucket.
#[test]
fn an_entry_late_for_the_rules_bucket_passes_and_counts_in_it() {
    let (clock, pause, sentinel) = paused_at_an_edge(slot::order::PARAM_FLOW + 1, "late", 1e11);
    let resource = sentinel.resource("r");
    assert!(resource.entry().is_ok());
    std::thread::scope(|s| {
        let late = s.spawn(|| {
            // Reads the clock at T0 + 499, then waits before the flow slot.
            let entry = sentinel.entry_builder("r").origin("late").enter();
            entry.map(drop).map_err(|e| e.to_string())
        });
        pause.reached.wait();
        // Meanwhile the rule begins its next bucket.
        clock.set(T0 + 500);
        let next = resource.entry().map(drop);
        pause.release.wait();
        assert!(next.is_ok());
        assert_eq!(late.join().unwrap(), Ok(()), "never refused by 10^11");
    });
    // Counted in the rule's bucket, where its permit was: the window of
    // [T0 + 500, T0 + 1500) holds it.
    clock.set(T0 + 1_000);
    assert_eq!(stats(&sentinel, "r").pass_qps(T0 + 1_000), 2.0);
    assert_eq!(stats(&sentinel, "r").pass_qps(T0 + 999), 3.0);
}

/// Entries that spent their permits just before a bucket's edge and are
/// counted on the node just after another thread began the next bucket:
/// the two buckets still admit exactly the count together.
#[test]
fn qps_reject_is_exact_across_a_buckets_edge_with_entries_in_flight() {
    let (clock, pause, sentinel) = paused_at_an_edge(slot::order::FLOW + 1, "in-flight", 100.0);
    std::thread::scope(|s| {
        let in_flight = s.spawn(|| {
            // Its lease takes an eighth of the count; one permit is spent
            // by this entry, which is held before it is counted.
            let entry = sentinel.entry_builder("r").origin("in-flight").enter();
            entry.is_ok()
        });
        pause.reached.wait();
        clock.set(T0 + 500);
        let admitted = admit(&sentinel, "r", 200);
        pause.release.wait();
        assert!(in_flight.join().unwrap());
        // The new bucket: 99 left (the lease's leftovers come back).
        assert_eq!(admitted, 99);
    });
    // Every bucket-aligned window holds at most the count.
    assert_eq!(stats(&sentinel, "r").pass_qps(T0 + 999), 100.0);
    clock.set(T0 + 1_000);
    assert_eq!(admit(&sentinel, "r", 200), 1);
}

/// A slot shared with the test.
#[derive(Debug)]
struct SharedSlot<S>(Arc<S>);

impl<S: Slot> Slot for SharedSlot<S> {
    fn order(&self) -> i32 {
        self.0.order()
    }

    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        self.0.entry(ctx)
    }
}
