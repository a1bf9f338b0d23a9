//! Many pushes and reads at once, on a multi-threaded runtime: every push
//! succeeds whole, a reader never sees a mix of two lists, and with a rule
//! file the file and the instance end on the same list.

mod common;

use std::sync::Arc;

use common::{get, instance, post_form};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_rules::{LoadOptions, RuleFileStore, load_file};
use sentinel_flow_transport::CommandCenter;

const PUSHES: usize = 12;

/// Push `i`: `i + 1` rules on resources `p{i}-{j}`.
fn list(i: usize) -> String {
    let rules: Vec<String> = (0..=i)
        .map(|j| format!(r#"{{"resource":"p{i}-{j}","count":{j}}}"#))
        .collect();
    format!("[{}]", rules.join(","))
}

/// The push a list of rules came from, checking that it is one push whole.
fn push_of(rules: &[FlowRule]) -> Option<usize> {
    let first = rules.first()?;
    let i: usize = first.resource[1..].split('-').next()?.parse().ok()?;
    assert_eq!(rules.len(), i + 1, "a mix of pushes: {rules:?}");
    for (j, rule) in rules.iter().enumerate() {
        assert_eq!(
            rule.resource,
            format!("p{i}-{j}"),
            "a mix of pushes: {rules:?}"
        );
    }
    Some(i)
}

async fn hammer(with_file: bool) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.yaml");
    std::fs::write(&path, "flow: []\n").unwrap();
    let (sentinel, _) = instance();
    let mut center = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .allow_writes(true);
    if with_file {
        center = center.rule_file(RuleFileStore::open(&path).unwrap());
    }
    let server = center.start().unwrap();
    let addr = server.local_addr();

    let mut tasks = Vec::new();
    for i in 0..PUSHES {
        tasks.push(tokio::spawn(async move {
            let data = list(i);
            let answer = post_form(addr, "/setRules", &[("type", "flow"), ("data", &data)]).await;
            assert_eq!(
                (answer.status.as_u16(), answer.body.as_str()),
                (200, "success")
            );
        }));
        tasks.push(tokio::spawn(async move {
            let answer = get(addr, "/getRules?type=flow").await;
            let json = answer.json();
            let resources: Vec<FlowRule> = json
                .as_array()
                .unwrap()
                .iter()
                .map(|r| FlowRule::new(r["resource"].as_str().unwrap(), 0.0))
                .collect();
            push_of(&resources);
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let last = push_of(&sentinel.flow_rules().rules()).expect("some push is in force");
    assert!(last < PUSHES);
    if with_file {
        let on_disk = load_file(&path, &LoadOptions::default()).unwrap();
        assert_eq!(on_disk.book.flow, sentinel.flow_rules().rules());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_pushes_in_memory() {
    hammer(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_pushes_through_the_rule_file() {
    hammer(true).await;
}
