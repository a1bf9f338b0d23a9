//! Parsing and validating rule files: the format, every kind of error at
//! its exact position, and the limits on bad input.

use sentinel_flow_core::ParamValue;
use sentinel_flow_core::authority::AuthorityStrategy;
use sentinel_flow_core::degrade::DegradeGrade;
use sentinel_flow_core::flow::{ControlBehavior, FlowGrade, FlowStrategy};
use sentinel_flow_rules::{LoadOptions, parse_bytes, parse_str, parse_str_with};

const EXAMPLE: &str = include_str!("../../examples/hot-reload/rules.yaml");

/// The error lines of `text`, which must be refused.
fn errors(text: &str) -> Vec<String> {
    parse_str(text, "rules.yaml")
        .expect_err("the file should be refused")
        .lines()
}

#[test]
fn the_example_file_loads_every_kind() {
    let file = parse_str(EXAMPLE, "rules.yaml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(file.version.as_deref(), Some("1"));
    let book = &file.book;
    assert_eq!(
        book.counts(),
        [
            ("authority", 1),
            ("system", 1),
            ("param_flow", 1),
            ("flow", 2),
            ("degrade", 2),
            ("adaptive", 0),
            ("gateway", 0),
            ("api_definitions", 0)
        ]
    );
    assert_eq!(file.track_percentiles, ["GET:/orders"]);
    let flow = &book.flow[0];
    assert_eq!(flow.resource, "GET:/orders");
    assert_eq!(
        (flow.count, flow.grade, flow.id),
        (20.0, FlowGrade::Qps, Some(1))
    );
    assert_eq!(book.flow[1].limit_app, "default");
    assert_eq!(book.degrade[1].grade, DegradeGrade::ErrorRatio);
    assert_eq!(book.degrade[0].slow_ratio_threshold, 0.5);
    assert_eq!(book.system[0].max_thread, Some(400));
    assert_eq!(book.system[0].qps, None);
    assert_eq!(book.authority[0].strategy, AuthorityStrategy::White);
    assert_eq!(book.authority[0].limit_app, ["ops-console", "deployer"]);
    let items = &book.param_flow[0].param_flow_item_list;
    assert_eq!(items[0].value, ParamValue::from("vip-customer"));
    assert_eq!(items[1].value, ParamValue::from(42i64));
    assert!(book.validate().is_ok());
}

#[test]
fn minimal_rules_take_the_core_defaults() {
    let file = parse_str(
        "flow:\n  - {resource: GET:/orders, count: 100}\n\
         degrade:\n  - {resource: r, grade: error_count, count: 3}\n\
         param_flow:\n  - {resource: r, param_idx: -1, count: 5}\n\
         authority:\n  - {resource: r, limit_app: crawler, strategy: black}\n",
        "rules.yaml",
    )
    .unwrap();
    assert_eq!(
        file.book.flow,
        [sentinel_flow_core::flow::FlowRule::new(
            "GET:/orders",
            100.0
        )]
    );
    assert_eq!(
        file.book.degrade,
        [sentinel_flow_core::degrade::DegradeRule::new(
            "r",
            DegradeGrade::ErrorCount,
            3.0
        )]
    );
    assert_eq!(
        file.book.param_flow,
        [sentinel_flow_core::param_flow::ParamFlowRule::new(
            "r", -1, 5.0
        )]
    );
    assert_eq!(file.book.authority[0].limit_app, ["crawler"]);
    assert_eq!(file.version, None);
}

#[test]
fn enums_are_lowercase_words() {
    let file = parse_str(
        "flow:\n  - resource: r\n    count: 1\n    grade: concurrency\n    strategy: relate\n    ref_resource: other\n\
         \x20 - {resource: r, count: 1, control_behavior: warm_up_rate_limiter}\n",
        "f",
    )
    .unwrap();
    assert_eq!(file.book.flow[0].grade, FlowGrade::Concurrency);
    assert_eq!(file.book.flow[0].strategy, FlowStrategy::Relate);
    assert_eq!(file.book.flow[0].ref_resource.as_deref(), Some("other"));
    assert_eq!(
        file.book.flow[1].control_behavior,
        ControlBehavior::WarmUpRateLimiter
    );
}

#[test]
fn an_out_of_range_value_names_file_line_column_rule_and_field() {
    let text = "version: 3\nflow:\n  - resource: a\n    count: 1\n  - resource: b\n    count: 2\n\
                \x20 - resource: GET:/orders\n    count: -5\n";
    assert_eq!(
        errors(text),
        ["rules.yaml:8:12: flow[2] (GET:/orders): count must be a finite number >= 0, got -5"]
    );
}

#[test]
fn every_kind_of_error_at_its_position() {
    let cases: &[(&str, &str)] = &[
        // unknown field, at the key
        (
            "flow:\n  - {resource: r, count: 1, cuont: 2}\n",
            "rules.yaml:2:29: flow[0] (r): cuont is not a field of a flow rule (known: id, resource, \
             grade, count, limit_app, strategy, ref_resource, control_behavior, warm_up_period_sec, \
             warm_up_cold_factor, max_queueing_time_ms, stat_interval_ms, stat_sample_count, cluster_mode, cluster_config)",
        ),
        // wrong type
        (
            "flow:\n  - {resource: r, count: lots}\n",
            "rules.yaml:2:26: flow[0] (r): count must be a number, got \"lots\"",
        ),
        (
            "flow:\n  - {resource: r, count: \"10\"}\n",
            "rules.yaml:2:26: flow[0] (r): count must be a number, got the string \"10\"",
        ),
        (
            "flow:\n  - {resource: [a], count: 1}\n",
            "rules.yaml:2:16: flow[0]: resource must be a string, got a list",
        ),
        // unknown enum word
        (
            "degrade:\n  - {resource: r, grade: rt, count: 1}\n",
            "rules.yaml:2:26: degrade[0] (r): grade must be one of slow_request_ratio, error_ratio, \
             error_count, got \"rt\"",
        ),
        // integers out of range
        (
            "flow:\n  - {resource: r, count: 1, warm_up_period_sec: -1}\n",
            "rules.yaml:2:49: flow[0] (r): warm_up_period_sec must be a whole number in \
             0..=4294967295, got -1",
        ),
        (
            "flow:\n  - {resource: r, count: 1, stat_interval_ms: 1.5}\n",
            "rules.yaml:2:47: flow[0] (r): stat_interval_ms must be a whole number in \
             0..=18446744073709551615, got 1.5",
        ),
        // missing field, at the rule
        (
            "degrade:\n  - {resource: r, count: 1}\n",
            "rules.yaml:2:5: degrade[0] (r): grade is required",
        ),
        // ratio > 1
        (
            "degrade:\n  - {resource: r, grade: error_ratio, count: 1.5}\n",
            "rules.yaml:2:46: degrade[0] (r): count is an error ratio and must be in 0..=1, got 1.5",
        ),
        // zero window
        (
            "degrade:\n  - {resource: r, grade: error_count, count: 1, time_window_sec: 0}\n",
            "rules.yaml:2:66: degrade[0] (r): time_window_sec must be > 0",
        ),
        // relate without ref_resource, at the rule
        (
            "flow:\n  - {resource: r, count: 1, strategy: relate}\n",
            "rules.yaml:2:5: flow[0] (r): ref_resource is required by the relate strategy",
        ),
        // system: no limit set, at the rule
        (
            "system:\n  - {id: 3}\n",
            "rules.yaml:2:5: system[0]: highest_system_load no limit is set: set at least one of \
             highest_system_load, highest_cpu_usage, qps, avg_rt, max_thread",
        ),
        (
            "system:\n  - highest_cpu_usage: 1.5\n",
            "rules.yaml:2:24: system[0]: highest_cpu_usage must be within 0..=1 (a fraction), got 1.5",
        ),
        // authority: an origin that is not a name
        (
            "authority:\n  - {resource: r, limit_app: [a, {b: 1}]}\n",
            "rules.yaml:2:34: authority[0] (r): limit_app[1] must be an origin name, got a mapping",
        ),
        // param flow items
        (
            "param_flow:\n  - resource: r\n    param_idx: 0\n    count: 1\n    param_flow_item_list:\n\
             \x20     - {value: [1], count: 1}\n      - {value: a, count: -1}\n",
            "rules.yaml:6:17: param_flow[0] (r): param_flow_item_list[0].value must be a string, a \
             number or a boolean, got a list",
        ),
        (
            "param_flow:\n  - {resource: r, param_idx: 0, count: 1, \
             param_flow_item_list: [{value: a, count: 1}, {value: a, count: 2}]}\n",
            "rules.yaml:2:96: param_flow[0] (r): param_flow_item_list item 1 (\"a\") \
             repeats item 0: one threshold per value",
        ),
        (
            "param_flow:\n  - {resource: r, param_idx: 9999999999, count: 1}\n",
            "rules.yaml:2:30: param_flow[0] (r): param_idx must be a whole number in \
             -2147483648..=2147483647, got 9999999999",
        ),
        // structure
        (
            "flows:\n  - {resource: r, count: 1}\n",
            "rules.yaml:1:1: unknown key \"flows\" (known: version, flow, degrade, system, authority, \
             param_flow, adaptive, api_definitions, gateway, track_percentiles)",
        ),
        (
            "flow: {resource: r, count: 1}\n",
            "rules.yaml:1:7: flow must be a list of rules, got a mapping",
        ),
        (
            "flow:\n  - GET:/orders\n",
            "rules.yaml:2:5: flow[0]: a rule must be a mapping, got \"GET:/orders\"",
        ),
        (
            "- flow\n",
            "rules.yaml:1:1: a rule file is a mapping with keys version, flow, degrade, system, \
             authority, param_flow, adaptive, api_definitions, gateway, track_percentiles; got a list",
        ),
        (
            "flow:\n  - {resource: r, count: 1, count: 2}\n",
            "rules.yaml:2:29: flow[0] (r): duplicate field count (first at 2:19)",
        ),
        (
            "flow: []\nflow: []\n",
            "rules.yaml:2:1: duplicate key flow (first at 1:1)",
        ),
        (
            "flow:\n  - {resource: r, count: 1\n",
            "rules.yaml:3:1: while parsing a flow mapping, did not find expected ',' or '}'",
        ),
        (
            "flow: []\n---\ndegrade: []\n",
            "rules.yaml:2:1: a second YAML document (---): a rule file holds one",
        ),
        (
            "flow:\n  - {resource: !!str r, count: 1}\n",
            "rules.yaml:2:22: tags (!name) are not supported: write the plain value",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(errors(text), [*expected], "{text}");
    }
}

#[test]
fn every_error_of_a_file_is_reported_in_file_order() {
    let text = "\
flow:
  - resource: a
    count: -1
    grade: fast
  - count: 1
degrade:
  - {resource: b, grade: error_ratio, count: 2, probe_num: 0}
system:
  - {qps: -3}
unknown: 1
";
    assert_eq!(
        errors(text),
        [
            "rules.yaml:3:12: flow[0] (a): count must be a finite number >= 0, got -1",
            "rules.yaml:4:12: flow[0] (a): grade must be one of qps, concurrency, got \"fast\"",
            "rules.yaml:5:5: flow[1]: resource is required",
            "rules.yaml:7:46: degrade[0] (b): count is an error ratio and must be in 0..=1, got 2",
            "rules.yaml:7:60: degrade[0] (b): probe_num must be in 1..=32767, got 0",
            "rules.yaml:9:11: system[0]: qps must be a finite number >= 0, got -3",
            "rules.yaml:10:1: unknown key \"unknown\" (known: version, flow, degrade, system, \
             authority, param_flow, adaptive, api_definitions, gateway, track_percentiles)",
        ]
    );
}

#[test]
fn empty_files_are_refused_unless_allowed() {
    for text in ["", "\n\n", "# only a comment\n", "---\n", "~\n"] {
        let error = parse_str(text, "rules.yaml").unwrap_err();
        assert_eq!(
            error.to_string(),
            "rules.yaml: the file is empty (no rules); an empty file is refused unless \
             LoadOptions::allow_empty is set",
            "{text:?}"
        );
        let allowed = LoadOptions::default().allow_empty(true);
        let file = parse_str_with(text, "rules.yaml", &allowed).unwrap();
        assert_eq!(file.book, sentinel_flow_core::RuleBook::default());
    }
    // Keys with no rules are a deliberate empty set, not an empty file.
    let file = parse_str("version: 2\nflow:\ndegrade: []\n", "f").unwrap();
    assert_eq!(file.book, sentinel_flow_core::RuleBook::default());
}

#[test]
fn files_over_the_size_limit_are_refused() {
    let options = LoadOptions::default().max_size(64);
    let text = format!("flow:\n{}", "  - {resource: r, count: 1}\n".repeat(3));
    let error = parse_str_with(&text, "big.yaml", &options).unwrap_err();
    assert_eq!(
        error.to_string(),
        "big.yaml: the file is larger than the limit of 64 bytes (LoadOptions::max_size)"
    );
    let reader = std::io::repeat(b' ');
    let error = sentinel_flow_rules::parse_reader(reader, "endless", &options).unwrap_err();
    assert!(
        error.to_string().contains("larger than the limit"),
        "{error}"
    );
    assert_eq!(sentinel_flow_rules::DEFAULT_MAX_SIZE, 4 << 20);
}

#[test]
fn non_utf8_is_refused_with_its_position() {
    let error = parse_bytes(
        b"flow:\n  - {resource: caf\xe9, count: 1}\n",
        "rules.yaml",
        &LoadOptions::default(),
    )
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "rules.yaml:2:19: the file is not UTF-8 (invalid byte 0xe9 at offset 24)"
    );
}

#[test]
fn anchors_and_aliases_are_refused() {
    let bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\n\
                c: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c]\n";
    let lines = errors(bomb);
    assert_eq!(
        lines[0],
        "rules.yaml:1:1: unknown key \"a\" (known: version, flow, degrade, system, authority, param_flow, adaptive, api_definitions, gateway, track_percentiles)"
    );
    assert_eq!(
        lines[1],
        "rules.yaml:1:7: anchors (&name) are not supported: write each value out"
    );
    assert!(lines.iter().any(|l| l.starts_with(
        "rules.yaml:2:8: aliases (*name) are not supported: they can expand a small file into a huge one"
    )));
    let aliased = "x: &n 5\nflow:\n  - {resource: r, count: *n}\n";
    assert!(
        errors(aliased)
            .iter()
            .any(|l| l.starts_with("rules.yaml:3:26: aliases"))
    );
}

