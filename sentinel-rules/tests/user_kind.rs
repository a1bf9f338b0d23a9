//! A kind an application adds ("deny after N"), in a rule file: read with
//! positions, applied all-or-nothing with the built-in kinds, and written
//! back by the store.

use std::sync::atomic::{AtomicU64, Ordering};

use sentinel_flow_core::describe::{Describe, DescribeRule, Fields, Name};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::slot::{EntryContext, order};
use sentinel_flow_core::{
    BlockKind, ManualClock, Rule, RuleError, Sentinel, UserKind, UserKindRules,
};
use sentinel_flow_rules::{LoadOptions, RuleChange, RuleFile, RuleFileStore, UserRules};

#[derive(Clone, Debug, Default, PartialEq)]
struct DenyAfter {
    resource: String,
    n: u64,
}

impl std::fmt::Display for DenyAfter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "deny {} after {}", self.resource, self.n)
    }
}

impl Rule for DenyAfter {
    fn resource(&self) -> &str {
        &self.resource
    }
    fn block_kind(&self) -> BlockKind {
        BlockKind::Custom(DenyAfterKind::NAME)
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl Describe for DenyAfter {
    fn describe<F: Fields>(&mut self, f: &mut F) {
        let resource = Name::new("resource", "resource").required().names_rule();
        f.string(resource.first(), &mut self.resource, "");
        f.whole(Name::new("n", "n").required(), &mut self.n, 0);
    }
}

impl DescribeRule for DenyAfter {
    const KIND: &'static str = "deny_after";
    const FILE_ORDER: u32 = 100;
    fn problems(&self, index: usize, _: usize) -> Vec<RuleError> {
        match self.n > 1_000_000 {
            true => vec![RuleError::new(
                Self::KIND,
                index,
                &self.resource,
                "n",
                format!("must be at most 1000000, got {}", self.n),
            )],
            false => Vec::new(),
        }
    }
}

struct DenyAfterKind;

impl UserKind for DenyAfterKind {
    type Rule = DenyAfter;
    type Compiled = AtomicU64;
    const NAME: &'static str = "deny_after";
    const ORDER: i32 = order::DEGRADE + 1;
    fn compile(_: &DenyAfter) -> AtomicU64 {
        AtomicU64::new(0)
    }
    fn check(rule: &DenyAfter, seen: &AtomicU64, _: &EntryContext<'_>) -> bool {
        seen.fetch_add(1, Ordering::Relaxed) < rule.n
    }
}

fn deny(resource: &str, n: u64) -> DenyAfter {
    DenyAfter {
        resource: resource.into(),
        n,
    }
}

fn instance() -> (Sentinel, UserKindRules<DenyAfterKind>, LoadOptions) {
    let rules = UserKindRules::<DenyAfterKind>::new();
    let sentinel = Sentinel::builder()
        .clock(ManualClock::new(1_000))
        .kind(&rules)
        .build();
    let options = LoadOptions::default().kind(&rules);
    (sentinel, rules, options)
}

fn passes(sentinel: &Sentinel, resource: &str, tries: usize) -> usize {
    (0..tries)
        .filter(|_| sentinel.entry(resource).is_ok())
        .count()
}

const GOOD: &str =
    "flow:\n  - {resource: orders, count: 100}\ndeny_after:\n  - {resource: api, n: 2}\n";

#[test]
fn a_user_kind_in_a_file_is_read_applied_and_checked() {
    let (sentinel, rules, options) = instance();
    let file = sentinel_flow_rules::parse_str_with(GOOD, "rules.yaml", &options).unwrap();
    assert_eq!(
        file.user_kind("deny_after")
            .unwrap()
            .rules::<DenyAfterKind>(),
        Some(&[deny("api", 2)][..])
    );
    let loaded = sentinel_flow_rules::apply(&sentinel, file).unwrap();
    assert_eq!((loaded.count("flow"), loaded.count("deny_after")), (1, 1));
    assert_eq!(rules.rules(), [deny("api", 2)]);
    assert_eq!(passes(&sentinel, "api", 5), 2);
    let refused = sentinel.entry("api").unwrap_err();
    assert_eq!(refused.kind(), BlockKind::Custom("deny_after"));
}

#[test]
fn an_unregistered_section_is_an_unknown_key_naming_the_registered_kinds() {
    let error = sentinel_flow_rules::parse_str(GOOD, "rules.yaml").unwrap_err();
    assert_eq!(
        error.lines(),
        [
            "rules.yaml:3:1: unknown key \"deny_after\" (known: version, flow, degrade, system, authority, param_flow, adaptive, api_definitions, gateway, track_percentiles)"
        ]
    );
    let (_, _, options) = instance();
    let error = sentinel_flow_rules::parse_str_with(
        "deny_after: []\nallow_after: []\n",
        "rules.yaml",
        &options,
    )
    .unwrap_err();
    assert_eq!(
        error.lines(),
        [
            "rules.yaml:2:1: unknown key \"allow_after\" (known: version, flow, degrade, system, authority, param_flow, adaptive, api_definitions, gateway, deny_after, track_percentiles)"
        ]
    );
}

#[test]
fn a_bad_builtin_rule_changes_no_kind_and_every_problem_is_told() {
    let (sentinel, rules, options) = instance();
    sentinel_flow_rules::apply(
        &sentinel,
        sentinel_flow_rules::parse_str_with(GOOD, "rules.yaml", &options).unwrap(),
    )
    .unwrap();
    let bad = "flow:\n  - {resource: orders, count: -5}\ndeny_after:\n  - {resource: api, n: 9}\n  - {resource: web, n: 2000000}\n";
    let error = sentinel_flow_rules::parse_str_with(bad, "rules.yaml", &options).unwrap_err();
    assert_eq!(
        error.lines(),
        [
            "rules.yaml:2:31: flow[0] (orders): count must be a finite number >= 0, got -5",
            "rules.yaml:5:24: deny_after[1] (web): n must be at most 1000000, got 2000000",
        ]
    );
    assert_eq!(rules.rules(), [deny("api", 2)]);
    assert_eq!(sentinel.rule_book().flow[0].count, 100.0);
}

#[test]
fn a_bad_user_rule_changes_no_kind() {
    let (sentinel, rules, options) = instance();
    let good = sentinel_flow_rules::parse_str_with(GOOD, "rules.yaml", &options).unwrap();
    sentinel_flow_rules::apply(&sentinel, good).unwrap();
    let bad = "flow:\n  - {resource: orders, count: 7}\ndeny_after:\n  - {resource: \" \", n: 1}\n";
    let error = sentinel_flow_rules::parse_str_with(bad, "rules.yaml", &options).unwrap_err();
    assert_eq!(
        error.lines(),
        ["rules.yaml:4:16: deny_after[0] ( ): resource is empty"]
    );
    // A file built by hand is checked before anything is put in force.
    let mut file = RuleFile::new(None, sentinel.rule_book());
    file.book.flow = vec![FlowRule::new("orders", 7.0)];
    file.user_kinds = vec![UserRules::new(&rules, vec![deny("", 1)])];
    let errors = sentinel_flow_rules::apply(&sentinel, file).unwrap_err();
    assert_eq!(errors.errors()[0].field, "resource");
    assert_eq!(rules.rules(), [deny("api", 2)]);
    assert_eq!(sentinel.rule_book().flow[0].count, 100.0);
}

#[test]
fn a_good_file_replaces_every_registered_kind_even_one_it_leaves_out() {
    let (sentinel, rules, options) = instance();
    rules.load(vec![deny("api", 2)]).unwrap();
    let file = sentinel_flow_rules::parse_str_with(
        "flow:\n  - {resource: orders, count: 1}\n",
        "rules.yaml",
        &options,
    )
    .unwrap();
    let loaded = sentinel_flow_rules::apply(&sentinel, file).unwrap();
    assert_eq!(loaded.user_counts, [("deny_after", 0)]);
    assert!(rules.rules().is_empty());
}

#[test]
fn the_store_writes_a_user_kind_back_and_keeps_it_when_another_kind_changes() {
    let (sentinel, rules, options) = instance();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.yaml");
    let text = "# ours\nflow:\n  - {resource: orders, count: 100}\n# the deny kind\ndeny_after:\n  - {resource: api, n: 2}\n";
    std::fs::write(&path, text).unwrap();
    let store = RuleFileStore::open_with(&path, options.clone()).unwrap();
    store.reload(&sentinel).unwrap();
    assert_eq!(rules.rules(), [deny("api", 2)]);

    store
        .replace(
            &sentinel,
            RuleChange::Flow(vec![FlowRule::new("orders", 5.0)]),
        )
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "# ours\nflow:\n  - resource: orders\n    count: 5\n# the deny kind\ndeny_after:\n  - {resource: api, n: 2}\n"
    );
    assert_eq!(rules.rules(), [deny("api", 2)]);

    let change = RuleChange::User(UserRules::new(&rules, vec![deny("api", 3), deny("web", 1)]));
    store.replace(&sentinel, change).unwrap();
    let written = std::fs::read_to_string(&path).unwrap();
    assert_eq!(
        written,
        "# ours\nflow:\n  - resource: orders\n    count: 5\n# the deny kind\ndeny_after:\n  - resource: api\n    n: 3\n  - resource: web\n    n: 1\n"
    );
    assert_eq!(rules.rules(), [deny("api", 3), deny("web", 1)]);
    assert_eq!(sentinel.rule_book().flow[0].count, 5.0);
    // What was written reads back the same.
    let file = sentinel_flow_rules::parse_str_with(&written, "rules.yaml", &options).unwrap();
    assert_eq!(
        file.user_kind("deny_after")
            .unwrap()
            .rules::<DenyAfterKind>(),
        Some(&[deny("api", 3), deny("web", 1)][..])
    );

    // A bad list is refused by the store and changes nothing.
    let bad = RuleChange::User(UserRules::new(&rules, vec![deny("api", 2_000_000)]));
    let error = store.replace(&sentinel, bad).unwrap_err();
    assert!(
        error.to_string().contains("n must be at most 1000000"),
        "{error}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), written);
    assert_eq!(rules.rules(), [deny("api", 3), deny("web", 1)]);
}

#[test]
fn a_user_kind_reads_and_writes_sentinel_json() {
    let (_, rules, options) = instance();
    let kinds = options.get_user_kinds();
    let change = sentinel_flow_rules::json::decode_with(
        kinds,
        "deny_after",
        r#"[{"resource":"api","n":4}]"#,
    )
    .unwrap();
    assert_eq!(
        sentinel_flow_rules::json::encode(&change),
        r#"[{"n":4,"resource":"api"}]"#
    );
    let lines = sentinel_flow_rules::json::decode_with(
        kinds,
        "deny_after",
        r#"[{"resource":"a","n":-1},{"resource":" ","n":1}]"#,
    )
    .unwrap_err();
    assert_eq!(
        lines,
        [
            "deny_after[0] (a): n: must be a whole number >= 0 in range, got -1",
            "deny_after[1] ( ): resource: is empty",
        ]
    );
    let unknown = sentinel_flow_rules::json::decode_with(kinds, "allow_after", "[]").unwrap_err();
    assert_eq!(
        unknown,
        [
            "\"allow_after\" is not a rule kind (one of flow, degrade, system, authority, param_flow, adaptive, api_definitions, gateway, deny_after)"
        ]
    );
    change.load_into(&Sentinel::builder().build()).unwrap();
    assert_eq!(rules.rules(), [deny("api", 4)]);
}
