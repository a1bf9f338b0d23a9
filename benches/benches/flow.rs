//! Entry + exit through a `Resource` handle with one flow rule.
//!
//! Cases, in one run: no rule (the baseline of the entry bench); a reject
//! QPS rule that never blocks; one that always blocks (the block path); the
//! never-blocking rule on two threads; a warm-up rule, a rate limiter whose
//! pace never queues, and a concurrency rule, each never blocking; and,
//! beside the concurrency rule, an adaptive concurrency rule (Gradient2's
//! defaults) whose limit one thread never reaches (`adaptive_pass`): its
//! admission, its sample at the exit, and a window folded each second.
//!
//! Run: `cargo bench -p benches --bench flow`

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use benches::Pool;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use sentinel_flow_core::adaptive::{AdaptiveAlgorithm, AdaptiveRule};
use sentinel_flow_core::flow::{ControlBehavior, FlowGrade, FlowRule};
use sentinel_flow_core::{Resource, Sentinel};

/// A threshold no bench reaches: 10^11 entries a second.
const NEVER: f64 = 1e11;

fn flow(c: &mut Criterion) {
    // Leaked so that the workers' closures can be 'static.
    let sentinel: &'static Sentinel = Box::leak(Box::new(Sentinel::builder().build()));
    let rule = |resource: &str, count: f64| FlowRule::new(resource, count);
    sentinel
        .flow_rules()
        .load(vec![
            rule("pass", NEVER),
            rule("block", 0.0),
            FlowRule {
                control_behavior: ControlBehavior::WarmUp,
                ..rule("warm_up", NEVER)
            },
            FlowRule {
                control_behavior: ControlBehavior::RateLimiter,
                ..rule("rate_limiter", NEVER)
            },
            FlowRule {
                grade: FlowGrade::Concurrency,
                ..rule("concurrency", NEVER)
            },
        ])
        .expect("valid rules");
    // A limit of at least 20 (Gradient2's minimum) against one call in
    // flight at a time.
    sentinel
        .adaptive_rules()
        .load(vec![AdaptiveRule::new(
            "adaptive",
            AdaptiveAlgorithm::gradient2(),
        )])
        .expect("valid rules");
    let pool = Pool::new(2);
    let mut group = c.benchmark_group("flow");
    let cases = [
        ("no_rule", "free"),
        ("reject_pass", "pass"),
        ("reject_block", "block"),
        ("warm_up", "warm_up"),
        ("rate_limiter", "rate_limiter"),
        ("concurrency", "concurrency"),
        ("adaptive_pass", "adaptive"),
    ];
    group.throughput(Throughput::Elements(1));
    for (case, resource) in cases {
        let handle: Arc<Resource<'static>> = Arc::new(sentinel.resource(resource));
        let op = Arc::new(move |_: usize| {
            drop(black_box(handle.entry()));
        });
        group.bench_function(BenchmarkId::new(case, 1), |b| {
            b.iter_custom(|iters| pool.run(1, iters, Arc::clone(&op)))
        });
        if case == "reject_pass" {
            group.throughput(Throughput::Elements(2));
            group.bench_function(BenchmarkId::new(case, 2), |b| {
                b.iter_custom(|iters| pool.run(2, iters, Arc::clone(&op)))
            });
            group.throughput(Throughput::Elements(1));
        }
    }
    group.finish();
    let now = sentinel.now_ms();
    for resource in ["concurrency", "adaptive"] {
        let node = sentinel.resource_node(resource).expect("entered");
        let blocked = node.stats().total_block(now);
        assert_eq!(blocked, 0, "{resource} blocked {blocked} entries");
    }
}

criterion_group!(benches, flow);
criterion_main!(benches);
