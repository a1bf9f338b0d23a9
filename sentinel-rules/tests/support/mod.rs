//! What the rule file store's tests share: an instance on a `ManualClock`,
//! a rule file in a temp dir, and the rules a file holds.

use std::fs;
use std::path::{Path, PathBuf};

use sentinel_flow_core::{ManualClock, RuleBook, Sentinel};
use sentinel_flow_rules::LoadOptions;

/// An instance of its own, on a `ManualClock`.
pub(crate) fn sentinel() -> Sentinel {
    Sentinel::builder()
        .clock(ManualClock::new(1_700_000_000_000))
        .build()
}

/// `rules.yaml` holding `text` in a new temp dir (kept while the dir lives).
pub(crate) fn temp_file(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.yaml");
    fs::write(&path, text).unwrap();
    (dir, path)
}

/// The rules the file at `path` holds now.
pub(crate) fn book(path: &Path) -> RuleBook {
    sentinel_flow_rules::load_file(path, &LoadOptions::default())
        .unwrap()
        .book
}
