//! Mutation fuzzing of rule files through parse, apply and use, the reach
//! of a cargo-fuzz target as a proptest: valid files are mangled (bytes
//! flipped, values swapped for extremes, keys repeated, values nested
//! deep, strings made huge); a refused file must say where each problem
//! is, and every accepted file is applied to a fresh instance on a
//! `ManualClock` and used (entries through every resource it names, with
//! origins and arguments, errors, batches, the clock advanced), and
//! nothing may panic.
//!
//! Cases: `SENTINEL_FUZZ_CASES` (default 256), e.g.
//! `SENTINEL_FUZZ_CASES=20000 cargo test -p sentinel-flow-rules --test fuzz`
//! (a debug build, where arithmetic overflow panics; CI runs this).

use proptest::prelude::*;
use sentinel_flow_core::{Entering, EntryType, ManualClock, ParamValue, Sentinel};
use sentinel_flow_rules::{LoadOptions, RuleFile, parse_bytes};

const EXAMPLE: &str = include_str!("../../examples/hot-reload/rules.yaml");

/// Every kind with every field, the less common settings among them.
const EVERY_FIELD: &str = "\
version: fuzz
flow:
  - {resource: a, count: 10, grade: qps, limit_app: default, strategy: direct, control_behavior: warm_up, warm_up_period_sec: 10, warm_up_cold_factor: 3, id: 1}
  - {resource: a, count: 5, limit_app: checkout, control_behavior: rate_limiter, max_queueing_time_ms: 20}
  - {resource: b, count: 3, grade: concurrency, limit_app: other}
  - {resource: b, count: 7, strategy: relate, ref_resource: a, control_behavior: warm_up_rate_limiter, max_queueing_time_ms: 10}
  - {resource: c, count: 2, strategy: chain, ref_resource: ctx, stat_interval_ms: 500, stat_sample_count: 5}
  - {resource: d, count: 100, cluster_mode: true, cluster_config: {flow_id: 9, threshold_type: avg_local, fallback_to_local_when_fail: true, sample_count: 10, window_interval_ms: 1000}}
degrade:
  - {resource: a, grade: slow_request_ratio, count: 50, slow_ratio_threshold: 0.5, time_window_sec: 1, min_request_amount: 1, stat_interval_ms: 1000, probe_num: 2}
  - {resource: b, grade: error_ratio, count: 0.5, time_window_sec: 2, min_request_amount: 2}
  - {resource: c, grade: error_count, count: 3, time_window_sec: 1}
system:
  - {qps: 1000, max_thread: 50, avg_rt: 100, highest_cpu_usage: 0.99, highest_system_load: 100.0}
authority:
  - {resource: a, strategy: black, limit_app: [evil, worse]}
  - {resource: e, strategy: white, limit_app: checkout}
param_flow:
  - resource: a
    param_idx: 0
    count: 2
    burst_count: 1
    duration_in_sec: 2
    capacity: 100
    param_flow_item_list:
      - {value: vip, count: 10}
      - {value: 7, count: 0}
      - {value: true, count: 1}
  - {resource: b, param_idx: -1, count: 1, grade: concurrency}
  - {resource: c, param_idx: 1, count: 3, control_behavior: rate_limiter, max_queueing_time_ms: 50}
track_percentiles: [a, b]
";

const SEEDS: [&str; 2] = [EXAMPLE, EVERY_FIELD];

/// Values that sit at or past the edge of what a field takes.
const EXTREMES: &[&str] = &[
    "0",
    "-1",
    "1",
    "1e308",
    "-1e308",
    "1e19",
    "1e-300",
    "0.0000001",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "4294967295",
    "4294967296",
    "2147483647",
    "-2147483648",
    "67108862",
    "16777216",
    "100000000",
    ".nan",
    ".inf",
    "-.inf",
    "0x7fffffff",
    "true",
    "null",
    "~",
    "\"\"",
    "[]",
    "{}",
    "[1, 2]",
    "x",
    "\"7\"",
    "'\\u0000'",
];

/// The fields whose values size or time something.
const NUMERIC_FIELDS: &[&str] = &[
    "count",
    "warm_up_period_sec",
    "warm_up_cold_factor",
    "max_queueing_time_ms",
    "stat_interval_ms",
    "stat_sample_count",
    "flow_id",
    "sample_count",
    "window_interval_ms",
    "time_window_sec",
    "min_request_amount",
    "slow_ratio_threshold",
    "probe_num",
    "qps",
    "max_thread",
    "avg_rt",
    "highest_cpu_usage",
    "highest_system_load",
    "param_idx",
    "burst_count",
    "duration_in_sec",
    "capacity",
];

