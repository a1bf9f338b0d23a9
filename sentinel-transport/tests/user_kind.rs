//! `getRules` and `setRules` for a kind an application adds ("deny after
//! N"), in memory and through the rule file.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use common::{get, post_form};
use sentinel_flow_core::describe::{Describe, DescribeRule, Fields, Name};
use sentinel_flow_core::slot::{EntryContext, order};
use sentinel_flow_core::{
    BlockKind, ManualClock, Rule, RuleError, Sentinel, UserKind, UserKindRules,
};
use sentinel_flow_rules::{LoadOptions, RuleFileStore};
use sentinel_flow_transport::CommandCenter;

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
    fn problems(&self, _: usize, _: usize) -> Vec<RuleError> {
        Vec::new()
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

fn instance() -> (Arc<Sentinel>, UserKindRules<DenyAfterKind>) {
    let rules = UserKindRules::<DenyAfterKind>::new();
    let sentinel = Sentinel::builder()
        .clock(ManualClock::new(1_000))
        .kind(&rules)
        .build();
    (Arc::new(sentinel), rules)
}

#[tokio::test]
async fn get_and_set_rules_serve_a_user_kind_in_memory() {
    let (sentinel, rules) = instance();
    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .allow_writes(true)
        .kind(&rules)
        .start()
        .unwrap();
    let addr = server.local_addr();

    let data = r#"[{"resource":"api","n":2}]"#;
    let answer = post_form(addr, "/setRules", &[("type", "deny_after"), ("data", data)]).await;
    assert_eq!(
        (answer.status.as_u16(), answer.body.as_str()),
        (200, "success")
    );
    assert_eq!(rules.rules(), [deny("api", 2)]);
    let passed = (0..5).filter(|_| sentinel.entry("api").is_ok()).count();
    assert_eq!(passed, 2);

    let answer = get(addr, "/getRules?type=DENY_AFTER").await;
    assert_eq!(answer.status.as_u16(), 200);
    assert_eq!(answer.body, r#"[{"n":2,"resource":"api"}]"#);

    // A bad list: 400, every problem, nothing changed.
    let bad = r#"[{"resource":"","n":1},{"resource":"web","n":"many"}]"#;
    let answer = post_form(addr, "/setRules", &[("type", "deny_after"), ("data", bad)]).await;
    assert_eq!(answer.status.as_u16(), 400);
    assert_eq!(
        answer.body,
        "deny_after[0] (): resource: is empty\ndeny_after[1] (web): n: must be a whole number >= 0 in range, got \"many\""
    );
    assert_eq!(rules.rules(), [deny("api", 2)]);

    let answer = get(addr, "/getRules?type=allow_after").await;
    assert_eq!(answer.status.as_u16(), 400);
    assert!(
        answer
            .body
            .contains("one of flow, degrade, system, authority, adaptive, deny_after"),
        "{}",
        answer.body
    );
}

#[tokio::test]
async fn set_rules_of_a_user_kind_goes_through_the_rule_file() {
    let (sentinel, rules) = instance();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.yaml");
    std::fs::write(&path, "flow:\n  - {resource: orders, count: 10}\n").unwrap();
    let options = LoadOptions::default().kind(&rules);
    let store = RuleFileStore::open_with(&path, options).unwrap();
    store.reload(&sentinel).unwrap();
    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .allow_writes(true)
        .rule_file(store)
        .kind(&rules)
        .start()
        .unwrap();
    let addr = server.local_addr();

    let data = r#"[{"resource":"api","n":3}]"#;
    let answer = post_form(addr, "/setRules", &[("type", "deny_after"), ("data", data)]).await;
    assert_eq!(
        (answer.status.as_u16(), answer.body.as_str()),
        (200, "success")
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "flow:\n  - {resource: orders, count: 10}\n\ndeny_after:\n  - resource: api\n    n: 3\n"
    );
    assert_eq!(rules.rules(), [deny("api", 3)]);
    assert_eq!(sentinel.rule_book().flow[0].count, 10.0);
}
