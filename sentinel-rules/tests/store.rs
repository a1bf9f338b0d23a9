//! `RuleFileStore` on real files: what is rewritten and what is kept, every
//! problem refused with nothing changed, conflicts, permissions, symlinks,
//! and other layouts. Each test has its own Sentinel and directory.

mod support;

use std::fs;

use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_rules::{RuleChange, RuleFileStore, StoreError};
use support::{book, sentinel, temp_file};

/// Every kind, a version, percentiles and comments everywhere.
const COMMENTED: &str = "\
# Rules of the orders service. Keep this header.
version: 7   # bumped by hand

# Flow rules: QPS limits.
flow:
  # the main endpoint
  - resource: GET:/orders   # 20 per second
    count: 20
  - {resource: POST:/orders, count: 50}
  # - {resource: disabled, count: 1}

# Circuit breakers.
degrade:
  - {resource: GET:/inventory, grade: error_ratio, count: 0.5}   # keep me

system:
  - max_thread: 400

# Percentiles for these.
track_percentiles:
  - GET:/orders
# trailing comment
";

#[test]
fn replace_rewrites_one_section_and_keeps_every_other_byte() {
    let (_dir, path) = temp_file(COMMENTED);
    let s = sentinel();
    let store = RuleFileStore::open(&path).unwrap();
    let rules = vec![
        FlowRule::new("GET:/orders", 7.5),
        FlowRule::new("a: b #c", 1.0),
    ];
    store.replace(&s, RuleChange::Flow(rules.clone())).unwrap();
    let flow_section = "\
flow:
  - resource: GET:/orders
    count: 7.5
  - resource: \"a: b #c\"
    count: 1
";
    let start = COMMENTED.find("flow:\n").unwrap();
    let end = COMMENTED.find("  # - {resource: disabled").unwrap();
    let expected = format!("{}{flow_section}{}", &COMMENTED[..start], &COMMENTED[end..]);
    assert_eq!(fs::read_to_string(&path).unwrap(), expected);
    // The whole file is in force: the new flow rules and the rest.
    let in_force = s.rule_book();
    assert_eq!(in_force.flow, rules);
    assert_eq!(in_force.degrade.len(), 1);
    assert_eq!(in_force.system.len(), 1);
    assert_eq!(in_force, book(&path));
    assert!(
        s.resources()
            .iter()
            .any(|r| &*r.name == "GET:/orders" && r.percentiles.is_some())
    );
}

#[test]
fn a_kind_without_a_section_gets_one_at_the_end() {
    let (_dir, path) = temp_file(COMMENTED);
    let s = sentinel();
    let store = RuleFileStore::open(&path).unwrap();
    let rule = sentinel_flow_core::authority::AuthorityRule::new(
        "GET:/admin",
        sentinel_flow_core::authority::AuthorityStrategy::Black,
        ["bot", "it's"],
    );
    store
        .replace(&s, RuleChange::Authority(vec![rule.clone()]))
        .unwrap();
    let text = fs::read_to_string(&path).unwrap();
    let added = "authority:\n  - resource: GET:/admin\n    strategy: black\n    limit_app: [bot, \"it's\"]\n";
    assert_eq!(text, format!("{COMMENTED}\n{added}"));
    assert_eq!(s.rule_book().authority, vec![rule]);
    // An empty list is written as one, and clears the kind.
    store.replace(&s, RuleChange::System(vec![])).unwrap();
    assert!(
        fs::read_to_string(&path)
            .unwrap()
            .contains("\nsystem: []\n\n# Percentiles")
    );
    assert!(s.rule_book().system.is_empty());
}

#[test]
fn bad_rules_are_refused_with_every_problem_and_nothing_changes() {
    let (_dir, path) = temp_file(COMMENTED);
    let s = sentinel();
    let store = RuleFileStore::open(&path).unwrap();
    store.reload(&s).unwrap();
    let before = s.rule_book();
    let rules = vec![
        FlowRule::new("ok", 1.0),
        FlowRule::new("neg", -5.0),
        FlowRule {
            stat_sample_count: 0,
            ..FlowRule::new("", f64::NAN)
        },
    ];
    let error = store.replace(&s, RuleChange::Flow(rules)).unwrap_err();
    assert!(matches!(error, StoreError::Invalid(_)), "{error:?}");
    assert_eq!(
        error.lines(),
        [
            "flow[1] (neg): count must be a finite number >= 0, got -5",
            "flow[2]: resource must not be empty",
            "flow[2]: count must be a finite number >= 0, got NaN",
            "flow[2]: stat_sample_count must be > 0",
        ]
    );
    assert!(
        error
            .to_string()
            .starts_with("rules refused, nothing written:\nflow[1] (neg)")
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), COMMENTED);
    assert_eq!(s.rule_book(), before);
}

#[test]
fn the_rest_of_the_file_is_validated_too_at_its_positions_on_disk() {
    let text = "flow:\n  - {resource: a, count: 1}\n  - {resource: b, count: 2}\ndegrade:\n  - {resource: c, grade: slow, count: 1}\n";
    let (_dir, path) = temp_file(text);
    let s = sentinel();
    let store = RuleFileStore::open(&path).unwrap();
    // The new flow section is 7 lines where the old one was 3: the degrade
    // problem is at line 9 of the rewritten text, reported at 5, its line
    // on disk.
    let rules = vec![
        FlowRule::new("x", 1.0),
        FlowRule::new("y", 1.0),
        FlowRule::new("z", -1.0),
    ];
    let error = store.replace(&s, RuleChange::Flow(rules)).unwrap_err();
    let name = path.display();
    assert_eq!(
        error.lines(),
        [
            "flow[2] (z): count must be a finite number >= 0, got -1".to_owned(),
            format!(
                "{name}:5:26: degrade[0] (c): grade must be one of slow_request_ratio, \
                 error_ratio, error_count, got \"slow\""
            ),
        ]
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), text);
    assert!(s.rule_book().flow.is_empty());
    // A bad section that is replaced is no problem.
    let good = DegradeRule::new("c", DegradeGrade::ErrorCount, 3.0);
    store
        .replace(&s, RuleChange::Degrade(vec![good.clone()]))
        .unwrap();
    assert_eq!(s.rule_book().degrade, vec![good]);
    assert_eq!(s.rule_book().flow.len(), 2);
}