#[derive(Clone, Debug)]
enum Mutation {
    /// Replace the byte at (a fraction of) the length.
    Byte(f64, u8),
    /// Insert text at (a fraction of) the length.
    Insert(f64, String),
    /// Swap the `n`th value (after `: `) for an extreme.
    Value(usize, &'static str),
    /// Swap the `n`th value of a size-like field for an extreme.
    Field(usize, &'static str, &'static str),
    /// A value made a huge string.
    Huge(usize, usize),
    /// A line written twice (a key repeated).
    Repeat(usize),
    /// A line dropped.
    Drop(usize),
    /// A value nested `depth` lists or mappings deep.
    Nest(usize, usize, bool),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (0.0..1.0f64, any::<u8>()).prop_map(|(at, b)| Mutation::Byte(at, b)),
        (0.0..1.0f64, "[\\[\\]{}&*!|>'\"#%@ ,:.0-9a-z\n-]{1,6}")
            .prop_map(|(at, s)| Mutation::Insert(at, s)),
        (any::<usize>(), proptest::sample::select(EXTREMES))
            .prop_map(|(n, v)| Mutation::Value(n, v)),
        (
            any::<usize>(),
            proptest::sample::select(NUMERIC_FIELDS),
            proptest::sample::select(EXTREMES)
        )
            .prop_map(|(n, f, v)| Mutation::Field(n, f, v)),
        (any::<usize>(), 1_000..200_000usize).prop_map(|(n, len)| Mutation::Huge(n, len)),
        any::<usize>().prop_map(Mutation::Repeat),
        any::<usize>().prop_map(Mutation::Drop),
        (any::<usize>(), 1..40usize, any::<bool>()).prop_map(|(n, d, m)| Mutation::Nest(n, d, m)),
    ]
}

/// Where the values of `text` are: after each `: `, up to the next `,`,
/// `}`, `]`, `#` or end of line.
fn values(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(found) = text[i..].find(": ") {
        let start = i + found + 2;
        let mut end = start;
        while end < bytes.len() && !matches!(bytes[end], b',' | b'}' | b']' | b'#' | b'\n') {
            end += 1;
        }
        out.push((start, end));
        i = start;
    }
    out
}

fn apply(text: &mut Vec<u8>, m: &Mutation) {
    let at = |f: f64, len: usize| ((f * len as f64) as usize).min(len);
    let s = String::from_utf8_lossy(text).into_owned();
    match m {
        Mutation::Byte(f, b) if !text.is_empty() => {
            let i = at(*f, text.len() - 1);
            text[i] = *b;
        }
        Mutation::Byte(..) => {}
        Mutation::Insert(f, junk) => {
            let i = at(*f, text.len());
            text.splice(i..i, junk.bytes());
        }
        Mutation::Value(n, _) | Mutation::Nest(n, _, _) | Mutation::Huge(n, _) => {
            let spots = values(&s);
            if spots.is_empty() {
                return;
            }
            let (start, end) = spots[n % spots.len()];
            let new = match m {
                Mutation::Value(_, v) => (*v).to_owned(),
                Mutation::Huge(_, len) => "h".repeat(*len),
                Mutation::Nest(_, depth, true) => {
                    format!("{}1{}", "[".repeat(*depth), "]".repeat(*depth))
                }
                _ => {
                    let (d, inner) = match m {
                        Mutation::Nest(_, d, _) => (*d, &s[start..end]),
                        _ => unreachable!(),
                    };
                    format!("{}{inner}{}", "{k: ".repeat(d), "}".repeat(d))
                }
            };
            *text = format!("{}{new}{}", &s[..start], &s[end..]).into_bytes();
        }
        Mutation::Field(n, field, v) => {
            let key = format!("{field}: ");
            let spots: Vec<(usize, usize)> = values(&s)
                .into_iter()
                .filter(|&(start, _)| s[..start].ends_with(&key))
                .collect();
            if let Some(&(start, end)) = spots.get(n % spots.len().max(1)) {
                *text = format!("{}{v}{}", &s[..start], &s[end..]).into_bytes();
            }
        }
        Mutation::Repeat(n) | Mutation::Drop(n) => {
            let mut lines: Vec<&str> = s.split_inclusive('\n').collect();
            if lines.is_empty() {
                return;
            }
            let i = n % lines.len();
            match m {
                Mutation::Repeat(_) => lines.insert(i, lines[i]),
                _ => {
                    lines.remove(i);
                }
            }
            *text = lines.concat().into_bytes();
        }
    }
}

/// Whole-file problems, which have no place in it.
fn whole_file(message: &str) -> bool {
    message.starts_with("... and ")
        || message.starts_with("the file is empty")
        || message.starts_with("the file is larger than")
}

