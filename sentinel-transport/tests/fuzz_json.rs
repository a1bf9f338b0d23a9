//! Fuzzing the rules the command API reads as Sentinel's JSON, through
//! `setRules` and `setParamFlowRules` on a running command center: lists
//! of rules with every field at times extreme (0, -1, 1e308, u64::MAX,
//! NaN as a string, huge strings, wrong types, deep nesting) and mangled
//! JSON text. Every answer must be 200 or a 400 that says what is wrong;
//! after each accepted push, entries go through every resource named
//! (with origins and arguments, errors, the clock advanced): nothing may
//! panic, and the server must keep answering.
//!
//! Cases: `SENTINEL_FUZZ_CASES` (default 256).

mod common;

use common::{instance, post_form, raw_status, runtime, writable_server};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use sentinel_flow_core::{Entering, EntryType, ManualClock, ParamValue, Sentinel};
use sentinel_flow_transport::DEFAULT_MAX_BODY_BYTES;

const EXTREMES: &[&str] = &[
    "0",
    "-1",
    "1",
    "1e308",
    "-1e308",
    "1e19",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775807",
    "-9223372036854775808",
    "4294967295",
    "4294967296",
    "2147483647",
    "100000000",
    "16777216",
    "0.5",
    "\"NaN\"",
    "\"x\"",
    "null",
    "true",
    "[]",
    "{}",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
];

/// Each kind's command, `type` and fields with usual values.
type Fields = &'static [(&'static str, &'static [&'static str])];
const KINDS: &[(&str, &str, Fields)] = &[
    (
        "setRules",
        "flow",
        &[
            ("resource", &["\"a\"", "\"b\""]),
            ("count", &["0", "1", "10", "2.5"]),
            ("grade", &["0", "1"]),
            ("limitApp", &["\"default\"", "\"other\"", "\"checkout\""]),
            ("strategy", &["0", "1", "2"]),
            ("refResource", &["\"a\"", "\"ctx\""]),
            ("controlBehavior", &["0", "1", "2", "3"]),
            ("warmUpPeriodSec", &["1", "10"]),
            ("warmUpColdFactor", &["2", "3"]),
            ("maxQueueingTimeMs", &["0", "20"]),
            ("statIntervalMs", &["1000"]),
            ("statSampleCount", &["2"]),
            ("clusterMode", &["false", "true"]),
            (
                "clusterConfig",
                &["{\"flowId\": 1}", "{\"flowId\": 2, \"thresholdType\": 1}"],
            ),
        ],
    ),
    (
        "setRules",
        "degrade",
        &[
            ("resource", &["\"a\"", "\"b\""]),
            ("grade", &["0", "1", "2"]),
            ("count", &["0.5", "1", "50"]),
            ("timeWindow", &["1", "10"]),
            ("minRequestAmount", &["1", "5"]),
            ("slowRatioThreshold", &["0.5", "1"]),
            ("statIntervalMs", &["1000"]),
            ("probeNum", &["1"]),
        ],
    ),
    (
        "setRules",
        "system",
        &[
            ("qps", &["100"]),
            ("maxThread", &["50"]),
            ("avgRt", &["100"]),
            ("highestCpuUsage", &["0.9"]),
            ("highestSystemLoad", &["8"]),
        ],
    ),
    (
        "setRules",
        "authority",
        &[
            ("resource", &["\"a\""]),
            ("strategy", &["0", "1"]),
            ("limitApp", &["\"checkout\"", "\"checkout,ops\""]),
        ],
    ),
    (
        "setParamFlowRules",
        "param",
        &[
            ("resource", &["\"a\"", "\"b\""]),
            ("paramIdx", &["0", "1", "-1"]),
            ("grade", &["0", "1"]),
            ("count", &["1", "5"]),
            ("controlBehavior", &["0", "2"]),
            ("maxQueueingTimeMs", &["0", "20"]),
            ("burstCount", &["0", "2"]),
            ("durationInSec", &["1", "2"]),
            ("capacity", &["100"]),
            (
                "paramFlowItemList",
                &[
                    "[{\"object\": \"vip\", \"classType\": \"String\", \"count\": 10}]",
                    "[{\"object\": \"7\", \"classType\": \"int\", \"count\": 0}]",
                ],
            ),
        ],
    ),
];

