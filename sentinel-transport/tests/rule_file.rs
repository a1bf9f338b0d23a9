//! With a rule file, `setRules` writes the file (and the instance takes the
//! whole file's rules); an edit made on disk since is never overwritten.

mod common;

use std::sync::Arc;

use common::{instance, post_form};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_rules::{LoadOptions, RuleFileStore, load_file};
use sentinel_flow_transport::CommandCenter;

const FILE: &str = "\
# kept: a comment outside the flow section
degrade:
  - {resource: GET:/pay, grade: error_count, count: 3}
flow:
  - {resource: GET:/a, count: 10}
";

#[tokio::test]
async fn set_rules_writes_the_file_and_refuses_a_conflicting_edit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.yaml");
    std::fs::write(&path, FILE).unwrap();
    let (sentinel, _) = instance();
    let store = RuleFileStore::open(&path).unwrap();
    store.reload(&sentinel).unwrap();
    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .allow_writes(true)
        .rule_file(store)
        .start()
        .unwrap();
    let addr = server.local_addr();

    let data = r#"[{"resource":"GET:/b","count":0,"grade":1}]"#;
    let set = post_form(addr, "/setRules", &[("type", "flow"), ("data", data)]).await;
    assert_eq!((set.status.as_u16(), set.body.as_str()), (200, "success"));
    assert_eq!(
        sentinel.flow_rules().rules(),
        vec![FlowRule::new("GET:/b", 0.0)]
    );
    let on_disk = load_file(&path, &LoadOptions::default()).unwrap();
    assert_eq!(on_disk.book.flow, vec![FlowRule::new("GET:/b", 0.0)]);
    assert_eq!(on_disk.book.degrade, sentinel.degrade_rules().rules());
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with("# kept: a comment outside the flow section\n"),
        "{text}"
    );

    // Someone edits the file; the next push must not overwrite the edit.
    let edited = text.replace("count: 3", "count: 4");
    std::fs::write(&path, &edited).unwrap();
    let data = r#"[{"resource":"GET:/c","count":1}]"#;
    let conflict = post_form(addr, "/setRules", &[("type", "flow"), ("data", data)]).await;
    assert_eq!(conflict.status, 409, "{}", conflict.body);
    assert!(conflict.body.contains("conflict"), "{}", conflict.body);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), edited);
    assert_eq!(
        sentinel.flow_rules().rules(),
        vec![FlowRule::new("GET:/b", 0.0)]
    );

    // A bad list is refused before the file is touched.
    let bad = post_form(
        addr,
        "/setRules",
        &[("type", "flow"), ("data", r#"[{"count":-1}]"#)],
    )
    .await;
    assert_eq!(bad.status, 400);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), edited);
}
