//! A rule source's state where operators look: the live page's data and
//! the Prometheus text at `GET /metrics` show a watched rule file before
//! and after a bad edit.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{T0, center, get, instance};
use sentinel_flow_rules::{MIN_INTERVAL, RuleWatcher};
use serde_json::Value;

/// Writes `text` to a temporary file renamed over `path` (taken at once).
fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The one sample of `family` in `text`, for the source `name`.
fn sample(text: &str, family: &str, name: &str) -> String {
    let head = format!("{family}{{source=\"{name}\"}} ");
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with(&head)).collect();
    assert_eq!(lines.len(), 1, "{family} in:\n{text}");
    lines[0][head.len()..].to_owned()
}

#[tokio::test]
async fn the_live_data_and_the_metrics_show_a_rule_files_state_before_and_after_a_bad_edit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.yaml");
    std::fs::write(&path, "flow:\n  - {resource: a, count: 1}\n").unwrap();
    let name = path.display().to_string();
    let (sentinel, _clock) = instance();
    let watch = RuleWatcher::new(&path)
        .interval(MIN_INTERVAL)
        .start(Arc::clone(&sentinel))
        .unwrap();
    let server = center(&sentinel)
        .source_state(watch.state_reader())
        .start()
        .unwrap();
    let addr = server.local_addr();

    let data = get(addr, "/live/data").await.json();
    let sources = data["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 1, "{data}");
    let source = &sources[0];
    assert_eq!(source["name"], name.as_str());
    assert_eq!(source["connected"], true);
    assert_eq!(source["applied_at_ms"], T0);
    assert_eq!(source["last_error"], Value::Null);
    assert_eq!(source["from_last_known_good"], false);
    assert_eq!(
        (
            &source["applies"],
            &source["refusals"],
            &source["disconnects"]
        ),
        (&1.into(), &0.into(), &0.into())
    );
    let revision = source["revision"].as_str().unwrap().to_owned();
    assert!(revision.starts_with("h:"), "{revision}");

    let metrics = get(addr, "/metrics").await;
    assert_eq!(metrics.status, 200);
    assert_eq!(
        metrics.content_type.as_deref(),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    let text = &metrics.body;
    assert_eq!(sample(text, "sentinel_rule_source_connected", &name), "1");
    assert_eq!(sample(text, "sentinel_rule_source_error", &name), "0");
    assert_eq!(
        sample(text, "sentinel_rule_source_applied_timestamp_ms", &name),
        T0.to_string()
    );
    assert_eq!(
        sample(text, "sentinel_rule_source_applies_total", &name),
        "1"
    );
    assert_eq!(
        sample(text, "sentinel_rule_source_refusals_total", &name),
        "0"
    );
    #[cfg(feature = "prometheus")]
    assert!(
        text.contains("# TYPE sentinel_cap gauge"),
        "the instance's statistics too: {text}"
    );

    // A bad edit: refused, the rules in force and their revision kept.
    write_atomic(&path, "flow:\n  - {resource: a, cuont: 2}\n");
    let start = Instant::now();
    while watch.state().refusals == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "not refused");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let data = get(addr, "/live/data").await.json();
    let source = &data["sources"][0];
    assert_eq!(source["connected"], true);
    assert_eq!(source["revision"], revision.as_str());
    assert_eq!(
        (&source["applies"], &source["refusals"]),
        (&1.into(), &1.into())
    );
    let error = source["last_error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!("{name}:2:")) && error.contains("cuont"),
        "{error}"
    );
    let text = get(addr, "/metrics").await.body;
    assert_eq!(sample(&text, "sentinel_rule_source_error", &name), "1");
    assert_eq!(
        sample(&text, "sentinel_rule_source_refusals_total", &name),
        "1"
    );
    assert_eq!(
        sample(&text, "sentinel_rule_source_applies_total", &name),
        "1"
    );
    assert_eq!(sentinel.rule_book().flow[0].count, 1.0);

    // Fixed: applied, the error cleared.
    write_atomic(&path, "flow:\n  - {resource: a, count: 2}\n");
    while watch.state().applies < 2 {
        assert!(start.elapsed() < Duration::from_secs(10), "not applied");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let source = get(addr, "/live/data").await.json()["sources"][0].clone();
    assert_eq!(source["last_error"], Value::Null);
    assert_ne!(source["revision"], revision.as_str());
    let text = get(addr, "/metrics").await.body;
    assert_eq!(sample(&text, "sentinel_rule_source_error", &name), "0");
}

#[tokio::test]
async fn two_sources_share_each_family_and_none_leaves_the_page_and_the_metrics_empty() {
    let (sentinel, _clock) = instance();
    let state = |name: &str, connected: bool| {
        let mut state = sentinel_flow_rules::source::SourceState::default();
        state.name = name.into();
        state.connected = connected;
        move || state.clone()
    };
    let server = center(&sentinel)
        .source_state(state("one", true))
        .source_state(state("two", false))
        .start()
        .unwrap();
    let addr = server.local_addr();
    let data = get(addr, "/live/data").await.json();
    let names: Vec<&str> = data["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["one", "two"]);
    let text = get(addr, "/metrics").await.body;
    assert_eq!(
        text.matches("# TYPE sentinel_rule_source_connected gauge")
            .count(),
        1,
        "{text}"
    );
    assert_eq!(sample(&text, "sentinel_rule_source_connected", "one"), "1");
    assert_eq!(sample(&text, "sentinel_rule_source_connected", "two"), "0");

    let bare = center(&sentinel).start().unwrap();
    let data = get(bare.local_addr(), "/live/data").await.json();
    assert_eq!(data["sources"], Value::Array(vec![]));
    let text = get(bare.local_addr(), "/metrics").await.body;
    assert!(!text.contains("sentinel_rule_source"), "{text}");
}
