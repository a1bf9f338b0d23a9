//! A QPS hot-parameter rule in cluster mode asks the instance's
//! `ClusterTokens` service for each entry's values, each with its
//! threshold (its item's count, or the rule's), all of a collection
//! argument together; the answer decides, and with no answer the rule's
//! `fallback_to_local_when_fail` does (its local check, or a pass). A
//! concurrency-grade rule in cluster mode and rules not in cluster mode
//! never ask.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use parking_lot::Mutex;
use sentinel_flow_core::flow::{ClusterFlow, ClusterTokens, TokenAnswer};
use sentinel_flow_core::param_flow::{
    ClusterParamFlow, ParamClusterThresholdType, ParamFlowClusterConfig, ParamFlowGrade,
    ParamFlowItem, ParamFlowRule, ParamToken,
};
use sentinel_flow_core::{ParamValue, Sentinel};

use super::{admit, arg};
use crate::support::instance;

/// What a service was asked: the flow id, each value with its
/// threshold, and the permits.
type Asked = (u64, Vec<(ParamValue, u64)>, u32);

/// Answers as told (0: granted, 1: refused, 2: unavailable), and records
/// what it was asked.
#[derive(Debug, Default)]
struct Scripted {
    answer: AtomicU8,
    asked: Mutex<Vec<Asked>>,
}

impl ClusterTokens for Scripted {
    fn acquire(&self, _: &ClusterFlow, _: u32, _: u64) -> TokenAnswer {
        panic!("a hot-parameter rule asks for its values");
    }

    fn acquire_param(
        &self,
        flow: &ClusterParamFlow,
        values: &[ParamToken<'_>],
        permits: u32,
        _: u64,
    ) -> TokenAnswer {
        let values = values
            .iter()
            .map(|t| (t.value().clone(), t.threshold()))
            .collect();
        self.asked.lock().push((flow.flow_id(), values, permits));
        match self.answer.load(Ordering::SeqCst) {
            0 => TokenAnswer::Granted,
            1 => TokenAnswer::Refused,
            _ => TokenAnswer::Unavailable,
        }
    }
}

fn cluster_rule(count: f64, fallback: bool) -> ParamFlowRule {
    ParamFlowRule {
        cluster_mode: true,
        cluster_config: ParamFlowClusterConfig {
            flow_id: Some(8),
            threshold_type: ParamClusterThresholdType::Global,
            fallback_to_local_when_fail: fallback,
            ..ParamFlowClusterConfig::default()
        },
        param_flow_item_list: vec![ParamFlowItem::new(ParamValue::from("vip"), 50.0)],
        ..ParamFlowRule::new("hot", 0, count)
    }
}

fn attached(rule: ParamFlowRule) -> (Sentinel, Arc<Scripted>) {
    let (_clock, sentinel) = instance();
    let service = Arc::new(Scripted::default());
    sentinel.set_cluster_tokens(Some(service.clone()));
    sentinel.param_flow_rules().load(vec![rule]).unwrap();
    (sentinel, service)
}

#[test]
fn a_cluster_rule_asks_for_each_value_with_its_threshold_and_the_answer_decides() {
    let (sentinel, service) = attached(cluster_rule(2.0, true));
    // Granted: past the rule's local count of 2.
    assert_eq!(admit(&sentinel, "hot", &arg("u1"), 5), 5);
    assert_eq!(admit(&sentinel, "hot", &arg("vip"), 1), 1);
    let list = [ParamValue::list(["a", "vip"])];
    assert_eq!(admit(&sentinel, "hot", &list, 1), 1);
    {
        let asked = service.asked.lock();
        assert_eq!(asked.len(), 7);
        assert_eq!(asked[0], (8, vec![(ParamValue::from("u1"), 2)], 1));
        assert_eq!(asked[5].1, vec![(ParamValue::from("vip"), 50)]);
        assert_eq!(
            asked[6].1,
            vec![(ParamValue::from("a"), 2), (ParamValue::from("vip"), 50)],
            "a collection's elements asked together"
        );
    }
    // Refused: blocked by the rule.
    service.answer.store(1, Ordering::SeqCst);
    let refused = sentinel.entry_builder("hot").args(&arg("u1")).enter();
    assert!(refused.is_err());
    // No argument: nothing asked, passes.
    let before = service.asked.lock().len();
    assert_eq!(admit(&sentinel, "hot", &[], 3), 3);
    assert_eq!(service.asked.lock().len(), before);
}

#[test]
fn with_no_answer_the_rule_falls_back_to_its_local_check_or_passes() {
    let (sentinel, service) = attached(cluster_rule(2.0, true));
    service.answer.store(2, Ordering::SeqCst);
    assert_eq!(admit(&sentinel, "hot", &arg("u1"), 5), 2, "the local count");

    let (sentinel, service) = attached(cluster_rule(2.0, false));
    service.answer.store(2, Ordering::SeqCst);
    assert_eq!(admit(&sentinel, "hot", &arg("u1"), 5), 5, "passes");

    // No service attached at all: the same fallback.
    let (_clock, sentinel) = instance();
    sentinel
        .param_flow_rules()
        .load(vec![cluster_rule(2.0, true)])
        .unwrap();
    assert_eq!(admit(&sentinel, "hot", &arg("u1"), 5), 2);
}

#[test]
fn local_rules_and_concurrency_rules_in_cluster_mode_never_ask_the_cluster() {
    let concurrency = ParamFlowRule {
        grade: ParamFlowGrade::Concurrency,
        ..cluster_rule(2.0, true)
    };
    let (sentinel, service) = attached(concurrency);
    let held: Vec<_> = (0..3)
        .filter_map(|_| sentinel.entry_builder("hot").args(&arg("u1")).enter().ok())
        .collect();
    assert_eq!(held.len(), 2, "counted on this instance");
    drop(held);
    let (sentinel, service_local) = attached(ParamFlowRule::new("hot", 0, 2.0));
    assert_eq!(admit(&sentinel, "hot", &arg("u1"), 5), 2);
    assert!(service.asked.lock().is_empty());
    assert!(service_local.asked.lock().is_empty());
}
