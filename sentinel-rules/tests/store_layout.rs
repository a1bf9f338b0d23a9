//! `RuleFileStore` on files of every layout: the annotated example, a flow
//! mapping, an empty file, CRLF line ends, a file that does not parse.

mod support;

use std::fs;

use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::system::SystemRule;
use sentinel_flow_rules::{LoadOptions, RuleChange, RuleFileStore};
use support::{book, sentinel, temp_file};

#[test]
fn a_flow_mapping_file_is_rewritten_whole() {
    let text = "# dropped\n{version: 3, system: [{qps: 10}], track_percentiles: [a]}\n";
    let (_dir, path) = temp_file(text);
    let s = sentinel();
    let store = RuleFileStore::open(&path).unwrap();
    store
        .replace(&s, RuleChange::Flow(vec![FlowRule::new("a", 1.0)]))
        .unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "version: \"3\"\nflow:\n  - resource: a\n    count: 1\nsystem:\n  - qps: 10\ntrack_percentiles:\n  - a\n"
    );
    let system = SystemRule {
        qps: Some(10.0),
        ..SystemRule::default()
    };
    assert_eq!(s.rule_book().system, vec![system]);
}

#[test]
fn an_empty_file_allowed_by_the_options_gets_its_first_section() {
    let (_dir, path) = temp_file("# nothing yet\n");
    let s = sentinel();
    let store = RuleFileStore::open_with(&path, LoadOptions::default().allow_empty(true)).unwrap();
    store
        .replace(&s, RuleChange::Flow(vec![FlowRule::new("a", 1.0)]))
        .unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "# nothing yet\n\nflow:\n  - resource: a\n    count: 1\n"
    );
    assert!(RuleFileStore::open(path.with_extension("missing")).is_err());
}

#[test]
fn a_file_that_does_not_parse_is_reported_and_kept() {
    let text = "flow:\n  - {resource: a, count: 1\n";
    let (_dir, path) = temp_file(text);
    let s = sentinel();
    let store = RuleFileStore::open(&path).unwrap();
    let error = store.replace(&s, RuleChange::Flow(vec![])).unwrap_err();
    let lines = error.lines();
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].starts_with(&format!("{}:", path.display())),
        "{lines:?}"
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn each_kind_of_the_annotated_example_file_is_rewritten_alone() {
    let example = include_str!("../../examples/hot-reload/rules.yaml");
    let original = sentinel_flow_rules::parse_str(example, "rules.yaml")
        .unwrap()
        .book;
    let changes = [
        ("flow", RuleChange::Flow(original.flow.clone())),
        ("degrade", RuleChange::Degrade(original.degrade.clone())),
        ("system", RuleChange::System(original.system.clone())),
        (
            "authority",
            RuleChange::Authority(original.authority.clone()),
        ),
        (
            "param_flow",
            RuleChange::ParamFlow(original.param_flow.clone()),
        ),
    ];
    for (kind, change) in changes {
        let (_dir, path) = temp_file(example);
        let s = sentinel();
        RuleFileStore::open(&path)
            .unwrap()
            .replace(&s, change)
            .unwrap();
        let text = fs::read_to_string(&path).unwrap();
        // Everything before the section and from the comments introducing
        // the next one on is the example's, byte for byte.
        let start = example.find(&format!("\n{kind}:\n")).unwrap() + 1;
        let next = example[start..]
            .find("\n#")
            .map_or(example.len(), |i| start + i);
        assert!(text.starts_with(&example[..start]), "{kind}:\n{text}");
        assert!(text.ends_with(&example[next..]), "{kind}:\n{text}");
        // In between: the rendered section, then the comment lines that
        // ended the old one (the system section's commented-out limits).
        let between = &text[start..text.len() - (example.len() - next)];
        let rendered = between
            .lines()
            .take_while(|l| !l.trim_start().starts_with('#'));
        let mut rest = between.lines().skip(rendered.count());
        assert!(
            rest.all(|l| l.trim().is_empty() || l.trim_start().starts_with('#')),
            "{kind}"
        );
        assert_eq!(book(&path), original, "{kind}");
        assert_eq!(s.rule_book(), original, "{kind}");
    }
}

#[test]
fn a_crlf_file_keeps_its_other_lines() {
    let text = "version: 1\r\nflow:\r\n  - {resource: a, count: 1}\r\n# about system\r\nsystem: [{qps: 5}]\r\n";
    let (_dir, path) = temp_file(text);
    let s = sentinel();
    let store = RuleFileStore::open(&path).unwrap();
    store
        .replace(&s, RuleChange::Flow(vec![FlowRule::new("b", 2.0)]))
        .unwrap();
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "version: 1\r\nflow:\n  - resource: b\n    count: 2\n# about system\r\nsystem: [{qps: 5}]\r\n"
    );
    assert_eq!(s.rule_book().system.len(), 1);
}

/// Lines that make odd layouts: flow mappings, document markers, quoted
/// and complex keys, anchors, block scalars, comments at any indent.
const PIECES: &[&str] = &[
    "flow:",
    "  - {resource: a, count: 1}",
    "degrade: []",
    "# c",
    "",
    "  # c",
    "version: 1",
    "{flow: []}",
    "---",
    "...",
    "system:",
    "  - max_thread: 3",
    "flow: [",
    "]",
    "\t",
    "track_percentiles: [a]",
    "  - resource: b",
    "    count: 2",
    "param_flow:",
    "'flow': []",
    "? flow",
    ": []",
    "\"degrade\":",
    "&a x: 1",
    "key: |",
    "  text",
    "flow: ~",
    "authority:",
    "  - {resource: r, limit_app: o}",
    "- 1",
    "  - {resource: p, param_idx: 0, count: 1}",
];

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// Whatever the file, a replace writes a file that reads back as the
    /// rules given with the rest unchanged, or refuses and leaves it alone.
    #[test]
    fn any_layout_is_rewritten_right_or_left_alone(
        lines in proptest::collection::vec(proptest::sample::select(PIECES), 0..12),
        crlf in proptest::bool::ANY,
    ) {
        let text = lines.join(if crlf { "\r\n" } else { "\n" });
        let (_dir, path) = temp_file(&text);
        let s = sentinel();
        let options = LoadOptions::default().allow_empty(true);
        let before = sentinel_flow_rules::parse_str_with(&text, "rules.yaml", &options);
        let store = RuleFileStore::open_with(&path, options.clone()).unwrap();
        let rules = vec![FlowRule::new("new", 3.0)];
        match store.replace(&s, RuleChange::Flow(rules.clone())) {
            Ok(()) => {
                let after = sentinel_flow_rules::load_file(&path, &options).unwrap();
                proptest::prop_assert_eq!(&after.book.flow, &rules);
                proptest::prop_assert_eq!(&s.rule_book(), &after.book);
                if let Ok(before) = before {
                    let mut expected = before.book.clone();
                    expected.flow = rules;
                    proptest::prop_assert_eq!(after.book, expected);
                    proptest::prop_assert_eq!(after.version, before.version);
                }
            }
            Err(sentinel_flow_rules::StoreError::Invalid(lines)) => {
                proptest::prop_assert!(!lines.is_empty());
                // The read-back check is a safety net, not a way out.
                proptest::prop_assert!(!lines.iter().any(|l| l.contains("a bug")), "{lines:?}");
                proptest::prop_assert_eq!(fs::read_to_string(&path).unwrap(), text);
                proptest::prop_assert!(s.rule_book().flow.is_empty());
            }
            Err(other) => proptest::prop_assert!(false, "{other:?}"),
        }
    }
}
