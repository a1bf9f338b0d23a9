//! The flow slot's cluster hook: a cluster rule asks the instance's
//! `ClusterTokens` service; granted passes, refused blocks with the rule,
//! unavailable falls back to the local count (or passes); the cluster
//! fields are validated, alone and across rules; rules in cluster mode
//! with no service attached are flagged in the snapshot and the Prometheus
//! text, apart from a service attached that cannot answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use sentinel_flow_core::flow::{
    ClusterFlow, ClusterFlowConfig, ClusterStatus, ClusterThresholdType, ClusterTokens, FlowGrade,
    FlowRule, TokenAnswer,
};
use sentinel_flow_core::{BlockKind, RuleBook, Sentinel};

use crate::support::{T0, instance, load};

/// Answers what it is told, counting the calls and the permits asked for.
#[derive(Debug)]
struct Scripted {
    answer: AtomicU32,
    calls: AtomicU64,
    last_flow: AtomicU64,
}

impl Scripted {
    fn new(answer: TokenAnswer) -> Arc<Self> {
        let s = Arc::new(Scripted {
            answer: AtomicU32::new(0),
            calls: AtomicU64::new(0),
            last_flow: AtomicU64::new(0),
        });
        s.set(answer);
        s
    }

    fn set(&self, answer: TokenAnswer) {
        let code = match answer {
            TokenAnswer::Granted => 0,
            TokenAnswer::Refused => 1,
            _ => 2,
        };
        self.answer.store(code, Ordering::SeqCst);
    }
}

impl ClusterTokens for Scripted {
    fn acquire(&self, flow: &ClusterFlow, permits: u32, now_ms: u64) -> TokenAnswer {
        assert_eq!(permits, 1);
        assert_eq!(now_ms, T0);
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.last_flow.store(flow.flow_id(), Ordering::SeqCst);
        match self.answer.load(Ordering::SeqCst) {
            0 => TokenAnswer::Granted,
            1 => TokenAnswer::Refused,
            _ => TokenAnswer::Unavailable,
        }
    }
}

fn cluster_rule(resource: &str, count: f64, flow_id: u64, fallback: bool) -> FlowRule {
    FlowRule {
        cluster_mode: true,
        cluster_config: ClusterFlowConfig {
            flow_id: Some(flow_id),
            fallback_to_local_when_fail: fallback,
            ..ClusterFlowConfig::default()
        },
        ..FlowRule::new(resource, count)
    }
}

/// Passes out of `n` entries (each held until the end).
fn passes(sentinel: &Sentinel, resource: &str, n: usize) -> usize {
    let entries: Vec<_> = (0..n).map(|_| sentinel.entry(resource)).collect();
    entries.iter().filter(|e| e.is_ok()).count()
}

#[test]
fn granted_permits_pass_past_the_local_count() {
    let (_clock, sentinel) = instance();
    let tokens = Scripted::new(TokenAnswer::Granted);
    sentinel.set_cluster_tokens(Some(tokens.clone()));
    load(&sentinel, [cluster_rule("pay", 2.0, 7, true)]);
    assert_eq!(passes(&sentinel, "pay", 10), 10);
    assert_eq!(tokens.calls.load(Ordering::SeqCst), 10);
    assert_eq!(tokens.last_flow.load(Ordering::SeqCst), 7);
    let node = sentinel.resource_node("pay").unwrap();
    assert_eq!(
        node.stats().total_pass(T0),
        10,
        "statistics as for local rules"
    );
}

#[test]
fn refused_blocks_with_the_rule() {
    let (_clock, sentinel) = instance();
    sentinel.set_cluster_tokens(Some(Scripted::new(TokenAnswer::Refused)));
    let rule = cluster_rule("pay", 100.0, 7, true);
    load(&sentinel, [rule.clone()]);
    let error = sentinel.entry("pay").unwrap_err();
    assert_eq!(error.kind(), BlockKind::Flow);
    assert_eq!(error.rule_as::<FlowRule>(), Some(&rule));
    assert_eq!(
        sentinel
            .resource_node("pay")
            .unwrap()
            .stats()
            .total_block(T0),
        1
    );
}

