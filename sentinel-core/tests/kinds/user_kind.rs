//! A rule kind added by an application, outside the core: "deny all after
//! N" lets a resource be entered `n` times, then refuses it. The kind is
//! this file and one line on the builder; no file of the core, the rules
//! reader or the transport names it.

use std::any::Any;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::slot::{EntryContext, order};
use sentinel_flow_core::{
    BlockKind, ManualClock, Rule, RuleError, Sentinel, UserKind, UserKindRules,
};

/// Lets `resource` be entered `n` times, then refuses it.
#[derive(Clone, Debug, PartialEq)]
struct DenyAfter {
    resource: String,
    n: u64,
}

impl DenyAfter {
    fn new(resource: &str, n: u64) -> Self {
        DenyAfter {
            resource: resource.into(),
            n,
        }
    }
}

impl fmt::Display for DenyAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The kind: its rule, its state (the entries seen), its check.
struct DenyAfterKind;

impl UserKind for DenyAfterKind {
    type Rule = DenyAfter;
    type Compiled = AtomicU64;
    const NAME: &'static str = "deny_after";
    const ORDER: i32 = order::DEGRADE + 1;

    fn problems(rule: &DenyAfter, index: usize) -> Vec<RuleError> {
        match rule.n {
            0 => vec![RuleError::new(
                Self::NAME,
                index,
                &rule.resource,
                "n",
                "must be at least 1 (a resource never entered needs no rule)".to_owned(),
            )],
            _ => Vec::new(),
        }
    }

    fn compile(_: &DenyAfter) -> AtomicU64 {
        AtomicU64::new(0)
    }

    fn check(rule: &DenyAfter, seen: &AtomicU64, _: &EntryContext<'_>) -> bool {
        seen.fetch_add(1, Ordering::Relaxed) < rule.n
    }
}

fn instance() -> (UserKindRules<DenyAfterKind>, Sentinel) {
    let rules = UserKindRules::<DenyAfterKind>::new();
    let sentinel = Sentinel::builder()
        .clock(ManualClock::new(1_000))
        .kind(&rules)
        .build();
    (rules, sentinel)
}

#[test]
fn a_user_kind_denies_after_n_entries_and_its_blocks_are_counted() {
    let (rules, sentinel) = instance();
    rules.load(vec![DenyAfter::new("api", 2)]).unwrap();
    for _ in 0..2 {
        drop(sentinel.entry("api").unwrap());
    }
    let refused = sentinel.entry("api").unwrap_err();
    assert_eq!(refused.kind(), BlockKind::Custom("deny_after"));
    assert_eq!(
        refused.rule_as::<DenyAfter>(),
        Some(&DenyAfter::new("api", 2))
    );
    assert_eq!(refused.kind().exception_name(), "deny_after");
    // Other resources are not its business.
    assert!(sentinel.entry("other").is_ok());

    let counts = sentinel.block_counts();
    let api: Vec<_> = counts
        .iter()
        .filter(|c| c.resource == "api")
        .map(|c| (c.kind, c.count))
        .collect();
    assert_eq!(api, [(BlockKind::Custom("deny_after"), 1)]);
    let node = sentinel.resource_node("api").unwrap();
    assert_eq!(node.stats().total_block(sentinel.now_ms()), 1);
}

#[test]
fn a_user_kind_runs_at_its_order_after_the_built_in_checks() {
    let (rules, sentinel) = instance();
    rules.load(vec![DenyAfter::new("api", 1)]).unwrap();
    sentinel
        .flow_rules()
        .load(vec![FlowRule::new("api", 0.0)])
        .unwrap();
    // Flow refuses first: the user kind, after degrade, never sees these.
    for _ in 0..3 {
        assert_eq!(sentinel.entry("api").unwrap_err().kind(), BlockKind::Flow);
    }
    sentinel.flow_rules().load(Vec::new()).unwrap();
    drop(sentinel.entry("api").unwrap());
    assert_eq!(
        sentinel.entry("api").unwrap_err().kind(),
        BlockKind::Custom("deny_after")
    );
}

#[test]
fn a_user_kinds_unchanged_rule_keeps_its_state_and_a_bad_list_changes_nothing() {
    let (rules, sentinel) = instance();
    rules.load(vec![DenyAfter::new("api", 2)]).unwrap();
    drop(sentinel.entry("api").unwrap());
    // Reloaded unchanged, beside a new rule: one entry left.
    rules
        .load(vec![DenyAfter::new("other", 5), DenyAfter::new("api", 2)])
        .unwrap();
    drop(sentinel.entry("api").unwrap());
    assert!(sentinel.entry("api").is_err());

    let errors = rules
        .load(vec![DenyAfter::new("", 1), DenyAfter::new("api", 0)])
        .unwrap_err();
    let fields: Vec<_> = errors
        .errors()
        .iter()
        .map(|e| (e.kind, e.index, e.field))
        .collect();
    assert_eq!(
        fields,
        [("deny_after", 0, "resource"), ("deny_after", 1, "n")]
    );
    assert_eq!(
        rules.rules(),
        [DenyAfter::new("other", 5), DenyAfter::new("api", 2)],
        "nothing changed"
    );
    // A changed rule starts afresh.
    rules.load(vec![DenyAfter::new("api", 3)]).unwrap();
    drop(sentinel.entry("api").unwrap());
}
