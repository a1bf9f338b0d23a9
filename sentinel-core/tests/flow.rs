//! Integration tests of flow control: QPS and concurrency grades, the
//! accuracy of the QPS window under overload, `limit_app` and rule order, the
//! relate and chain strategies, the warm-up curve (against a model of
//! Sentinel's `WarmUpController`), the rate limiter's pacing and queue (sync
//! and `enter_async`), reloads that keep state, refused rule lists, listeners
//! and rules with a window of their own.
//!
//! Every test builds its own [`Sentinel`] on a [`ManualClock`]; time windows
//! are crossed by moving the clock, never by sleeping. The queue tests run on
//! tokio's paused clock, which moves only while every task waits.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sentinel_flow_core::flow::{
    ControlBehavior, FlowGrade, FlowRule, FlowStrategy, LIMIT_APP_DEFAULT, LIMIT_APP_OTHER,
};
use sentinel_flow_core::slot::{self, EntryContext, Slot};
use sentinel_flow_core::{BlockError, BlockKind, EntryType, ManualClock, Sentinel};

mod support;
use support::{T0, admit, admitted, instance, instance_with, load, stats};

/// A QPS rule on `resource` for the callers `limit_app` selects.
fn for_app(resource: &str, limit_app: &str, count: f64) -> FlowRule {
    FlowRule {
        limit_app: limit_app.into(),
        ..FlowRule::new(resource, count)
    }
}

/// The flow rule that refused an entry (and checks that a flow rule did).
fn blocking_rule(err: &BlockError) -> &FlowRule {
    support::rule_of(err)
}

/// As [`admit`], inbound from `origin`.
fn admit_from(sentinel: &Sentinel, resource: &str, origin: &str, n: usize) -> usize {
    admitted(n, || {
        sentinel
            .entry_builder(resource)
            .origin(origin)
            .entry_type(EntryType::Inbound)
            .enter()
    })
}

/// One simulated second of traffic on `resource`, from the current time (a
/// whole second): 100 steps of 10 ms with 3 attempts each, so both 500 ms
/// buckets see traffic. Each admitted entry exits at once. `seen` is told
/// the time and outcome of every attempt. The clock ends a second later.
fn one_second_of_traffic(
    clock: &ManualClock,
    sentinel: &Sentinel,
    resource: &str,
    mut seen: impl FnMut(u64, bool),
) -> usize {
    let mut admitted = 0;
    for _ in 0..100 {
        for _ in 0..3 {
            let now = sentinel.now_ms();
            let passed = sentinel.entry(resource).is_ok();
            admitted += usize::from(passed);
            seen(now, passed);
        }
        clock.advance_ms(10);
    }
    admitted
}

// ---- 1. QPS, reject ----

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

// ---- 2. accuracy under overload ----

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

// ---- 3. concurrency grade ----

#[test]
fn concurrency_grade_is_exact_under_threads_and_gives_every_reservation_back() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [FlowRule {
            grade: FlowGrade::Concurrency,
            ..FlowRule::new("r", 3.0)
        }],
    );

    let inside = AtomicI64::new(0);
    let max_inside = AtomicI64::new(0);
    let passed = AtomicU64::new(0);
    let blocked = AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..2_000 {
                    match sentinel.entry("r") {
                        Ok(entry) => {
                            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                            max_inside.fetch_max(now, Ordering::SeqCst);
                            std::thread::yield_now();
                            inside.fetch_sub(1, Ordering::SeqCst);
                            drop(entry);
                            passed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(err) => {
                            assert_eq!(err.kind(), BlockKind::Flow);
                            blocked.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });

    let max = max_inside.load(Ordering::SeqCst);
    assert!(max > 0 && max <= 3, "at most 3 inside at once, saw {max}");
    let (passed, blocked) = (passed.into_inner(), blocked.into_inner());
    assert_eq!(passed + blocked, 16_000);
    let now = sentinel.now_ms();
    let node = stats(&sentinel, "r");
    assert_eq!(node.cur_concurrency(), 0);
    assert_eq!(node.total_pass(now), passed);
    assert_eq!(node.total_block(now), blocked);

    // Every reservation was given back: exactly 3 fit again.
    let held: Vec<_> = (0..3).map(|_| sentinel.entry("r").unwrap()).collect();
    assert!(sentinel.entry("r").is_err());
    drop(held);
    assert!(sentinel.entry("r").is_ok());
}

#[test]
fn a_blocked_concurrency_entry_leaks_no_reservation() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [FlowRule {
            grade: FlowGrade::Concurrency,
            ..FlowRule::new("r", 1.0)
        }],
    );

    let held = sentinel.entry("r").unwrap();
    for _ in 0..100 {
        let err = sentinel.entry("r").unwrap_err();
        assert_eq!(blocking_rule(&err).grade, FlowGrade::Concurrency);
    }
    assert_eq!(stats(&sentinel, "r").cur_concurrency(), 1);
    drop(held);
    assert_eq!(stats(&sentinel, "r").cur_concurrency(), 0);
    let next = sentinel.entry("r").expect("the held place was given back");
    assert!(sentinel.entry("r").is_err(), "and only that one");
    drop(next);
}