#[test]
fn an_outside_edit_is_a_conflict_until_reloaded() {
    let (_dir, path) = temp_file("flow:\n  - {resource: a, count: 1}\n");
    let s = sentinel();
    let store = RuleFileStore::open(&path).unwrap();
    let outside = "flow:\n  - {resource: a, count: 2}\n";
    fs::write(&path, outside).unwrap();
    let change = RuleChange::Flow(vec![FlowRule::new("b", 3.0)]);
    let error = store.replace(&s, change.clone()).unwrap_err();
    assert!(
        matches!(&error, StoreError::Conflict { path: p, .. } if *p == path),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("changed on disk") && message.contains("reload"),
        "{message}"
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), outside);
    assert!(s.rule_book().flow.is_empty());

    store.reload(&s).unwrap();
    assert_eq!(s.rule_book().flow[0].count, 2.0);
    store.replace(&s, change).unwrap();
    assert_eq!(s.rule_book().flow, vec![FlowRule::new("b", 3.0)]);

    fs::remove_file(&path).unwrap();
    let error = store.replace(&s, RuleChange::Flow(vec![])).unwrap_err();
    assert!(error.to_string().contains("was removed"), "{error}");
    assert_eq!(s.rule_book().flow.len(), 1);
}

#[test]
fn an_outside_edit_of_the_same_length_and_time_is_still_seen() {
    let (_dir, path) = temp_file("flow:\n  - {resource: a, count: 1}\n");
    let store = RuleFileStore::open(&path).unwrap();
    let modified = fs::metadata(&path).unwrap().modified().unwrap();
    fs::write(&path, "flow:\n  - {resource: a, count: 9}\n").unwrap();
    fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    let error = store
        .replace(&sentinel(), RuleChange::Flow(vec![]))
        .unwrap_err();
    assert!(matches!(error, StoreError::Conflict { .. }), "{error:?}");
}

#[cfg(unix)]
#[test]
fn permissions_and_symlinks_are_kept() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, target) = temp_file("flow: []\n");
    fs::set_permissions(&target, fs::Permissions::from_mode(0o640)).unwrap();
    let link = dir.path().join("link.yaml");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let s = sentinel();
    let store = RuleFileStore::open(&link).unwrap();
    assert_eq!(store.path(), link);
    store
        .replace(&s, RuleChange::Flow(vec![FlowRule::new("a", 1.0)]))
        .unwrap();
    assert!(
        fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let mode = fs::metadata(&target).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o640);
    assert_eq!(book(&target).flow, vec![FlowRule::new("a", 1.0)]);
    let mut names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [".rules.yaml.lock", "link.yaml", "rules.yaml"],
        "no temporary file left; the lock file beside the target"
    );
}

#[test]
fn stores_and_errors_cross_threads() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<RuleFileStore>();
    send_sync::<StoreError>();
    send_sync::<RuleChange>();
}

#[test]
fn every_problem_of_hot_parameter_rules_is_listed() {
    use sentinel_flow_core::ParamValue;
    use sentinel_flow_core::param_flow::{ParamFlowItem, ParamFlowRule};
    let (_dir, path) = temp_file("flow: []\n");
    let s = sentinel();
    let store = RuleFileStore::open(&path).unwrap();
    let rules = vec![
        ParamFlowRule {
            param_flow_item_list: vec![ParamFlowItem::new(ParamValue::list([1, 2]), 1.0)],
            ..ParamFlowRule::new("a", 0, 1.0)
        },
        ParamFlowRule {
            duration_in_sec: 0,
            param_flow_item_list: vec![ParamFlowItem::new("vip", -1.0)],
            ..ParamFlowRule::new("b", 1, 2.0)
        },
    ];
    let error = store.replace(&s, RuleChange::ParamFlow(rules)).unwrap_err();
    assert_eq!(
        error.lines(),
        [
            "param_flow[0] (a): param_flow_item_list[0].value must be a string, a number or a boolean, got a list",
            "param_flow[1] (b): duration_in_sec must be > 0",
            "param_flow[1] (b): param_flow_item_list item 0 (\"vip\"): count must be a finite \
             number >= 0, got -1",
        ]
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), "flow: []\n");
}

#[cfg(unix)]
#[test]
fn the_same_rules_again_leave_the_file_alone() {
    use std::os::unix::fs::MetadataExt;
    let (_dir, path) = temp_file("flow:\n  - resource: a\n    count: 1\n");
    let s = sentinel();
    let store = RuleFileStore::open(&path).unwrap();
    let inode = fs::metadata(&path).unwrap().ino();
    store
        .replace(&s, RuleChange::Flow(vec![FlowRule::new("a", 1.0)]))
        .unwrap();
    assert_eq!(fs::metadata(&path).unwrap().ino(), inode);
    assert_eq!(s.rule_book().flow, vec![FlowRule::new("a", 1.0)]);
    store
        .replace(&s, RuleChange::Flow(vec![FlowRule::new("a", 2.0)]))
        .unwrap();
    assert_ne!(fs::metadata(&path).unwrap().ino(), inode);
}