#[test]
fn unavailable_falls_back_to_the_local_count_or_passes() {
    let (_clock, sentinel) = instance();
    let tokens = Scripted::new(TokenAnswer::Unavailable);
    sentinel.set_cluster_tokens(Some(tokens.clone()));
    load(
        &sentinel,
        [
            cluster_rule("local", 3.0, 1, true),
            cluster_rule("open", 3.0, 2, false),
        ],
    );
    assert_eq!(passes(&sentinel, "local", 10), 3);
    assert_eq!(passes(&sentinel, "open", 10), 10);
    // The service comes back: its answers count again.
    tokens.set(TokenAnswer::Refused);
    assert!(sentinel.entry("open").is_err());
}

#[test]
fn without_a_service_cluster_rules_fall_back() {
    let (_clock, sentinel) = instance();
    assert!(!sentinel.has_cluster_tokens());
    load(&sentinel, [cluster_rule("pay", 2.0, 7, true)]);
    assert_eq!(passes(&sentinel, "pay", 5), 2);
    let tokens = Scripted::new(TokenAnswer::Granted);
    sentinel.set_cluster_tokens(Some(tokens.clone()));
    assert!(sentinel.has_cluster_tokens());
    assert_eq!(passes(&sentinel, "pay", 5), 5);
    sentinel.set_cluster_tokens(None);
    assert!(sentinel.entry("pay").is_err(), "local count again, spent");
}

#[test]
fn local_rules_never_ask_the_service() {
    let (_clock, sentinel) = instance();
    let tokens = Scripted::new(TokenAnswer::Refused);
    sentinel.set_cluster_tokens(Some(tokens.clone()));
    let mut not_cluster = cluster_rule("a", 2.0, 7, true);
    not_cluster.cluster_mode = false;
    load(&sentinel, [not_cluster, FlowRule::new("b", 2.0)]);
    assert_eq!(passes(&sentinel, "a", 5), 2);
    assert_eq!(passes(&sentinel, "b", 5), 2);
    assert_eq!(tokens.calls.load(Ordering::SeqCst), 0);
}

#[test]
fn a_later_local_rule_still_blocks_a_granted_entry() {
    let (_clock, sentinel) = instance();
    sentinel.set_cluster_tokens(Some(Scripted::new(TokenAnswer::Granted)));
    let local = FlowRule::new("pay", 1.0);
    load(
        &sentinel,
        [cluster_rule("pay", 100.0, 7, true), local.clone()],
    );
    assert!(sentinel.entry("pay").is_ok());
    let error = sentinel.entry("pay").unwrap_err();
    assert_eq!(error.rule_as::<FlowRule>(), Some(&local));
}

#[test]
fn cluster_fields_are_checked() {
    let (_clock, sentinel) = instance();
    let mut no_id = cluster_rule("a", 1.0, 0, true);
    no_id.cluster_config.flow_id = None;
    // The concurrency grade is accepted in cluster mode (it limits locally).
    let mut concurrency = cluster_rule("b", 1.0, 2, true);
    concurrency.grade = FlowGrade::Concurrency;
    concurrency.cluster_config.sample_count = 0;
    let mut window = cluster_rule("c", 1.0, 3, true);
    window.cluster_config.window_interval_ms = 1_000;
    window.cluster_config.sample_count = 3;
    let mut zero = cluster_rule("d", 1.0, 4, true);
    zero.cluster_config.window_interval_ms = 0;
    zero.cluster_config.sample_count = 0;
    let errors = sentinel
        .flow_rules()
        .load(vec![no_id, concurrency, window, zero])
        .unwrap_err();
    let fields: Vec<_> = errors
        .errors()
        .iter()
        .map(|e| (e.index, e.field, e.message.as_str()))
        .collect();
    assert_eq!(
        fields,
        [
            (
                0,
                "cluster_config.flow_id",
                "is required when cluster_mode is on"
            ),
            (1, "cluster_config.sample_count", "must be > 0"),
            (
                2,
                "cluster_config.sample_count",
                "must divide window_interval_ms (1000 ms into 3 buckets)"
            ),
            (3, "cluster_config.window_interval_ms", "must be > 0"),
            (3, "cluster_config.sample_count", "must be > 0"),
        ]
    );
    assert!(sentinel.flow_rules().rules().is_empty(), "nothing loaded");
    // Out of cluster mode the config is not read.
    let mut off = cluster_rule("e", 1.0, 0, true);
    off.cluster_mode = false;
    off.cluster_config.flow_id = None;
    off.cluster_config.sample_count = 0;
    sentinel.flow_rules().load(vec![off]).unwrap();
}