// ---- 4. limit_app ----

#[test]
fn a_rule_naming_an_origin_limits_only_that_origin() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [
            for_app("r", "a", 1.0),
            for_app("r", LIMIT_APP_DEFAULT, 100.0),
        ],
    );

    assert_eq!(admit_from(&sentinel, "r", "a", 1), 1);
    let err = sentinel.entry_builder("r").origin("a").enter().unwrap_err();
    assert_eq!(blocking_rule(&err).limit_app, "a");
    assert_eq!(blocking_rule(&err).count, 1.0);

    assert_eq!(
        admit_from(&sentinel, "r", "b", 5),
        5,
        "b is not limited by a's rule"
    );
    assert_eq!(
        admit(&sentinel, "r", 5),
        5,
        "nor are calls without an origin"
    );
    let now = sentinel.now_ms();
    assert_eq!(stats(&sentinel, "r").total_pass(now), 1 + 5 + 5);
    assert_eq!(stats(&sentinel, "r").total_block(now), 1);
}

#[test]
fn an_other_rule_limits_each_unnamed_origin_on_its_own() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [for_app("r", "a", 100.0), for_app("r", LIMIT_APP_OTHER, 1.0)],
    );

    assert_eq!(admit_from(&sentinel, "r", "b", 1), 1);
    let err = sentinel.entry_builder("r").origin("b").enter().unwrap_err();
    assert_eq!(blocking_rule(&err).limit_app, LIMIT_APP_OTHER);
    // Per origin: c has its own node and its own allowance.
    assert_eq!(admit_from(&sentinel, "r", "c", 5), 1);
    // a is named by a rule of the resource: "other" is not about it.
    assert_eq!(admit_from(&sentinel, "r", "a", 5), 5);
    // No origin: "other" is not about it either.
    assert_eq!(admit(&sentinel, "r", 5), 5);

    let node = sentinel.resource_node("r").unwrap();
    let now = sentinel.now_ms();
    assert_eq!(
        node.find_origin("b").unwrap().stats().total_block(now),
        1,
        "the block counts on the origin's node"
    );
    assert_eq!(node.find_origin("c").unwrap().stats().total_pass(now), 1);
}

// ---- 5. rule order ----

#[test]
fn origin_rules_are_checked_before_default_rules_and_every_rule_applies() {
    let (_clock, sentinel) = instance();
    let origin_rule = |count| FlowRule {
        limit_app: "a".into(),
        ..FlowRule::new("r", count)
    };
    let default_rule = |count| FlowRule::new("r", count);

    // The origin rule lets it through; the default rule, listed first but
    // checked last, still applies and blocks.
    load(&sentinel, [default_rule(0.0), origin_rule(100.0)]);
    let err = sentinel.entry_builder("r").origin("a").enter().unwrap_err();
    assert_eq!(blocking_rule(&err), &default_rule(0.0));

    // The origin rule blocks: it is the one reported.
    load(&sentinel, [default_rule(100.0), origin_rule(0.0)]);
    let err = sentinel.entry_builder("r").origin("a").enter().unwrap_err();
    assert_eq!(blocking_rule(&err), &origin_rule(0.0));
    assert_eq!(admit(&sentinel, "r", 3), 3, "calls without an origin pass");

    // Both would block: the origin rule, checked first, is the one reported
    // although the default rule is listed first.
    load(&sentinel, [default_rule(0.0), origin_rule(0.0)]);
    let err = sentinel.entry_builder("r").origin("a").enter().unwrap_err();
    assert_eq!(blocking_rule(&err), &origin_rule(0.0));
    let err = sentinel.entry("r").unwrap_err();
    assert_eq!(blocking_rule(&err), &default_rule(0.0));
}

// ---- 6. relate ----

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

// ---- 7. chain ----

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

// ---- 8. warm-up ----

/// Sentinel's `WarmUpController` and the 1 s / 2-bucket pass window, written
/// from the Java formulas, for one resource whose every pass goes through it.
#[derive(Debug)]
struct WarmUpModel {
    count: f64,
    cold_factor: i64,
    warning_token: i64,
    max_token: i64,
    slope: f64,
    stored_tokens: i64,
    last_filled_ms: u64,
    /// Passes by 500 ms bucket start.
    passed: BTreeMap<u64, u64>,
}

