//! What loading a rule file costs: parse + validate + apply, the whole of
//! a reload. Cases: 10 000 flow rules on as many resources reloaded into
//! an instance holding them with other counts (every rule recompiled) and
//! with the same ones (every rule reused); and files at the 4 MiB size
//! limit in the shapes that were quadratic (top-level keys, fields of one
//! rule, `track_percentiles` names, hot-parameter items, distinct flow
//! rules), each parsed and applied to a fresh instance.
//!
//! Run: `cargo bench -p benches --bench reload`

// criterion_group! generates an undocumented function.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use sentinel_flow_core::{ManualClock, Sentinel};
use sentinel_flow_rules::{DEFAULT_MAX_SIZE, apply, parse_str};

fn ten_thousand(offset: usize) -> String {
    let mut text = String::from("flow:\n");
    for i in 0..10_000 {
        text.push_str(&format!(
            "  - {{resource: GET:/api/v1/orders/{i}, count: {}, grade: qps}}\n",
            100 + i + offset
        ));
    }
    text
}

fn at_size_limit(head: &str, line: impl Fn(usize) -> String) -> String {
    let mut text = String::from(head);
    for i in 0.. {
        let next = line(i);
        if text.len() + next.len() > DEFAULT_MAX_SIZE {
            break;
        }
        text.push_str(&next);
    }
    text
}

fn reload(c: &mut Criterion) {
    let mut group = c.benchmark_group("reload");
    group.throughput(Throughput::Elements(10_000));
    let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
    let files = [ten_thousand(0), ten_thousand(1)];
    apply(&sentinel, parse_str(&files[0], "rules.yaml").unwrap()).unwrap();
    let mut round = 0;
    group.bench_function("10k_rules_changed", |b| {
        b.iter(|| {
            round += 1;
            let file = parse_str(&files[round % 2], "rules.yaml").unwrap();
            black_box(apply(&sentinel, file).unwrap());
        })
    });
    group.bench_function("10k_rules_same", |b| {
        b.iter(|| {
            let file = parse_str(&files[round % 2], "rules.yaml").unwrap();
            black_box(apply(&sentinel, file).unwrap());
        })
    });
    group.finish();

    let mut group = c.benchmark_group("file_at_size_limit");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(DEFAULT_MAX_SIZE as u64));
    let shapes = [
        (
            "top_level_keys",
            at_size_limit("", |i| format!("k{i}: 1\n")),
        ),
        (
            "fields_of_one_rule",
            at_size_limit("flow:\n  - resource: r\n    count: 1\n", |i| {
                format!("    f{i}: 1\n")
            }),
        ),
        (
            "track_percentiles",
            at_size_limit("track_percentiles:\n", |i| format!("  - r{i}\n")),
        ),
        (
            "param_items",
            at_size_limit(
                "param_flow:\n  - resource: r\n    param_idx: 0\n    count: 1\n    param_flow_item_list:\n",
                |i| format!("      - {{value: {i}, count: 1}}\n"),
            ),
        ),
        (
            "distinct_flow_rules",
            at_size_limit("flow:\n", |i| format!("  - {{resource: r{i}, count: 1}}\n")),
        ),
    ];
    for (name, text) in &shapes {
        group.bench_function(*name, |b| {
            b.iter_batched(
                // The caps on names and memory raised, as in the load_time
                // tests: the largest file (over 100 000 distinct names) is
                // applied in full, not refused.
                || {
                    Sentinel::builder()
                        .clock(ManualClock::new(0))
                        .max_rule_names(10_000_000)
                        .rule_memory_budget(usize::MAX)
                        .build()
                },
                |sentinel| {
                    if let Ok(file) = parse_str(text, "rules.yaml") {
                        black_box(apply(&sentinel, file).unwrap());
                    }
                    sentinel
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, reload);
criterion_main!(benches);
