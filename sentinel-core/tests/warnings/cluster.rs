//! A flow rule in cluster mode on an instance with no cluster service
//! attached falls back (counts locally, or passes): a warning names its resources once per load
//! of such rules (never per entry), and again when the service is taken
//! away while they are in force.

use std::sync::Arc;

use sentinel_flow_core::RuleBook;
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::{
    ClusterFlow, ClusterFlowConfig, ClusterTokens, FlowRule, TokenAnswer,
};

use crate::support::instance;
use crate::support::warnings::warnings;

#[derive(Debug)]
struct Granting;

impl ClusterTokens for Granting {
    fn acquire(&self, _: &ClusterFlow, _: u32, _: u64) -> TokenAnswer {
        TokenAnswer::Granted
    }
}

fn cluster_rule(resource: &str) -> FlowRule {
    FlowRule {
        cluster_mode: true,
        cluster_config: ClusterFlowConfig {
            flow_id: Some(3),
            ..ClusterFlowConfig::default()
        },
        ..FlowRule::new(resource, 2.0)
    }
}

#[test]
fn cluster_rules_without_a_cluster_warn_once_per_load_and_on_detach() {
    let (_clock, sentinel) = instance();

    // Loaded with nothing attached: one warning naming the resource.
    let heard = warnings(|| {
        sentinel
            .flow_rules()
            .load(vec![
                cluster_rule("POST:/pay"),
                FlowRule::new("GET:/local", 5.0),
            ])
            .unwrap();
    });
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert!(
        heard[0].contains("1 flow rule(s) in cluster mode fall back"),
        "{heard:?}"
    );
    assert!(
        heard[0].contains("no cluster service is attached"),
        "{heard:?}"
    );
    assert!(heard[0].ends_with("resources: POST:/pay"), "{heard:?}");

    // Entries, blocked or not, and loads of other kinds say nothing.
    let heard = warnings(|| {
        for _ in 0..50 {
            drop(sentinel.entry("POST:/pay"));
        }
        sentinel
            .degrade_rules()
            .load(vec![DegradeRule::new(
                "GET:/local",
                DegradeGrade::ErrorCount,
                10.0,
            )])
            .unwrap();
    });
    assert!(heard.is_empty(), "{heard:?}");

    // Every load of flow rules with cluster rules says it again, the rule
    // book's too.
    let heard = warnings(|| {
        sentinel
            .flow_rules()
            .load(vec![cluster_rule("POST:/pay")])
            .unwrap();
        sentinel
            .load_rule_book(RuleBook {
                flow: vec![cluster_rule("POST:/refund")],
                ..RuleBook::default()
            })
            .unwrap();
    });
    assert_eq!(heard.len(), 2, "{heard:?}");
    assert!(heard[1].ends_with("resources: POST:/refund"), "{heard:?}");

    // Attached: loads are quiet.
    let heard = warnings(|| {
        sentinel.set_cluster_tokens(Some(Arc::new(Granting)));
        sentinel
            .flow_rules()
            .load(vec![cluster_rule("POST:/pay")])
            .unwrap();
    });
    assert!(heard.is_empty(), "{heard:?}");

    // Taken away while the rules are in force: one warning; taking nothing
    // away again, none.
    let heard = warnings(|| {
        sentinel.set_cluster_tokens(None);
        sentinel.set_cluster_tokens(None);
    });
    assert_eq!(heard.len(), 1, "{heard:?}");
    assert!(
        heard[0].contains("the cluster service was taken away"),
        "{heard:?}"
    );
    assert!(heard[0].ends_with("resources: POST:/pay"), "{heard:?}");

    // Local rules alone, attached or not: nothing.
    let heard = warnings(|| {
        sentinel
            .flow_rules()
            .load(vec![FlowRule::new("POST:/pay", 1.0)])
            .unwrap();
        sentinel.set_cluster_tokens(Some(Arc::new(Granting)));
        sentinel.set_cluster_tokens(None);
    });
    assert!(heard.is_empty(), "{heard:?}");
}