/// Applies `file` to a fresh instance and sends entries through every
/// resource it names, with its origins and parameter values, for a few
/// windows of a clock that also jumps.
fn use_rules(file: RuleFile) {
    let clock = ManualClock::new(1_700_000_000_000);
    let sentinel = Sentinel::builder().clock(clock.clone()).build();
    let book = file.book.clone();
    if let Err(errors) = sentinel_flow_rules::apply(&sentinel, file) {
        // A validated file is applied whole.
        panic!("an accepted file was refused by the core: {errors}");
    }
    let mut resources: Vec<String> = Vec::new();
    let mut origins: Vec<String> = vec![String::new(), "checkout".into(), "other".into()];
    let mut args: Vec<Vec<ParamValue>> = vec![
        vec![],
        vec![
            ParamValue::from("vip"),
            ParamValue::from(7i64),
            ParamValue::from(true),
        ],
        vec![
            ParamValue::from(u64::MAX),
            ParamValue::list(["a", "b", "vip"]),
        ],
    ];
    for rule in &book.flow {
        resources.push(rule.resource.clone());
        resources.extend(rule.ref_resource.clone());
        origins.push(rule.limit_app.clone());
    }
    resources.extend(book.degrade.iter().map(|r| r.resource.clone()));
    for rule in &book.authority {
        resources.push(rule.resource.clone());
        origins.extend(rule.limit_app.iter().cloned());
    }
    for rule in &book.param_flow {
        resources.push(rule.resource.clone());
        let values: Vec<ParamValue> = rule
            .param_flow_item_list
            .iter()
            .map(|item| item.value.clone())
            .collect();
        args.push(values.clone());
        args.push(values.into_iter().rev().collect());
    }
    resources.push("unruled".into());
    resources.sort();
    resources.dedup();
    origins.truncate(8);
    args.truncate(8);
    let steps = [0u64, 1, 7, 250, 999, 1_000, 60_000, 3_600_000];
    for (round, step) in steps.iter().enumerate() {
        clock.advance_ms(*step);
        for resource in &resources {
            for (i, origin) in origins.iter().enumerate() {
                let args = &args[(round + i) % args.len()];
                let batch = [1, 2, 1_000, u32::MAX][(round + i) % 4];
                let entry_type = match i % 2 {
                    0 => EntryType::Inbound,
                    _ => EntryType::Outbound,
                };
                let entering = sentinel
                    .entry_builder(resource)
                    .origin(origin)
                    .context(if i % 3 == 0 { "ctx" } else { "" })
                    .args(args)
                    .batch_count(if round % 3 == 0 { batch } else { 1 })
                    .entry_type(entry_type)
                    .enter_or_queue();
                let entry = match entering {
                    Ok(Entering::Entered(entry)) => entry,
                    Ok(Entering::Queued(queued)) => {
                        let _ = queued.wait();
                        queued.admit()
                    }
                    Err(_) => continue,
                };
                clock.advance_ms(u64::from(i as u32 % 3) * 40);
                if (round + i) % 3 == 0 {
                    entry.set_error("boom");
                }
                entry.exit();
            }
        }
    }
    // Reading everything back must not panic either.
    let _ = sentinel.rule_book();
    let _ = sentinel.param_flow_rules().tables();
    let _ = sentinel.degrade_rules().breakers();
}

fn cases() -> u32 {
    std::env::var("SENTINEL_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_rule_files_parse_apply_and_run(
        seed in 0..SEEDS.len(),
        mutations in proptest::collection::vec(mutation(), 1..5),
    ) {
        let mut text = SEEDS[seed].as_bytes().to_vec();
        for m in &mutations {
            apply(&mut text, m);
        }
        match parse_bytes(&text, "fuzz.yaml", &LoadOptions::default()) {
            Ok(file) => use_rules(file),
            Err(error) => {
                prop_assert!(!error.problems().is_empty());
                for problem in error.problems() {
                    prop_assert!(
                        problem.position.is_some() || whole_file(&problem.message),
                        "a problem without a place: {problem}"
                    );
                }
            }
        }
    }
}

/// The fields of each kind with values that a real rule might hold;
/// [`EXTREMES`] are mixed in.
/// A kind's fields, each with usual values.
type Fields = &'static [(&'static str, &'static [&'static str])];

