//! The `track_percentiles` key: parsed with an error per problem at its
//! position, applied on load, and on reload turning off only what the file
//! had turned on.

use sentinel_flow_core::{ManualClock, Sentinel};
use sentinel_flow_rules::{apply, parse_str};

fn sentinel() -> Sentinel {
    Sentinel::builder()
        .clock(ManualClock::new(1_700_000_000_000))
        .build()
}

fn tracked(sentinel: &Sentinel, name: &str) -> bool {
    sentinel
        .resource_node(name)
        .is_some_and(|node| node.tracks_percentiles())
}

#[test]
fn the_list_is_parsed_and_applied() {
    let file = parse_str(
        "flow:\n  - {resource: GET:/a, count: 5}\ntrack_percentiles:\n  - GET:/a\n  - \"GET:/b\"\n",
        "rules.yaml",
    )
    .unwrap();
    assert_eq!(file.track_percentiles, ["GET:/a", "GET:/b"]);
    let sentinel = sentinel();
    let loaded = apply(&sentinel, file).unwrap();
    assert_eq!(loaded.tracked_percentiles, 2);
    assert!(loaded.untracked_percentiles.is_empty());
    assert!(tracked(&sentinel, "GET:/a") && tracked(&sentinel, "GET:/b"));

    // Empty forms mean none.
    for text in ["track_percentiles:\n", "track_percentiles: []\n"] {
        assert!(
            parse_str(text, "r.yaml")
                .unwrap()
                .track_percentiles
                .is_empty()
        );
    }
}

#[test]
fn every_bad_item_is_reported_at_its_position() {
    let text = "\
track_percentiles:
  - GET:/a
  - {resource: GET:/b}
  - \"\"
  - ~
  - GET:/a
  - [x]
";
    let error = parse_str(text, "rules.yaml").unwrap_err();
    assert_eq!(
        error.lines(),
        [
            "rules.yaml:3:5: track_percentiles[1] must be a resource name (a non-empty string), \
             got a mapping",
            "rules.yaml:4:5: track_percentiles[2] must be a resource name (a non-empty string), \
             got an empty string",
            "rules.yaml:5:5: track_percentiles[3] must be a resource name (a non-empty string), \
             got ~",
            "rules.yaml:6:5: track_percentiles[4] lists \"GET:/a\" twice (first at 2:5)",
            "rules.yaml:7:5: track_percentiles[5] must be a resource name (a non-empty string), \
             got a list",
        ]
    );
    for (text, line) in [
        (
            "track_percentiles: GET:/a\n",
            "rules.yaml:1:20: track_percentiles must be a list of resource names, got \"GET:/a\"",
        ),
        (
            "track_percentiles: {a: 1}\n",
            "rules.yaml:1:20: track_percentiles must be a list of resource names, got a mapping",
        ),
        (
            "track_percentiles: []\ntrack_percentiles: []\n",
            "rules.yaml:2:1: duplicate key track_percentiles (first at 1:1)",
        ),
    ] {
        assert_eq!(parse_str(text, "rules.yaml").unwrap_err().lines(), [line]);
    }
}

#[test]
fn a_reload_turns_off_what_the_file_no_longer_lists_but_not_what_code_turned_on() {
    let sentinel = sentinel();
    sentinel.track_percentiles("by_code", true);
    let load = |text: &str| apply(&sentinel, parse_str(text, "rules.yaml").unwrap()).unwrap();

    load("track_percentiles: [a, b, by_code]\n");
    assert!(tracked(&sentinel, "a") && tracked(&sentinel, "b"));

    load("version: 2\ntrack_percentiles: [b]\n");
    assert!(!tracked(&sentinel, "a"), "dropped from the file");
    assert!(tracked(&sentinel, "b"));
    assert!(tracked(&sentinel, "by_code"), "code turned it on");

    // A file without the key turns off everything the file had turned on.
    load("flow: []\n");
    assert!(!tracked(&sentinel, "b"));
    assert!(tracked(&sentinel, "by_code"));

    // A refused file changes nothing.
    load("track_percentiles: [c]\n");
    assert!(parse_str("track_percentiles: [d, {x: 1}]\n", "rules.yaml").is_err());
    assert!(tracked(&sentinel, "c") && !tracked(&sentinel, "d"));
}

#[test]
fn names_past_the_resource_cap_are_reported() {
    let sentinel = Sentinel::builder()
        .clock(ManualClock::new(0))
        .max_resources(1)
        .build();
    let file = parse_str("track_percentiles: [a, b]\n", "rules.yaml").unwrap();
    let loaded = apply(&sentinel, file).unwrap();
    assert_eq!(loaded.tracked_percentiles, 1);
    assert_eq!(loaded.untracked_percentiles, ["b"]);
}