/// Java's `Math.nextUp` for a positive finite `x`.
fn next_up(x: f64) -> f64 {
    f64::from_bits(x.to_bits() + 1)
}

impl WarmUpModel {
    fn new(count: f64, period_sec: i64, cold_factor: i64) -> Self {
        // warningToken = (int)(period * count) / (coldFactor - 1)
        let warning_token = (period_sec as f64 * count) as i64 / (cold_factor - 1);
        // maxToken = warningToken + (int)(2 * period * count / (1.0 + coldFactor))
        let max_token =
            warning_token + (2.0 * period_sec as f64 * count / (1.0 + cold_factor as f64)) as i64;
        let slope = (cold_factor as f64 - 1.0) / count / (max_token - warning_token) as f64;
        WarmUpModel {
            count,
            cold_factor,
            warning_token,
            max_token,
            slope,
            stored_tokens: 0,
            last_filled_ms: 0,
            passed: BTreeMap::new(),
        }
    }

    fn passed_in(&self, from: u64, len: u64) -> u64 {
        self.passed.range(from..from + len).map(|(_, n)| n).sum()
    }

    /// The sliding window at `now`: the current 500 ms bucket and the one
    /// before it.
    fn pass_qps(&self, now: u64) -> u64 {
        let bucket = now - now % 500;
        self.passed_in(bucket - 500, 1_000)
    }

    /// Passes in the previous whole second.
    fn previous_qps(&self, now: u64) -> i64 {
        let second = now - now % 1_000;
        self.passed_in(second - 1_000, 1_000) as i64
    }

    fn cool_down_tokens(&self, current: u64, previous_qps: i64) -> i64 {
        let old = self.stored_tokens;
        // Below the warning line: refill. Above it: refill only while the
        // previous second passed fewer than (int) count / coldFactor (Java's
        // integer division). Exactly at it: no refill.
        let below = old < self.warning_token;
        let above_and_quiet =
            old > self.warning_token && previous_qps < (self.count as i64) / self.cold_factor;
        let new = if below || above_and_quiet {
            (old as f64 + (current - self.last_filled_ms) as f64 * self.count / 1_000.0) as i64
        } else {
            old
        };
        new.min(self.max_token)
    }

    fn sync_token(&mut self, now: u64) {
        let current = now - now % 1_000;
        if current <= self.last_filled_ms {
            return;
        }
        let previous_qps = self.previous_qps(now);
        let new = self.cool_down_tokens(current, previous_qps);
        self.stored_tokens = (new - previous_qps).max(0);
        self.last_filled_ms = current;
    }

    fn try_pass(&mut self, now: u64) -> bool {
        self.sync_token(now);
        let rest = self.stored_tokens;
        let limit = if rest >= self.warning_token {
            let above = (rest - self.warning_token) as f64;
            next_up(1.0 / (above * self.slope + 1.0 / self.count))
        } else {
            self.count
        };
        let pass = (self.pass_qps(now) + 1) as f64 <= limit;
        if pass {
            *self.passed.entry(now - now % 500).or_default() += 1;
        }
        pass
    }
}

fn warm_up_rule(resource: &str, count: f64) -> FlowRule {
    FlowRule {
        control_behavior: ControlBehavior::WarmUp,
        ..FlowRule::new(resource, count)
    }
}

#[test]
fn warm_up_follows_sentinels_curve_second_by_second() {
    let (clock, sentinel) = instance();
    let rule = warm_up_rule("r", 100.0);
    assert_eq!((rule.warm_up_period_sec, rule.warm_up_cold_factor), (10, 3));
    load(&sentinel, [rule]);
    let mut model = WarmUpModel::new(100.0, 10, 3);
    assert_eq!((model.warning_token, model.max_token), (500, 1_000));

    let mut library = Vec::new();
    let mut modelled = Vec::new();
    let mut disagreements = Vec::new();
    for _ in 0..14 {
        let mut expected = 0;
        let admitted = one_second_of_traffic(&clock, &sentinel, "r", |t, passed| {
            let model_passed = model.try_pass(t);
            expected += usize::from(model_passed);
            if passed != model_passed {
                disagreements.push((t - T0, passed));
            }
        });
        library.push(admitted);
        modelled.push(expected);
    }
    assert_eq!(library, modelled, "admitted per second: library vs model");
    assert!(
        disagreements.is_empty(),
        "attempts decided differently (ms after T0, library passed): {disagreements:?}"
    );

    // The shape: a cold start at count / cold_factor, rising to the count.
    assert!((30..=36).contains(&library[0]), "first second {library:?}");
    for (k, &n) in library.iter().enumerate().skip(11) {
        assert!((95..=100).contains(&n), "second {k}: {library:?}");
    }
    for k in 1..library.len() {
        assert!(
            library[k] + 1 >= library[k - 1],
            "non-decreasing at second {k}: {library:?}"
        );
    }
}