#[test]
fn one_flow_id_needs_one_threshold() {
    let (_clock, sentinel) = instance();
    let same = vec![
        cluster_rule("a", 10.0, 7, true),
        cluster_rule("b", 10.0, 7, false),
    ];
    sentinel.flow_rules().load(same.clone()).unwrap();
    let mut avg = cluster_rule("c", 10.0, 7, true);
    avg.cluster_config.threshold_type = ClusterThresholdType::AvgLocal;
    let differ = vec![
        cluster_rule("a", 10.0, 7, true),
        cluster_rule("b", 20.0, 7, true),
        cluster_rule("x", 20.0, 8, true),
        avg,
    ];
    let errors = sentinel.flow_rules().load(differ.clone()).unwrap_err();
    let at: Vec<_> = errors.errors().iter().map(|e| (e.index, e.field)).collect();
    assert_eq!(
        at,
        [(1, "cluster_config.flow_id"), (3, "cluster_config.flow_id")]
    );
    assert!(
        errors.errors()[0]
            .message
            .contains("flow id 7 is also rule 0's (on a)")
    );
    assert_eq!(
        sentinel.flow_rules().rules(),
        same,
        "the rules in force stay"
    );
    let book = RuleBook {
        flow: differ,
        ..RuleBook::default()
    };
    assert_eq!(book.validate().unwrap_err().errors().len(), 2);
}

/// Binds each rule to a per-rule service that answers `answer`.
#[derive(Debug)]
struct Binding {
    binds: AtomicU64,
    answer: TokenAnswer,
    bound: Arc<Scripted>,
}

impl ClusterTokens for Binding {
    fn acquire(&self, _: &ClusterFlow, _: u32, _: u64) -> TokenAnswer {
        panic!("a bound rule asks its binding")
    }

    fn bind(&self, _: &ClusterFlow) -> Option<Arc<dyn ClusterTokens>> {
        self.binds.fetch_add(1, Ordering::SeqCst);
        Some(self.bound.clone())
    }
}

#[test]
fn a_bound_rule_asks_its_binding_until_the_service_changes() {
    let (_clock, sentinel) = instance();
    let bound = Scripted::new(TokenAnswer::Granted);
    let binding = Arc::new(Binding {
        binds: AtomicU64::new(0),
        answer: TokenAnswer::Granted,
        bound: bound.clone(),
    });
    assert_eq!(binding.answer, TokenAnswer::Granted);
    sentinel.set_cluster_tokens(Some(binding.clone()));
    load(&sentinel, [cluster_rule("pay", 1.0, 7, true)]);
    assert_eq!(passes(&sentinel, "pay", 5), 5);
    assert_eq!(binding.binds.load(Ordering::SeqCst), 1, "bound once");
    assert_eq!(bound.calls.load(Ordering::SeqCst), 5);
    // Another service: the old binding is no longer asked.
    let other = Scripted::new(TokenAnswer::Refused);
    sentinel.set_cluster_tokens(Some(other.clone()));
    assert!(sentinel.entry("pay").is_err());
    assert_eq!(other.calls.load(Ordering::SeqCst), 1);
    assert_eq!(bound.calls.load(Ordering::SeqCst), 5);
}

/// A service that grants, and answers or not as told.
#[derive(Debug, Default)]
struct Switchable {
    down: std::sync::atomic::AtomicBool,
}

impl ClusterTokens for Switchable {
    fn acquire(&self, _: &ClusterFlow, _: u32, _: u64) -> TokenAnswer {
        TokenAnswer::Granted
    }

    fn is_available(&self) -> bool {
        !self.down.load(Ordering::SeqCst)
    }
}

/// Each resource's `cluster_rules_unattached` and `rules.cluster_flow`.
fn unattached(sentinel: &Sentinel) -> Vec<(String, usize, usize)> {
    let mut found: Vec<_> = sentinel
        .resources()
        .iter()
        .map(|r| {
            (
                r.name.to_string(),
                r.cluster_rules_unattached,
                r.rules.cluster_flow,
            )
        })
        .collect();
    found.sort();
    found
}

#[test]
fn cluster_rules_without_a_cluster_are_flagged_in_the_snapshot() {
    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [
            cluster_rule("pay", 2.0, 7, true),
            cluster_rule("pay", 2.0, 7, false),
            FlowRule::new("pay", 100.0),
            FlowRule::new("local", 1.0),
        ],
    );
    drop(sentinel.entry("pay"));
    drop(sentinel.entry("local"));
    assert_eq!(
        unattached(&sentinel),
        [("local".into(), 0, 0), ("pay".into(), 2, 2)]
    );

    // Attached, answering or not: not this case (the service's own state
    // tells an unanswering cluster).
    let tokens = Arc::new(Switchable::default());
    sentinel.set_cluster_tokens(Some(tokens.clone()));
    assert_eq!(
        unattached(&sentinel),
        [("local".into(), 0, 0), ("pay".into(), 0, 2)]
    );
    tokens.down.store(true, Ordering::SeqCst);
    assert_eq!(unattached(&sentinel)[1], ("pay".into(), 0, 2));

    sentinel.set_cluster_tokens(None);
    assert_eq!(unattached(&sentinel)[1], ("pay".into(), 2, 2));
}

