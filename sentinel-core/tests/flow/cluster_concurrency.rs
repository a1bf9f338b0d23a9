//! Cluster concurrency: a concurrency-grade flow rule in cluster mode takes
//! a token of the instance's `ClusterTokens` service at entry and gives it
//! back at exit (or when the entry is refused after it); with no answer,
//! the rule's count applies on this instance (or the entry passes), and a
//! token the service counted for its fallback comes back too.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use parking_lot::Mutex;
use sentinel_flow_core::flow::{
    ClusterFlow, ClusterFlowConfig, ClusterTokens, ConcurrencyAnswer, FlowGrade, FlowRule,
    TokenAnswer,
};
use sentinel_flow_core::{BlockKind, Sentinel};

use crate::support::{instance, load};

/// A pool of `size` tokens; answers `Unavailable` with a fallback token
/// of its own when told to.
#[derive(Debug)]
struct Pool {
    size: usize,
    /// 0: answers from the pool; 1: unavailable with a fallback token;
    /// 2: unavailable without one.
    mode: AtomicU8,
    next: AtomicU64,
    held: Mutex<BTreeSet<u64>>,
    acquired: AtomicU64,
    released: AtomicU64,
}

impl Pool {
    fn new(size: usize) -> Arc<Self> {
        Arc::new(Pool {
            size,
            mode: AtomicU8::new(0),
            next: AtomicU64::new(1),
            held: Mutex::new(BTreeSet::new()),
            acquired: AtomicU64::new(0),
            released: AtomicU64::new(0),
        })
    }

    fn held(&self) -> usize {
        self.held.lock().len()
    }
}

impl ClusterTokens for Pool {
    fn acquire(&self, _: &ClusterFlow, _: u32, _: u64) -> TokenAnswer {
        panic!("a concurrency rule asks for tokens, not permits");
    }

    fn acquire_concurrent(&self, flow: &ClusterFlow, permits: u32, _: u64) -> ConcurrencyAnswer {
        assert!(flow.is_concurrency());
        assert_eq!(permits, 1);
        let mode = self.mode.load(Ordering::SeqCst);
        if mode == 2 {
            return ConcurrencyAnswer::Unavailable(None);
        }
        let mut held = self.held.lock();
        if mode == 0 && held.len() >= self.size {
            return ConcurrencyAnswer::Refused;
        }
        let token = self.next.fetch_add(1, Ordering::SeqCst);
        held.insert(token);
        self.acquired.fetch_add(1, Ordering::SeqCst);
        match mode {
            0 => ConcurrencyAnswer::Granted(token),
            _ => ConcurrencyAnswer::Unavailable(Some(token)),
        }
    }

    fn release_concurrent(&self, flow: &ClusterFlow, token: u64) {
        assert_eq!(flow.flow_id(), 3);
        assert!(self.held.lock().remove(&token), "token {token} held once");
        self.released.fetch_add(1, Ordering::SeqCst);
    }
}

fn threads_rule(resource: &str, count: f64, fallback: bool) -> FlowRule {
    FlowRule {
        grade: FlowGrade::Concurrency,
        cluster_mode: true,
        cluster_config: ClusterFlowConfig {
            flow_id: Some(3),
            fallback_to_local_when_fail: fallback,
            ..ClusterFlowConfig::default()
        },
        ..FlowRule::new(resource, count)
    }
}

fn attach(sentinel: &Sentinel, pool: &Arc<Pool>) {
    sentinel.set_cluster_tokens(Some(pool.clone() as Arc<dyn ClusterTokens>));
}

#[test]
fn a_cluster_concurrency_entry_holds_its_token_until_its_exit() {
    let (_clock, sentinel) = instance();
    let pool = Pool::new(3);
    attach(&sentinel, &pool);
    // The local count (1) does not apply while the cluster answers.
    load(&sentinel, [threads_rule("r", 1.0, true)]);
    let held: Vec<_> = (0..3)
        .map(|_| sentinel.entry("r").expect("a token"))
        .collect();
    assert_eq!(pool.held(), 3);
    let refused = sentinel.entry("r").unwrap_err();
    assert_eq!(refused.kind(), BlockKind::Flow);
    drop(held);
    assert_eq!(pool.held(), 0, "every exit gave its token back");
    assert_eq!(pool.released.load(Ordering::SeqCst), 3);
    assert!(sentinel.entry("r").is_ok());
    assert_eq!(pool.held(), 0);
}

#[test]
fn a_token_comes_back_when_a_later_rule_refuses_the_entry() {
    let (_clock, sentinel) = instance();
    let pool = Pool::new(5);
    attach(&sentinel, &pool);
    // The cluster rule first (load order), then a local rule that refuses.
    load(
        &sentinel,
        [threads_rule("r", 5.0, true), FlowRule::new("r", 0.0)],
    );
    assert!(sentinel.entry("r").is_err());
    assert_eq!(pool.acquired.load(Ordering::SeqCst), 1);
    assert_eq!(pool.held(), 0, "given back by the refusal");
}

#[test]
fn unanswered_the_local_count_applies_and_fallback_tokens_come_back() {
    let (_clock, sentinel) = instance();
    let pool = Pool::new(0);
    pool.mode.store(1, Ordering::SeqCst);
    attach(&sentinel, &pool);
    load(&sentinel, [threads_rule("r", 1.0, true)]);
    let first = sentinel.entry("r").expect("within the local count");
    assert!(sentinel.entry("r").is_err(), "past the local count");
    assert_eq!(pool.held(), 1, "the refused entry's token came back");
    drop(first);
    assert_eq!(pool.held(), 0);

    // Without a fallback token, the same local count.
    pool.mode.store(2, Ordering::SeqCst);
    let first = sentinel.entry("r").expect("within the local count");
    assert!(sentinel.entry("r").is_err());
    drop(first);
}

#[test]
fn unanswered_without_local_fallback_every_entry_passes() {
    let (_clock, sentinel) = instance();
    let pool = Pool::new(0);
    pool.mode.store(2, Ordering::SeqCst);
    attach(&sentinel, &pool);
    load(&sentinel, [threads_rule("r", 1.0, false)]);
    let held: Vec<_> = (0..4).map(|_| sentinel.entry("r")).collect();
    assert!(held.iter().all(Result::is_ok));
}

#[test]
fn rules_sharing_a_flow_id_must_agree_on_the_grade() {
    let (_clock, sentinel) = instance();
    let qps = FlowRule {
        grade: FlowGrade::Qps,
        ..threads_rule("b", 2.0, true)
    };
    let error = sentinel
        .flow_rules()
        .load(vec![threads_rule("a", 2.0, true), qps])
        .unwrap_err();
    assert!(error.to_string().contains("grade"), "{error}");
}