// ---- 9-11. rate limiter ----

fn rate_limiter(resource: &str, count: f64, max_queueing_time_ms: u64) -> FlowRule {
    FlowRule {
        control_behavior: ControlBehavior::RateLimiter,
        max_queueing_time_ms,
        ..FlowRule::new(resource, count)
    }
}

#[test]
fn rate_limiter_without_a_queue_admits_one_entry_per_half_millisecond() {
    let (clock, sentinel) = instance();
    load(&sentinel, [rate_limiter("r", 2_000.0, 0)]);

    for i in 0..100 {
        assert!(sentinel.entry("r").is_ok(), "slot {i}");
        let err = sentinel.entry("r").unwrap_err();
        assert_eq!(
            blocking_rule(&err).control_behavior,
            ControlBehavior::RateLimiter
        );
        // Half-way to the next slot is not enough.
        clock.advance(Duration::from_micros(250));
        assert!(sentinel.entry("r").is_err(), "slot {i} + 250 µs");
        clock.advance(Duration::from_micros(250));
    }
    let now = sentinel.now_ms();
    assert_eq!(stats(&sentinel, "r").total_pass(now), 100);
    assert_eq!(stats(&sentinel, "r").total_block(now), 200);
}

#[cfg(feature = "tokio")]
mod queue {
    use super::*;

    use crate::support::queue::{Entering, drive, start};

