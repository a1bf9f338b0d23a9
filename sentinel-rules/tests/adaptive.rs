//! Adaptive concurrency rules in rule files and Sentinel's JSON: the kind's
//! description drives the same readers and writers as every other kind.

use sentinel_flow_core::adaptive::{AdaptiveAlgorithm, AdaptiveRule};
use sentinel_flow_core::{ManualClock, Sentinel};
use sentinel_flow_rules::{RuleChange, RuleFileStore, json};

const FILE: &str = "\
adaptive:
  - resource: GET:/orders
    algorithm: vegas
    max_limit: 400
    alpha: 3
    beta: 6
  - {resource: export, algorithm: aimd, backoff_ratio: 0.8, timeout_ms: 250, limit_app: batch}
  - {resource: search}
";

fn vegas() -> AdaptiveRule {
    let mut rule = AdaptiveRule::new(
        "GET:/orders",
        AdaptiveAlgorithm::Vegas {
            alpha: Some(3),
            beta: Some(6),
            smoothing: 1.0,
            probe_multiplier: 30,
        },
    );
    rule.max_limit = 400;
    rule
}

fn aimd() -> AdaptiveRule {
    let mut rule = AdaptiveRule::new(
        "export",
        AdaptiveAlgorithm::Aimd {
            backoff_ratio: 0.8,
            timeout_ms: 250,
        },
    );
    rule.limit_app = "batch".into();
    rule
}

#[test]
fn adaptive_rules_are_read_from_a_file_with_each_algorithm_s_defaults() {
    let file = sentinel_flow_rules::parse_str(FILE, "rules.yaml").unwrap();
    let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
    let loaded = sentinel_flow_rules::apply(&sentinel, file).unwrap();
    assert_eq!(loaded.count("adaptive"), 3);
    let search = AdaptiveRule::new("search", AdaptiveAlgorithm::gradient2());
    assert_eq!(sentinel.rule_book().adaptive, [vegas(), aimd(), search]);
    // Vegas's own limits: from 1 to the 400 written.
    assert_eq!(sentinel.rule_book().adaptive[0].min_limit, 1);
}

#[test]
fn a_parameter_of_another_algorithm_or_a_bad_value_is_refused_at_its_position() {
    let text = "adaptive:\n  - {resource: a, algorithm: vegas, rtt_tolerance: 2}\n  - {resource: b, algorithm: aimd, backoff_ratio: 1.5}\n  - {resource: c, algorithm: fast}\n";
    let error = sentinel_flow_rules::parse_str(text, "rules.yaml").unwrap_err();
    let lines = error.lines();
    assert_eq!(
        lines,
        [
            // The fields a Vegas rule has, not Gradient2's.
            "rules.yaml:2:37: adaptive[0] (a): rtt_tolerance is not a field of a adaptive rule \
             (known: id, resource, limit_app, algorithm, initial_limit, min_limit, max_limit, \
             window_ms, min_samples, alpha, beta, smoothing, probe_multiplier)",
            "rules.yaml:3:51: adaptive[1] (b): backoff_ratio must be in [0.5, 1), got 1.5",
            "rules.yaml:4:30: adaptive[2] (c): algorithm must be one of gradient2, vegas, aimd, got \"fast\"",
        ]
    );
}

#[test]
fn adaptive_rules_round_trip_through_sentinel_json() {
    let change = RuleChange::Adaptive(vec![vegas(), aimd()]);
    let text = json::encode(&change);
    assert!(text.contains(r#""algorithm":1"#), "{text}");
    assert!(text.contains(r#""backoffRatio":0.8"#), "{text}");
    let RuleChange::Adaptive(back) = json::decode("adaptive", &text).unwrap() else {
        panic!("not adaptive rules");
    };
    assert_eq!(back, [vegas(), aimd()]);
    let bad = json::decode("adaptive", r#"[{"resource":"a","minLimit":0}]"#).unwrap_err();
    assert_eq!(bad.len(), 1, "{bad:?}");
    assert_eq!(bad, ["adaptive[0] (a): minLimit: must be > 0"]);
}

#[test]
fn the_store_writes_adaptive_rules_back_and_reads_them_the_same() {
    let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.yaml");
    std::fs::write(&path, "flow:\n  - {resource: a, count: 5}\n").unwrap();
    let store = RuleFileStore::open(&path).unwrap();
    store.reload(&sentinel).unwrap();
    store
        .replace(&sentinel, RuleChange::Adaptive(vec![vegas(), aimd()]))
        .unwrap();
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(written.contains("algorithm: vegas"), "{written}");
    assert!(
        !written.contains("smoothing"),
        "defaults are left out: {written}"
    );
    let file = sentinel_flow_rules::parse_str(&written, "rules.yaml").unwrap();
    assert_eq!(file.book.adaptive, [vegas(), aimd()]);
    assert_eq!(sentinel.rule_book().adaptive, [vegas(), aimd()]);
    assert_eq!(sentinel.rule_book().flow.len(), 1);
}