#[test]
fn deep_nesting_is_refused() {
    let deep = format!("flow: {}{}\n", "[".repeat(30), "]".repeat(30));
    assert_eq!(
        errors(&deep),
        ["rules.yaml:1:22: nesting deeper than 16 levels is refused"]
    );
    // Deeper still, the parser's own limit stops it before any event.
    let deeper = format!("flow: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
    assert_eq!(
        errors(&deeper),
        ["rules.yaml:1:262: recursion limit exceeded"]
    );
    let block: String = (0..40)
        .map(|i| format!("{}k{i}:\n", "  ".repeat(i)))
        .collect();
    assert!(errors(&block)[0].ends_with("nesting deeper than 16 levels is refused"));
}

#[test]
fn a_huge_number_of_errors_is_cut_short() {
    let text = format!("flow:\n{}", "  - {count: -1}\n".repeat(500));
    let lines = errors(&text);
    assert_eq!(lines.len(), 201);
    assert_eq!(lines[200], "rules.yaml: ... and 800 more problem(s)");
}

#[test]
fn a_utf8_bom_at_the_start_is_accepted() {
    let text = "\u{feff}flow:\n  - {resource: a, count: 1}\n";
    let file = parse_str(text, "rules.yaml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(file.book.flow[0].resource, "a");
    let file = parse_bytes(text.as_bytes(), "rules.yaml", &LoadOptions::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(file.book.flow.len(), 1);
    // Positions count from after the mark, as an editor shows them.
    assert_eq!(
        errors("\u{feff}flow:\n  - {resource: a, count: -1}\n"),
        ["rules.yaml:2:26: flow[0] (a): count must be a finite number >= 0, got -1"]
    );
    // Only at the start: elsewhere it is part of a key.
    assert_eq!(
        errors("flow: []\n\u{feff}degrade: []\n"),
        [
            "rules.yaml:2:1: unknown key \"\\u{feff}degrade\" (known: version, flow, degrade, system, authority, param_flow, adaptive, api_definitions, gateway, track_percentiles)"
        ]
    );
}

#[test]
fn the_annotated_file_of_the_guide_loads() {
    let guide = include_str!("../../docs/rules.md");
    let start = guide
        .find("```yaml\n# Rules for sentinel-flow-rules")
        .expect("the annotated file")
        + "```yaml\n".len();
    let end = start + guide[start..].find("```").expect("its end");
    let file = parse_str(&guide[start..end], "rules.yaml").unwrap_or_else(|e| panic!("{e}"));
    let items = &file.book.param_flow[0].param_flow_item_list;
    assert_eq!(items[2].value, ParamValue::from(2.5));
    assert_eq!(items[3].class_type, Some("long"));
    assert_eq!(file.book.api_definitions[0].predicates.len(), 2);
    assert!(file.book.gateway[0].param_item.is_some());
    assert!(file.book.validate().is_ok());
}
