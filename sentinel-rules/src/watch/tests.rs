//! Polls driven one at a time, without the watcher's thread: each poll
//! reads exactly what the test wrote before it, so a writer caught halfway
//! is reproduced without racing one.

use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use sentinel_core::{ManualClock, Sentinel};

use super::poller::Poller;
use crate::error::FileError;
use crate::load::{Reloaded, parse_bytes};
use crate::options::LoadOptions;

/// A poller of a temporary rule file, and what its listeners heard.
struct Polled {
    poller: Poller,
    sentinel: Sentinel,
    path: PathBuf,
    loads: Arc<Mutex<Vec<Reloaded>>>,
    failures: Arc<Mutex<Vec<FileError>>>,
    _dir: tempfile::TempDir,
}

impl Polled {
    /// A poller of a file holding `text`, after its first load.
    fn new(text: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rules.yaml");
        fs::write(&path, text).unwrap();
        let sentinel = Sentinel::builder()
            .clock(ManualClock::new(1_700_000_000_000))
            .build();
        let loads = Arc::new(Mutex::new(Vec::new()));
        let failures = Arc::new(Mutex::new(Vec::new()));
        let mut poller = Poller::new(path.clone(), LoadOptions::default());
        let heard = loads.clone();
        poller.on_success.push(Arc::new(move |r: &Reloaded| {
            heard.lock().unwrap().push(r.clone())
        }));
        let heard = failures.clone();
        poller.on_failure.push(Arc::new(move |e: &FileError| {
            heard.lock().unwrap().push(e.clone())
        }));
        poller.first(&sentinel).unwrap();
        Polled {
            poller,
            sentinel,
            path,
            loads,
            failures,
            _dir: dir,
        }
    }

    fn write(&self, text: &str) {
        fs::write(&self.path, text).unwrap();
    }

    fn poll(&mut self) {
        self.poller.poll(&self.sentinel);
    }

    fn flow_counts(&self) -> Vec<f64> {
        let book = self.sentinel.rule_book();
        book.flow.iter().map(|r| r.count).collect()
    }

    fn loads(&self) -> usize {
        self.loads.lock().unwrap().len()
    }

    fn failures(&self) -> Vec<Vec<String>> {
        let failures = self.failures.lock().unwrap();
        failures.iter().map(FileError::lines).collect()
    }
}

fn flow_file(counts: &[u32]) -> String {
    let mut text = String::from("flow:\n");
    for (i, count) in counts.iter().enumerate() {
        text.push_str(&format!("  - {{resource: r{i}, count: {count}}}\n"));
    }
    text
}

/// The flake of `an_edit_in_place_is_picked_up`: `fs::write` truncates,
/// then writes, and a poll in between read an empty (or partial) file and
/// told it as a failure before the next poll loaded the finished one.
#[test]
fn a_write_in_place_read_halfway_is_not_told_as_a_failure() {
    let mut polled = Polled::new(&flow_file(&[10]));
    let full = flow_file(&[20, 30]);
    let half = &full[..full.len() / 2];
    let options = LoadOptions::default();
    assert!(parse_bytes(half.as_bytes(), "half", &options).is_err());
    // What polls can read of one `fs::write`: nothing yet, then a part.
    for partial in ["", half] {
        polled.write(partial);
        polled.poll();
        assert_eq!(polled.failures(), Vec::<Vec<String>>::new(), "{partial:?}");
        assert_eq!(polled.flow_counts(), [10.0], "the rules in force stay");
    }
    polled.write(&full);
    polled.poll();
    assert_eq!(polled.flow_counts(), [20.0, 30.0]);
    assert_eq!(polled.loads(), 2);
    assert!(polled.failures().is_empty());
}

#[test]
fn a_bad_file_is_told_once_when_the_next_poll_reads_it_unchanged() {
    let mut polled = Polled::new(&flow_file(&[10]));
    let p = polled.path.display().to_string();
    let told = |line: u32| {
        vec![format!(
            "{p}:{line}:26: flow[0] (r): count must be a finite number >= 0, got -5"
        )]
    };
    polled.write("flow:\n  - {resource: r, count: -5}\n");
    polled.poll();
    assert!(polled.failures().is_empty(), "told at the first read");
    polled.poll();
    assert_eq!(polled.failures(), [told(2)]);
    for _ in 0..3 {
        polled.poll();
    }
    assert_eq!(polled.failures().len(), 1, "told once");
    assert_eq!(polled.flow_counts(), [10.0], "the rules in force stay");
    // Other bad bytes are new content: told again, once they hold still.
    polled.write("# other\nflow:\n  - {resource: r, count: -5}\n");
    polled.poll();
    assert_eq!(polled.failures().len(), 1);
    polled.poll();
    assert_eq!(polled.failures(), [told(2), told(3)]);
    // A good file is loaded at the first poll that reads it.
    polled.write(&flow_file(&[12]));
    polled.poll();
    assert_eq!(polled.flow_counts(), [12.0]);
    assert_eq!(polled.loads(), 2);
    assert_eq!(polled.failures().len(), 2);
}

#[test]
fn a_bad_file_modified_long_ago_is_still_read_again_and_told() {
    let mut polled = Polled::new(&flow_file(&[10]));
    polled.write("flow:\n  - {resource: r, count: -5}\n");
    // Out of the racy window: the second poll sees the same metadata and
    // would not read the file again for that alone.
    let long_ago = SystemTime::UNIX_EPOCH + Duration::from_secs(1_600_000_000);
    let file = fs::File::options().write(true).open(&polled.path).unwrap();
    file.set_modified(long_ago).unwrap();
    drop(file);
    polled.poll();
    assert!(polled.failures().is_empty());
    polled.poll();
    assert_eq!(polled.failures().len(), 1);
    polled.poll();
    assert_eq!(polled.failures().len(), 1, "told once");
    assert_eq!(polled.flow_counts(), [10.0]);
}