    /// `n` entries of `resource` through `enter_async`, not started.
    fn entering<'s>(sentinel: &'s Sentinel, resource: &'static str, n: usize) -> Vec<Entering<'s>> {
        (0..n)
            .map(|_| Box::pin(sentinel.entry_builder(resource).enter_async()) as Entering<'s>)
            .collect()
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limiter_above_1000_qps_queues_each_entry_half_a_millisecond_later() {
        let (_clock, sentinel) = instance();
        load(&sentinel, [rate_limiter("r", 2_000.0, 500)]);

        let mut futures = entering(&sentinel, "r", 1_002);
        let mut results = start(&mut futures).await;
        assert!(
            matches!(results[0], Some(Ok(_))),
            "the first entry passes at once"
        );
        for (k, result) in results.iter().enumerate().take(1_001).skip(1) {
            assert!(result.is_none(), "entry {k} waits its turn");
        }
        let err = results[1_001]
            .take()
            .expect("the 1002nd is decided at once")
            .unwrap_err();
        assert_eq!(blocking_rule(&err).count, 2_000.0);

        // Every queued entry is let through k * 0.5 ms after the first
        // (tokio's timer rounds up to the next millisecond): drive time on
        // in 0.5 ms steps to 501 ms.
        let queued: Vec<usize> = (1..=1_000).collect();
        let through = drive(&mut futures, &queued, Duration::from_micros(500), 1_002).await;
        for (k, driven, entry) in through {
            let due = Duration::from_micros(500 * k as u64);
            assert!(
                driven >= due && driven <= due + Duration::from_millis(1),
                "entry {k} let through after {driven:?}, due after {due:?}"
            );
            results[k] = Some(Ok(entry));
        }

        let now = sentinel.now_ms();
        let node = stats(&sentinel, "r");
        assert_eq!(node.total_pass(now), 1_001);
        assert_eq!(node.total_block(now), 1);
        assert_eq!(node.cur_concurrency(), 1_001);
        drop(results);
        assert_eq!(node.cur_concurrency(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limiter_queues_up_to_the_max_queueing_time() {
        let (_clock, sentinel) = instance();
        load(&sentinel, [rate_limiter("r", 10.0, 250)]);

        let mut futures = entering(&sentinel, "r", 4);
        let mut results = start(&mut futures).await;
        assert!(
            matches!(results[0], Some(Ok(_))),
            "the first passes at once"
        );
        assert!(results[1].is_none() && results[2].is_none());
        let err = results[3].take().unwrap().unwrap_err();
        assert_eq!(
            blocking_rule(&err).control_behavior,
            ControlBehavior::RateLimiter,
            "300 ms > 250 ms"
        );

        // Driven on 1 ms at a time to 250 ms: the two queued entries get
        // through 100 and 200 ms after the first.
        let through = drive(&mut futures, &[1, 2], Duration::from_millis(1), 250).await;
        for (k, driven, entry) in through {
            let due = Duration::from_millis(100 * k as u64);
            assert!(
                driven >= due && driven <= due + Duration::from_millis(1),
                "entry {k} let through after {driven:?}"
            );
            results[k] = Some(Ok(entry));
        }
        let now = sentinel.now_ms();
        assert_eq!(stats(&sentinel, "r").total_pass(now), 3);
        assert_eq!(stats(&sentinel, "r").total_block(now), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_queued_entry_counts_nothing() {
        let (_clock, sentinel) = instance();
        load(&sentinel, [rate_limiter("r", 10.0, 500)]);

        let first = sentinel.entry_builder("r").enter_async().await.unwrap();
        drop(first);
        let before = stats(&sentinel, "r").total_pass(sentinel.now_ms());
        assert_eq!(before, 1);

        // Queued for 100 ms; dropped after 1 ms.
        let cancelled = tokio::time::timeout(
            Duration::from_millis(1),
            sentinel.entry_builder("r").enter_async(),
        )
        .await;
        assert!(cancelled.is_err(), "still queued when the timeout fired");

        let now = sentinel.now_ms();
        let node = stats(&sentinel, "r");
        assert_eq!(node.total_pass(now), before);
        assert_eq!(node.total_block(now), 0);
        assert_eq!(node.pass_qps(now), 1.0);
        assert_eq!(node.cur_concurrency(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_queued_entry_gives_its_reject_permits_back() {
        let (_clock, sentinel) = instance();
        load(
            &sentinel,
            [FlowRule::new("r", 2.0), rate_limiter("r", 10.0, 500)],
        );
        drop(sentinel.entry_builder("r").enter_async().await.unwrap());
        // Passed the reject rule, then queued for 100 ms; dropped after 1.
        let cancelled = tokio::time::timeout(
            Duration::from_millis(1),
            sentinel.entry_builder("r").enter_async(),
        )
        .await;
        assert!(cancelled.is_err(), "still queued when the timeout fired");
        // The reject rule's second permit is free again.
        assert!(sentinel.entry_builder("r").enter_async().await.is_ok());
        assert!(sentinel.entry_builder("r").enter_async().await.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_queued_entry_gives_its_concurrency_back() {
        let (clock, sentinel) = instance();
        load(
            &sentinel,
            [
                FlowRule {
                    grade: FlowGrade::Concurrency,
                    ..FlowRule::new("r", 1.0)
                },
                rate_limiter("r", 10.0, 500),
            ],
        );

        drop(sentinel.entry_builder("r").enter_async().await.unwrap());
        // Passes the concurrency rule (holding its place) and queues 100 ms.
        let cancelled = tokio::time::timeout(
            Duration::from_millis(1),
            sentinel.entry_builder("r").enter_async(),
        )
        .await;
        assert!(cancelled.is_err());
        assert_eq!(stats(&sentinel, "r").cur_concurrency(), 0);

        // Past the cancelled entry's slot: the next passes at once, which it
        // could not if the cancelled entry still held the one place.
        clock.advance_ms(200);
        let entry = sentinel
            .entry_builder("r")
            .enter_async()
            .await
            .expect("the cancelled entry's place was given back");
        let err = sentinel.entry_builder("r").enter_async().await.unwrap_err();
        assert_eq!(blocking_rule(&err).grade, FlowGrade::Concurrency);
        drop(entry);
        let now = sentinel.now_ms();
        assert_eq!(stats(&sentinel, "r").total_pass(now), 2);
    }

    #[tokio::test(start_paused = true)]

    async fn a_cancelled_queued_entry_counts_nothing_in_a_rules_own_window() {
        let (clock, sentinel) = instance();
        load(
            &sentinel,
            [
                // Its own window of one 500 ms bucket: QPS = 2 x passes, so
                // 4 QPS admits 2 per bucket.
                FlowRule {
                    stat_interval_ms: 500,
                    stat_sample_count: 1,
                    ..FlowRule::new("r", 4.0)
                },
                rate_limiter("r", 10.0, 500),
            ],
        );

        drop(sentinel.entry_builder("r").enter_async().await.unwrap());
        let cancelled = tokio::time::timeout(
            Duration::from_millis(1),
            sentinel.entry_builder("r").enter_async(),
        )
        .await;
        assert!(cancelled.is_err());

        // Still in the first 500 ms bucket, past the cancelled entry's slot:
        // one pass so far, so one more fits.
        clock.advance_ms(200);
        assert_eq!(stats(&sentinel, "r").total_pass(sentinel.now_ms()), 1);
        let second = sentinel.entry_builder("r").enter_async().await;
        assert!(
            second.is_ok(),
            "one real pass in the window, the second should fit: {second:?}"
        );
    }
}

// ---- 12. reloads ----

#[test]
fn reloading_unchanged_rules_keeps_warm_up_state_and_statistics() {
    // Three instances see the same traffic: one never reloads, one reloads
    // the same rule (plus a rule elsewhere), one reloads a changed rule.
    let instances: Vec<(ManualClock, Sentinel)> = (0..3).map(|_| instance()).collect();
    let rule = warm_up_rule("r", 100.0);
    for (_, sentinel) in &instances {
        load(sentinel, [rule.clone()]);
    }
    let mut first_seconds = Vec::new();
    for (clock, sentinel) in &instances {
        let admitted: Vec<usize> = (0..3)
            .map(|_| one_second_of_traffic(clock, sentinel, "r", |_, _| {}))
            .collect();
        first_seconds.push(admitted);
    }
    assert!(first_seconds.iter().all(|s| *s == first_seconds[0]));

    let [(_, kept), (_, reloaded), (_, changed)] = &instances[..] else {
        unreachable!()
    };
    let now = reloaded.now_ms();
    let total_before = stats(reloaded, "r").total_pass(now);
    load(reloaded, [rule.clone(), FlowRule::new("elsewhere", 5.0)]);
    assert_eq!(reloaded.flow_rules().rules().len(), 2);
    assert_eq!(
        stats(reloaded, "r").total_pass(now),
        total_before,
        "statistics are not reset"
    );
    load(
        changed,
        [FlowRule {
            id: Some(7),
            ..rule.clone()
        }],
    );

    let next: Vec<usize> = instances
        .iter()
        .map(|(clock, sentinel)| one_second_of_traffic(clock, sentinel, "r", |_, _| {}))
        .collect();
    assert_eq!(
        next[1], next[0],
        "the reloaded rule continues its warm-up: {first_seconds:?} then {next:?}"
    );
    assert!(
        next[2] < next[0],
        "a changed rule starts cold again: {next:?}"
    );
    let now = reloaded.now_ms();
    assert_eq!(
        stats(reloaded, "r").total_pass(now),
        stats(kept, "r").total_pass(now)
    );
    assert_eq!(admit(reloaded, "elsewhere", 10), 5, "the new rule applies");
}

#[test]
fn reloading_a_changed_count_applies_at_once() {
    let (_clock, sentinel) = instance();
    load(&sentinel, [FlowRule::new("r", 10.0)]);
    assert_eq!(admit(&sentinel, "r", 5), 5);

    load(&sentinel, [FlowRule::new("r", 5.0)]);
    let err = sentinel.entry("r").unwrap_err();
    assert_eq!(blocking_rule(&err).count, 5.0);

    load(&sentinel, [FlowRule::new("r", 8.0)]);
    assert_eq!(
        admit(&sentinel, "r", 10),
        3,
        "5 passed this second, 8 allowed"
    );

    sentinel.flow_rules().load(vec![]).unwrap();
    assert_eq!(admit(&sentinel, "r", 10), 10, "no rule, no limit");
}

// ---- 13. refused rule lists ----

#[test]
fn bad_rules_are_refused_by_field_and_the_rules_in_force_stay() {
    let (_clock, sentinel) = instance();
    let in_force = vec![FlowRule::new("r", 1.0)];
    sentinel.flow_rules().load(in_force.clone()).unwrap();

    let base = || FlowRule::new("r", 1.0);
    let cases: Vec<(&str, FlowRule)> = vec![
        ("count", FlowRule::new("r", -1.0)),
        ("count", FlowRule::new("r", f64::NAN)),
        (
            "ref_resource",
            FlowRule {
                strategy: FlowStrategy::Relate,
                ..base()
            },
        ),
        (
            "ref_resource",
            FlowRule {
                strategy: FlowStrategy::Chain,
                ..base()
            },
        ),
        (
            "limit_app",
            FlowRule {
                limit_app: String::new(),
                ..base()
            },
        ),
        (
            "limit_app",
            FlowRule {
                limit_app: "a,b".into(),
                ..base()
            },
        ),
        (
            "warm_up_period_sec",
            FlowRule {
                control_behavior: ControlBehavior::WarmUp,
                warm_up_period_sec: 0,
                ..base()
            },
        ),
        (
            "warm_up_cold_factor",
            FlowRule {
                control_behavior: ControlBehavior::WarmUp,
                warm_up_cold_factor: 1,
                ..base()
            },
        ),
        (
            "stat_interval_ms",
            FlowRule {
                stat_interval_ms: 0,
                ..base()
            },
        ),
    ];
    for (field, bad) in cases {
        // A good rule first that would lift the limit if the list went in.
        let errors = sentinel
            .flow_rules()
            .load(vec![FlowRule::new("r", 1_000.0), bad.clone()])
            .expect_err(field);
        let [error] = errors.errors() else {
            panic!("one error for {bad:?}: {errors}");
        };
        assert_eq!(error.kind, "flow");
        assert_eq!(error.field, field, "{error}");
        assert_eq!(error.index, 1, "{error}");
        assert_eq!(error.resource, "r", "{error}");
        let shown = error.to_string();
        assert!(
            shown.starts_with(&format!("flow[1] (r): {field} ")),
            "{shown}"
        );
        assert_eq!(sentinel.flow_rules().rules(), in_force, "after {field}");
    }

    let errors = sentinel
        .flow_rules()
        .load(vec![FlowRule::new("r", -1.0)])
        .unwrap_err();
    assert_eq!(
        errors.errors()[0].to_string(),
        "flow[0] (r): count must be a finite number >= 0, got -1"
    );

    // Two bad rules: both reported, in order.
    let errors = sentinel
        .flow_rules()
        .load(vec![
            FlowRule::new("x", f64::INFINITY),
            FlowRule::new("y", 3.0),
            FlowRule {
                strategy: FlowStrategy::Chain,
                ..FlowRule::new("z", 1.0)
            },
        ])
        .unwrap_err();
    let found: Vec<_> = errors
        .errors()
        .iter()
        .map(|e| (e.index, e.resource.as_str(), e.field))
        .collect();
    assert_eq!(found, [(0, "x", "count"), (2, "z", "ref_resource")]);
    let shown = errors.to_string();
    assert!(
        shown.starts_with("2 invalid rule(s): flow[0] (x): count"),
        "{shown}"
    );
    assert!(shown.contains("; flow[2] (z): ref_resource"), "{shown}");

    // The rules loaded first are still in force, and still block.
    assert_eq!(sentinel.flow_rules().rules(), in_force);
    assert_eq!(admit(&sentinel, "r", 3), 1);
    assert_eq!(
        admit(&sentinel, "y", 5),
        5,
        "the refused list's good rule is not in force"
    );
}

// ---- 14. listeners ----

#[test]
fn listeners_hear_each_successful_load_and_no_refused_one() {
    let (_clock, sentinel) = instance();
    let heard: Arc<Mutex<Vec<Vec<FlowRule>>>> = Arc::default();
    let log = Arc::clone(&heard);
    sentinel
        .flow_rules()
        .on_change(move |rules| log.lock().unwrap().push(rules.to_vec()));

    let first = vec![FlowRule::new("r", 1.0), FlowRule::new("s", 2.0)];
    sentinel.flow_rules().load(first.clone()).unwrap();
    assert!(
        sentinel
            .flow_rules()
            .load(vec![FlowRule::new("r", -1.0)])
            .is_err()
    );
    let second = vec![warm_up_rule("r", 50.0)];
    sentinel.flow_rules().load(second.clone()).unwrap();
    sentinel.flow_rules().load(vec![]).unwrap();

    assert_eq!(*heard.lock().unwrap(), [first, second, vec![]]);
}

// ---- 15. a rule with a window of its own ----

fn two_second_rule() -> FlowRule {
    FlowRule {
        stat_interval_ms: 2_000,
        stat_sample_count: 4,
        ..FlowRule::new("r", 10.0)
    }
}

#[test]
fn a_rule_with_its_own_two_second_window_counts_passes_over_two_seconds() {
    let (clock, sentinel) = instance();
    load(&sentinel, [two_second_rule()]);

    // The check is `trunc(passes in 2 s / 2) + 1 <= 10`, as Sentinel's:
    // 20 fit at one instant (the next test pins it exactly).
    let first = admit(&sentinel, "r", 30);
    assert_eq!(first, 20, "admitted {first}");

    // A second later the node's own 1 s window is empty, the rule's is not.
    clock.advance_ms(1_000);
    assert_eq!(stats(&sentinel, "r").pass_qps(sentinel.now_ms()), 0.0);
    assert_eq!(admit(&sentinel, "r", 5), 0);
    clock.advance_ms(999);
    assert_eq!(admit(&sentinel, "r", 5), 0);
    // Two seconds after the first passes their bucket has left the window.
    clock.advance_ms(1);
    assert_eq!(admit(&sentinel, "r", 30), first);

    // Spread over the 4 buckets of 500 ms: the window sums all of them,
    // and each bucket leaves it 2 s after it started.
    clock.advance_ms(2_000);
    for i in 0..4 {
        assert_eq!(admit(&sentinel, "r", 4), 4, "bucket {i}");
        clock.advance_ms(500);
    }
    assert_eq!(admit(&sentinel, "r", 30), first - 12, "the first 4 left");
}

#[test]

fn a_rule_with_its_own_two_second_window_admits_count_times_its_seconds() {
    let (_clock, sentinel) = instance();
    load(&sentinel, [two_second_rule()]);
    // 10 QPS over a 2 s window: 20 passes in the window. Sentinel's
    // DefaultController reads `(int) node.passQps()`: 19 / 2 = 9 and
    // 9 + 1 <= 10 lets the 20th through; 20 / 2 + 1 > 10 blocks the 21st.
    assert_eq!(admit(&sentinel, "r", 20), 20);
    let err = sentinel.entry("r").unwrap_err();
    assert_eq!(blocking_rule(&err), &two_second_rule());
}

/// Blocks entries from origin `late`, after the flow check.
#[derive(Debug)]
struct BlockLate;

impl Slot for BlockLate {
    fn order(&self) -> i32 {
        slot::order::DEGRADE + 1
    }
    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        if ctx.origin() == "late" {
            return Err(ctx.block(BlockKind::Custom("late")));
        }
        Ok(())
    }
}

#[test]

fn a_rules_own_window_counts_only_entries_that_pass() {
    let (_clock, sentinel) = instance_with(|builder| builder.slot(BlockLate));
    load(
        &sentinel,
        [FlowRule {
            stat_interval_ms: 500,
            stat_sample_count: 1,
            ..FlowRule::new("r", 4.0)
        }],
    );

    // Passes the flow rule, then is blocked by the slot: no pass anywhere.
    let err = sentinel
        .entry_builder("r")
        .origin("late")
        .enter()
        .unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("late"));
    let now = sentinel.now_ms();
    assert_eq!(stats(&sentinel, "r").total_pass(now), 0);
    // 4 QPS over 500 ms: 2 passes fit in the bucket.
    assert_eq!(admit(&sentinel, "r", 5), 2);
}

#[test]
fn warm_up_rate_limiter_paces_at_the_cold_rate_first() {
    // Cold, the bucket is full: the warm-up rate is count / cold_factor,
    // 33.3 QPS, so entries are paced 30 ms apart (a plain rate limiter at
    // the same count paces them 10 ms apart).
    let (clock, sentinel) = instance();
    load(
        &sentinel,
        [
            FlowRule {
                control_behavior: ControlBehavior::WarmUpRateLimiter,
                max_queueing_time_ms: 0,
                ..FlowRule::new("warm", 100.0)
            },
            FlowRule {
                control_behavior: ControlBehavior::RateLimiter,
                max_queueing_time_ms: 0,
                ..FlowRule::new("plain", 100.0)
            },
        ],
    );
    assert!(sentinel.entry("warm").is_ok());
    assert!(sentinel.entry("plain").is_ok());
    clock.advance_ms(10);
    assert!(sentinel.entry("plain").is_ok(), "10 ms is the plain pace");
    assert_eq!(
        sentinel.entry("warm").unwrap_err().kind(),
        BlockKind::Flow,
        "too early for the warm-up pace"
    );
    clock.advance_ms(19);
    assert!(sentinel.entry("warm").is_err(), "29 ms is still too early");
    clock.advance_ms(1);
    assert!(sentinel.entry("warm").is_ok(), "30 ms is the cold pace");
}

#[test]
fn a_listener_may_load_rules_itself() {
    // A listener that reacts to a load by loading again (say, adding a
    // derived rule) must not deadlock, and hears both loads.
    let (_clock, sentinel) = instance();
    let sentinel = Arc::new(sentinel);
    let heard = Arc::new(Mutex::new(Vec::new()));
    let (inner, log) = (Arc::downgrade(&sentinel), Arc::clone(&heard));
    sentinel.flow_rules().on_change(move |rules| {
        log.lock().unwrap().push(rules.len());
        if rules.len() == 1
            && let Some(sentinel) = inner.upgrade()
        {
            let mut more = rules.to_vec();
            more.push(FlowRule::new("derived", 5.0));
            sentinel.flow_rules().load(more).unwrap();
        }
    });
    load(&sentinel, [FlowRule::new("r", 1.0)]);
    assert_eq!(sentinel.flow_rules().rules().len(), 2);
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard, vec![1, 2]);
}