const KINDS: &[(&str, Fields)] = &[
    (
        "flow",
        &[
            ("resource", &["a", "b", "c"]),
            ("count", &["0", "1", "10", "2.5", "1000"]),
            ("grade", &["qps", "concurrency"]),
            ("limit_app", &["default", "other", "checkout"]),
            ("strategy", &["direct", "relate", "chain"]),
            ("ref_resource", &["a", "b", "ctx"]),
            (
                "control_behavior",
                &["reject", "warm_up", "rate_limiter", "warm_up_rate_limiter"],
            ),
            ("warm_up_period_sec", &["0", "1", "10"]),
            ("warm_up_cold_factor", &["1", "2", "3"]),
            ("max_queueing_time_ms", &["0", "10", "500"]),
            ("stat_interval_ms", &["100", "1000", "60000"]),
            ("stat_sample_count", &["1", "2", "10"]),
            ("cluster_mode", &["false", "true"]),
            (
                "cluster_config",
                &[
                    "{flow_id: 1}",
                    "{flow_id: 2, threshold_type: avg_local, sample_count: 5, window_interval_ms: 500}",
                ],
            ),
        ],
    ),
    (
        "degrade",
        &[
            ("resource", &["a", "b", "c"]),
            (
                "grade",
                &["slow_request_ratio", "error_ratio", "error_count"],
            ),
            ("count", &["0", "0.5", "1", "50"]),
            ("time_window_sec", &["0", "1", "10"]),
            ("min_request_amount", &["0", "1", "5"]),
            ("slow_ratio_threshold", &["0", "0.5", "1"]),
            ("stat_interval_ms", &["100", "1000", "120000"]),
            ("probe_num", &["1", "3"]),
        ],
    ),
    (
        "system",
        &[
            ("qps", &["1", "100"]),
            ("max_thread", &["1", "50"]),
            ("avg_rt", &["1", "100"]),
            ("highest_cpu_usage", &["0.5", "1"]),
            ("highest_system_load", &["1", "8.0"]),
        ],
    ),
    (
        "authority",
        &[
            ("resource", &["a", "b"]),
            ("strategy", &["white", "black"]),
            ("limit_app", &["checkout", "[checkout, ops]", "[]"]),
        ],
    ),
    (
        "param_flow",
        &[
            ("resource", &["a", "b", "c"]),
            ("param_idx", &["0", "1", "-1"]),
            ("grade", &["qps", "concurrency"]),
            ("count", &["0", "1", "5"]),
            ("control_behavior", &["reject", "rate_limiter"]),
            ("max_queueing_time_ms", &["0", "50"]),
            ("burst_count", &["0", "3"]),
            ("duration_in_sec", &["1", "2", "60"]),
            ("capacity", &["1", "100"]),
            (
                "param_flow_item_list",
                &[
                    "[{value: vip, count: 10}]",
                    "[{value: 7, count: 0}, {value: true, count: 2}]",
                ],
            ),
        ],
    ),
];

/// One rule of `kind`: each field left out, given a usual value or an
/// extreme, as `choices` say.
fn rule_text(fields: &[(&str, &[&str])], choices: &[(u8, usize)]) -> String {
    let mut parts = Vec::new();
    for ((name, usual), (how, pick)) in fields.iter().zip(choices) {
        let required = matches!(*name, "resource" | "count" | "param_idx" | "limit_app")
            || (*name == "grade" && fields.len() == 8);
        let value = match how % 10 {
            0 | 1 if !required => continue,
            2 => EXTREMES[pick % EXTREMES.len()],
            _ => usual[pick % usual.len()],
        };
        parts.push(format!("{name}: {value}"));
    }
    format!("  - {{{}}}\n", parts.join(", "))
}

fn generated_file() -> impl Strategy<Value = String> {
    let rule = proptest::collection::vec((any::<u8>(), any::<usize>()), 14);
    proptest::collection::vec((0..KINDS.len(), rule), 1..5).prop_map(|rules| {
        let mut by_kind: Vec<String> = vec![String::new(); KINDS.len()];
        for (kind, choices) in rules {
            by_kind[kind].push_str(&rule_text(KINDS[kind].1, &choices));
        }
        let mut text = String::new();
        for (i, rules) in by_kind.iter().enumerate() {
            if !rules.is_empty() {
                text.push_str(&format!("{}:\n{rules}", KINDS[i].0));
            }
        }
        text
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Files written from scratch, every field of every kind at times
    /// extreme: most are accepted and used.
    #[test]
    fn generated_rule_files_parse_apply_and_run(text in generated_file()) {
        match parse_bytes(text.as_bytes(), "fuzz.yaml", &LoadOptions::default()) {
            Ok(file) => use_rules(file),
            Err(error) => {
                for problem in error.problems() {
                    prop_assert!(
                        problem.position.is_some() || whole_file(&problem.message),
                        "a problem without a place: {problem}"
                    );
                }
            }
        }
    }
}

#[test]
fn the_seeds_are_accepted_and_run() {
    for seed in SEEDS {
        let file = parse_bytes(seed.as_bytes(), "seed.yaml", &LoadOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        use_rules(file);
    }
}
