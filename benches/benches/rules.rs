//! Entry + exit through a `Resource` handle with one rule of each kind
//! besides flow, none of them refusing: what checking a rule costs.
//!
//! Cases, in one run: no rule (the baseline); one closed circuit breaker
//! (error ratio); a hot-parameter QPS rule on a string argument built for
//! each call (a short string, kept inline: no allocation); the same with a
//! long string (shared, allocated per call); an authority white list with
//! the caller's origin; a system QPS limit on an inbound entry.
//!
//! Run: `cargo bench -p benches --bench rules`

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use benches::Pool;
use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};
use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::param_flow::ParamFlowRule;
use sentinel_flow_core::system::SystemRule;
use sentinel_flow_core::{EntryType, ParamValue, Resource, Sentinel};

/// A threshold no bench reaches.
const NEVER: f64 = 1e15;
/// Per second per value: above what one thread reaches here (checked at
/// the end: no case may have blocked).
const PER_VALUE: f64 = 6e7;

fn rules(c: &mut Criterion) {
    // Leaked so that the workers' closures can be 'static.
    let sentinel: &'static Sentinel = Box::leak(Box::new(Sentinel::builder().build()));
    sentinel
        .degrade_rules()
        .load(vec![DegradeRule::new(
            "breaker",
            DegradeGrade::ErrorRatio,
            0.5,
        )])
        .expect("valid rules");
    sentinel
        .param_flow_rules()
        .load(vec![
            ParamFlowRule::new("param", 0, PER_VALUE),
            ParamFlowRule::new("param_long", 0, PER_VALUE),
        ])
        .expect("valid rules");
    sentinel
        .authority_rules()
        .load(vec![AuthorityRule::new(
            "authority",
            AuthorityStrategy::White,
            ["checkout", "ops"],
        )])
        .expect("valid rules");
    sentinel
        .system_rules()
        .load(vec![SystemRule {
            qps: Some(NEVER),
            ..SystemRule::default()
        }])
        .expect("valid rules");

    let pool = Pool::new(1);
    let mut group = c.benchmark_group("rules");
    group.throughput(Throughput::Elements(1));
    let handle = |name: &str| -> Arc<Resource<'static>> { Arc::new(sentinel.resource(name)) };

    let free = handle("free");
    case(&mut group, &pool, "no_rule", move |_| {
        drop(black_box(free.entry()));
    });
    let breaker = handle("breaker");
    case(&mut group, &pool, "closed_breaker", move |_| {
        drop(black_box(breaker.entry()));
    });
    let param = handle("param");
    case(&mut group, &pool, "param_flow_short_string", move |_| {
        let args = [ParamValue::from(black_box("sku-12345"))];
        drop(black_box(param.builder().args(&args).enter()));
    });
    let long = handle("param_long");
    case(&mut group, &pool, "param_flow_long_string", move |_| {
        let args = [ParamValue::from(black_box(
            "customer-0000000000-0000000042",
        ))];
        drop(black_box(long.builder().args(&args).enter()));
    });
    let authority = handle("authority");
    case(&mut group, &pool, "authority_white_list", move |_| {
        drop(black_box(authority.builder().origin("ops").enter()));
    });
    let system = handle("system");
    case(&mut group, &pool, "system_qps_inbound", move |_| {
        let entry = system.builder().entry_type(EntryType::Inbound).enter();
        drop(black_box(entry));
    });
    group.finish();
    let now = sentinel.now_ms();
    for node in sentinel.resource_nodes() {
        let blocked = node.stats().total_block(now);
        assert_eq!(blocked, 0, "{} blocked {blocked} entries", node.name());
    }
}

/// Measures `op` on one worker of `pool`.
fn case<F>(group: &mut BenchmarkGroup<'_, WallTime>, pool: &Pool, name: &str, op: F)
where
    F: Fn(usize) + Send + Sync + 'static,
{
    let op = Arc::new(op);
    group.bench_function(name, |b| {
        b.iter_custom(|iters| pool.run(1, iters, Arc::clone(&op)))
    });
}

criterion_group!(benches, rules);
criterion_main!(benches);