/// A push: which kind, and the JSON of its list (perhaps mangled).
fn push() -> impl Strategy<Value = (usize, String)> {
    let field = (any::<u8>(), any::<usize>());
    let rule = proptest::collection::vec(field, 14);
    let rules = proptest::collection::vec(rule, 0..4);
    let mangle =
        proptest::option::weighted(0.2, (any::<usize>(), "[\\[\\]{}\",:0-9a-z.\\\\-]{1,4}"));
    let huge = proptest::option::weighted(0.05, 10_000..300_000usize);
    (0..KINDS.len(), rules, mangle, huge).prop_map(|(kind, rules, mangle, huge)| {
        let fields = KINDS[kind].2;
        let objects: Vec<String> = rules
            .iter()
            .map(|choices| {
                let parts: Vec<String> = fields
                    .iter()
                    .zip(choices)
                    .filter_map(|((name, usual), (how, pick))| {
                        let value = match how % 10 {
                            0 if *name != "resource" => return None,
                            1 => EXTREMES[pick % EXTREMES.len()].to_owned(),
                            2 if huge.is_some() => format!("\"{}\"", "h".repeat(huge.unwrap_or(0))),
                            _ => usual[pick % usual.len()].to_owned(),
                        };
                        Some(format!("\"{name}\": {value}"))
                    })
                    .collect();
                format!("{{{}}}", parts.join(", "))
            })
            .collect();
        let mut json = format!("[{}]", objects.join(", "));
        if let Some((at, junk)) = mangle {
            let mut at = at % (json.len() + 1);
            while !json.is_char_boundary(at) {
                at -= 1;
            }
            json.insert_str(at, &junk);
        }
        (kind, json)
    })
}

/// Entries through every resource the instance's rules name, with
/// origins and arguments, some failing, the clock advancing.
fn use_rules(sentinel: &Sentinel, clock: &ManualClock) {
    let book = sentinel.rule_book();
    let mut resources: Vec<String> = vec!["unruled".into()];
    resources.extend(book.flow.iter().map(|r| r.resource.clone()));
    resources.extend(book.flow.iter().filter_map(|r| r.ref_resource.clone()));
    resources.extend(book.degrade.iter().map(|r| r.resource.clone()));
    resources.extend(book.authority.iter().map(|r| r.resource.clone()));
    resources.extend(book.param_flow.iter().map(|r| r.resource.clone()));
    resources.sort();
    resources.dedup();
    let origins = ["", "checkout", "ops", "other"];
    let args = [
        vec![],
        vec![ParamValue::from("vip"), ParamValue::from(7i64)],
        vec![ParamValue::from(u64::MAX), ParamValue::list(["vip", "x"])],
    ];
    for (round, step) in [0u64, 1, 500, 1_000, 60_000, 3_600_000].iter().enumerate() {
        clock.advance_ms(*step);
        for resource in &resources {
            for (i, origin) in origins.iter().enumerate() {
                let entering = sentinel
                    .entry_builder(resource)
                    .origin(origin)
                    .args(&args[(round + i) % args.len()])
                    .batch_count([1, 3, u32::MAX][(round + i) % 3])
                    .entry_type(match i % 2 {
                        0 => EntryType::Inbound,
                        _ => EntryType::Outbound,
                    })
                    .enter_or_queue();
                let entry = match entering {
                    Ok(Entering::Entered(entry)) => entry,
                    Ok(Entering::Queued(queued)) => queued.admit(),
                    Err(_) => continue,
                };
                clock.advance_ms(i as u64 * 30);
                if (round + i) % 3 == 0 {
                    entry.set_error("boom");
                }
                entry.exit();
            }
        }
    }
}

fn cases() -> u32 {
    std::env::var("SENTINEL_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

#[test]
fn pushed_json_rules_parse_apply_and_run() {
    let runtime = runtime();
    let (sentinel, clock) = instance();
    let server = {
        let _in_runtime = runtime.enter();
        writable_server(&sentinel)
    };
    let addr = server.local_addr();
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    let shown = |json: &str| json.chars().take(600).collect::<String>();
    let result = runner.run(&push(), |(kind, json)| {
        let (command, kind_name, _) = KINDS[kind];
        let path = format!("/{command}");
        let pairs = [("type", kind_name), ("data", json.as_str())];
        let form_len = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(pairs)
            .finish()
            .len();
        if form_len > DEFAULT_MAX_BODY_BYTES {
            // Refused on its head, before the body is sent: a client still
            // writing the body then finds the connection closed.
            let head = format!(
                "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\
                 Content-Type: application/x-www-form-urlencoded\r\n\
                 Content-Length: {form_len}\r\n\r\n"
            );
            let status = runtime.block_on(raw_status(addr, head.as_bytes()));
            if !status.starts_with("HTTP/1.1 413") {
                return Err(TestCaseError::fail(format!(
                    "{status} for a body of {form_len} bytes over the cap"
                )));
            }
            return Ok(());
        }
        let answer = runtime.block_on(post_form(addr, &path, &pairs));
        match answer.status.as_u16() {
            200 => use_rules(&sentinel, &clock),
            400 => {
                if answer.body.trim().is_empty() {
                    return Err(TestCaseError::fail(format!(
                        "a 400 without a word: {}",
                        shown(&json)
                    )));
                }
            }
            status => {
                return Err(TestCaseError::fail(format!(
                    "{status} {}: {}",
                    answer.body,
                    shown(&json)
                )));
            }
        }
        Ok(())
    });
    if let Err(error) = result {
        panic!("{error}");
    }
    drop(server);
}
