//! Names longer than the limit are refused at their line and
//! column, wherever a rule file names something; a file's rules reserve
//! their nodes past every cap.

use std::sync::Arc;

use sentinel_flow_core::{BlockKind, ManualClock, Sentinel};
use sentinel_flow_rules::{LoadOptions, RuleWatcher, apply, parse_str, parse_str_with};

const T0: u64 = 1_700_000_000_000;

/// The error lines of `text` under `options`, which must be refused.
fn errors(text: &str, options: &LoadOptions) -> Vec<String> {
    parse_str_with(text, "rules.yaml", options)
        .expect_err("the file should be refused")
        .lines()
}

#[test]
fn every_name_over_the_limit_is_refused_at_its_position() {
    let long = "n".repeat(1_025);
    let shown = format!("{}... 1025 bytes", "n".repeat(128));
    let text = format!(
        "flow:\n\
         \x20 - {{resource: {long}, count: 1}}\n\
         \x20 - {{resource: ok, count: 1, strategy: relate, ref_resource: {long}}}\n\
         \x20 - {{resource: ok, count: 1, strategy: chain, ref_resource: {long}}}\n\
         \x20 - {{resource: ok, count: 1, limit_app: {long}}}\n\
         degrade:\n\
         \x20 - {{resource: {long}, grade: error_count, count: 1}}\n\
         authority:\n\
         \x20 - resource: ok\n\
         \x20   strategy: white\n\
         \x20   limit_app: [a, {long}]\n\
         param_flow:\n\
         \x20 - {{resource: {long}, param_idx: 0, count: 1}}\n\
         track_percentiles: [ok, {long}]\n"
    );
    let message = "is 1025 bytes long, over the limit of 1024 (max_name_len)";
    assert_eq!(
        errors(&text, &LoadOptions::default()),
        [
            format!("rules.yaml:2:16: flow[0] ({shown}): resource {message}"),
            format!("rules.yaml:3:62: flow[1] (ok): ref_resource {message}"),
            format!("rules.yaml:4:61: flow[2] (ok): ref_resource {message}"),
            format!("rules.yaml:5:41: flow[3] (ok): limit_app {message}"),
            format!("rules.yaml:7:16: degrade[0] ({shown}): resource {message}"),
            format!("rules.yaml:11:16: authority[0] (ok): limit_app {message}"),
            format!("rules.yaml:13:16: param_flow[0] ({shown}): resource {message}"),
            format!("rules.yaml:14:25: track_percentiles[1] {message}"),
        ]
    );

    // At the limit, or under a larger one, the same names load.
    let fits = text.replace(&long, &"n".repeat(1_024));
    assert!(parse_str(&fits, "rules.yaml").is_ok());
    let roomy = LoadOptions::default().max_name_len(1_025);
    assert!(parse_str_with(&text, "rules.yaml", &roomy).is_ok());
    assert_eq!(
        errors(&fits, &LoadOptions::default().max_name_len(10)).len(),
        8
    );
}

#[test]
fn a_megabyte_name_is_refused_with_a_short_line() {
    let huge = "x".repeat(1 << 20);
    let text = format!("flow:\n  - {{resource: {huge}, count: 1}}\n");
    let lines = errors(&text, &LoadOptions::default().max_size(2 << 20));
    assert_eq!(lines.len(), 1);
    assert!(lines[0].len() < 300, "{}", lines[0]);
    assert!(lines[0].ends_with("is 1048576 bytes long, over the limit of 1024 (max_name_len)"));
}

#[test]
fn a_file_applied_past_full_caps_puts_every_rule_in_force() {
    let clock = ManualClock::new(T0);
    let sentinel = Sentinel::builder()
        .clock(clock)
        .max_resources(20)
        .max_contexts(2)
        .build();
    std::thread::scope(|s| {
        for t in 0..4 {
            let sentinel = &sentinel;
            s.spawn(move || {
                for i in 0..100 {
                    drop(sentinel.entry(&format!("noise/{t}/{i}")));
                    let context = format!("ctx/{t}/{i}");
                    drop(
                        sentinel
                            .entry_builder("noise/0/0")
                            .context(&context)
                            .enter(),
                    );
                }
            });
        }
    });
    assert!(sentinel.refused_resources() >= 380);
    let text = "flow:\n\
                \x20 - {resource: GET:/new, count: 0}\n\
                \x20 - {resource: GET:/chained, count: 0, strategy: chain, ref_resource: web}\n\
                authority:\n\
                \x20 - {resource: GET:/admin, strategy: white, limit_app: [ops]}\n";
    apply(&sentinel, parse_str(text, "rules.yaml").unwrap()).unwrap();
    let kind = |r: Result<sentinel_flow_core::Entry<'_>, sentinel_flow_core::BlockError>| {
        r.map(drop).unwrap_err().kind()
    };
    assert_eq!(kind(sentinel.entry("GET:/new")), BlockKind::Flow);
    let chained = sentinel.entry_builder("GET:/chained").context("web");
    assert_eq!(kind(chained.enter()), BlockKind::Flow);
    let admin = sentinel.entry_builder("GET:/admin").origin("shop");
    assert_eq!(kind(admin.enter()), BlockKind::Authority);
    assert_eq!(sentinel.caps().resources.reserved, 3);
}

#[test]
fn a_watcher_checks_names_against_its_instance_limit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.yaml");
    let name = "n".repeat(40);
    std::fs::write(
        &path,
        format!("flow:\n  - {{resource: {name}, count: 0}}\n"),
    )
    .unwrap();
    let strict = Sentinel::builder()
        .clock(ManualClock::new(T0))
        .max_name_len(32)
        .build();
    let error = RuleWatcher::new(&path).start(Arc::new(strict)).unwrap_err();
    assert_eq!(
        error.lines(),
        [format!(
            "{}:2:16: flow[0] ({name}): resource is 40 bytes long, over the limit of 32 (max_name_len)",
            path.display()
        )]
    );
    // Under an instance with a larger limit, the same file loads.
    let sentinel: &'static Sentinel = Box::leak(Box::new(
        Sentinel::builder()
            .clock(ManualClock::new(T0))
            .max_name_len(64)
            .build(),
    ));
    let _watch = RuleWatcher::new(&path).start(sentinel).unwrap();
    assert!(
        sentinel.entry(&name).is_err(),
        "loaded under the instance's 64"
    );
}

#[test]
fn a_store_checks_names_against_its_instance_limit_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.yaml");
    let before = "# kept\nflow:\n  - {resource: a, count: 1}\n";
    std::fs::write(&path, before).unwrap();
    let strict = Sentinel::builder()
        .clock(ManualClock::new(T0))
        .max_name_len(32)
        .build();
    let store = sentinel_flow_rules::RuleFileStore::open(&path).unwrap();
    let name = "n".repeat(40);
    let change =
        sentinel_flow_rules::RuleChange::Flow(vec![sentinel_flow_core::flow::FlowRule::new(
            name.as_str(),
            0.0,
        )]);
    let error = store.replace(&strict, change).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("over the limit of 32 (max_name_len)"),
        "{error}"
    );
    // Nothing written, nothing in force.
    assert_eq!(std::fs::read_to_string(&path).unwrap(), before);
    assert!(strict.rule_book().flow.is_empty());
}