#[test]
fn cluster_status_tells_no_service_from_a_service_that_cannot_answer() {
    let (clock, sentinel) = instance();
    assert_eq!(sentinel.cluster_status(), ClusterStatus::NotAttached);
    assert_eq!(sentinel.cluster_changed_ms(), None);

    clock.advance_ms(1_500);
    let tokens = Arc::new(Switchable::default());
    sentinel.set_cluster_tokens(Some(tokens.clone()));
    assert_eq!(sentinel.cluster_status(), ClusterStatus::Available);
    assert_eq!(sentinel.cluster_changed_ms(), Some(T0 + 1_500));

    tokens.down.store(true, Ordering::SeqCst);
    assert_eq!(sentinel.cluster_status(), ClusterStatus::Unavailable);
    tokens.down.store(false, Ordering::SeqCst);
    assert_eq!(sentinel.cluster_status(), ClusterStatus::Available);

    clock.advance_ms(500);
    sentinel.set_cluster_tokens(None);
    assert_eq!(sentinel.cluster_status(), ClusterStatus::NotAttached);
    assert_eq!(sentinel.cluster_changed_ms(), Some(T0 + 2_000));
}

#[cfg(feature = "prometheus")]
#[test]
fn cluster_rules_without_a_cluster_show_in_prometheus() {
    use crate::support::prometheus::{key, parse};
    use sentinel_flow_core::prometheus::render_prometheus;

    let (_clock, sentinel) = instance();
    load(
        &sentinel,
        [
            cluster_rule("pay", 2.0, 7, true),
            cluster_rule("refund", 2.0, 8, true),
            cluster_rule("refund", 2.0, 8, true),
            FlowRule::new("local", 1.0),
        ],
    );
    // Rules in force are shown before any entry of their resource.
    let gauge = "sentinel_cluster_rules_unattached";
    let (samples, types) = parse(&render_prometheus(&sentinel));
    assert_eq!(types[gauge], "gauge");
    assert_eq!(samples[&key(gauge, &[("resource", "pay")])], 1.0);
    assert_eq!(samples[&key(gauge, &[("resource", "refund")])], 2.0);
    assert!(!samples.contains_key(&key(gauge, &[("resource", "local")])));

    sentinel.set_cluster_tokens(Some(Arc::new(Switchable::default())));
    let (samples, _) = parse(&render_prometheus(&sentinel));
    assert_eq!(samples[&key(gauge, &[("resource", "pay")])], 0.0);
    assert_eq!(samples[&key(gauge, &[("resource", "refund")])], 0.0);
}

/// Panics on every call.
#[derive(Debug)]
struct Panicking;

impl ClusterTokens for Panicking {
    fn acquire(&self, _: &ClusterFlow, _: u32, _: u64) -> TokenAnswer {
        panic!("a token service with a bug");
    }
}

#[test]
fn a_panicking_token_service_counts_as_unavailable_and_leaks_nothing() {
    let (_clock, sentinel) = instance();
    sentinel.set_cluster_tokens(Some(Arc::new(Panicking)));
    // A concurrency rule of 1 reserves before the cluster rule asks the
    // service: the panic must not keep the reservation.
    load(
        &sentinel,
        [
            FlowRule {
                grade: FlowGrade::Concurrency,
                ..FlowRule::new("panicky", 1.0)
            },
            cluster_rule("panicky", 5.0, 31, true),
        ],
    );
    for round in 0..3 {
        let entry = sentinel
            .entry("panicky")
            .unwrap_or_else(|e| panic!("round {round}: refused by {:?}", e.kind()));
        assert!(
            sentinel.entry("panicky").is_err(),
            "round {round}: the concurrency rule holds one"
        );
        drop(entry);
    }
    // Without the local fallback the rule passes what the service did not answer.
    load(&sentinel, [cluster_rule("panicky", 1.0, 32, false)]);
    assert_eq!(passes(&sentinel, "panicky", 4), 4);
}
