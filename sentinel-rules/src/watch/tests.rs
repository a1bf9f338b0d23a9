//! Polls driven one at a time, without the watcher's thread: each poll
//! reads exactly what the test wrote before it, so a writer caught halfway
//! is reproduced without racing one.

use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use sentinel_flow_core::{ManualClock, Sentinel};

use super::RuleWatcher;
use crate::error::FileError;
use crate::load::{Reloaded, parse_bytes};
use crate::options::LoadOptions;
use crate::source::{FileSource, Stepped};

/// A watcher of a temporary rule file, stepped one poll at a time, and
/// what its listeners heard.
struct Polled {
    poller: Stepped<FileSource>,
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
        let (on_load, on_failure) = (loads.clone(), failures.clone());
        let poller = RuleWatcher::new(&path)
            .on_success(move |r: &Reloaded| on_load.lock().unwrap().push(r.clone()))
            .on_failure(move |e: &FileError| on_failure.lock().unwrap().push(e.clone()))
            .stepped(&sentinel)
            .unwrap();
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
        self.poller.step(&self.sentinel);
    }

    /// One poll, and the pause the watcher takes after it.
    fn poll_and_pause(&mut self) -> Duration {
        self.poller.step(&self.sentinel)
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
    assert_eq!(polled.flow_counts(), [10.0], "read once: maybe not done");
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
    // A good file written in place is loaded once it holds still too.
    polled.write(&flow_file(&[12]));
    polled.poll();
    assert_eq!(polled.flow_counts(), [10.0]);
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

impl Polled {
    /// Writes `text` to a new file renamed over the watched one.
    fn rename_in(&self, text: &str) {
        let temp = self.path.with_extension("tmp");
        fs::write(&temp, text).unwrap();
        fs::rename(&temp, &self.path).unwrap();
    }
}

/// A small deterministic generator, so a failing interleaving replays.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// A good partial file (a count cut short, a list cut after a rule) read
/// by one poll was put in force at once: only files that failed to parse
/// waited for a second identical read.
#[test]
fn a_partial_rewrite_that_parses_is_not_put_in_force() {
    let mut polled = Polled::new(&flow_file(&[10]));
    let full = "flow:\n  - resource: r0\n    count: 20\n  - resource: r1\n    count: 3000\n";
    let cut = full.find("3000").unwrap() + 1;
    let partial = &full[..cut];
    let options = LoadOptions::default();
    assert!(parse_bytes(partial.as_bytes(), "cut", &options).is_ok());
    polled.write(partial);
    polled.poll();
    assert_eq!(
        polled.flow_counts(),
        [10.0],
        "a count cut to 3 is not taken"
    );
    polled.write(full);
    polled.poll();
    assert_eq!(polled.flow_counts(), [10.0]);
    polled.poll();
    assert_eq!(polled.flow_counts(), [20.0, 3000.0]);
    assert_eq!(polled.loads(), 2);
}

#[test]
fn a_file_renamed_into_place_is_taken_at_once() {
    let mut polled = Polled::new(&flow_file(&[10]));
    polled.rename_in(&flow_file(&[11]));
    polled.poll();
    assert_eq!(polled.flow_counts(), [11.0]);
    // A bad one is told at once too: it was written whole.
    polled.rename_in("flow:\n  - {resource: r, count: -5}\n");
    polled.poll();
    assert_eq!(polled.failures().len(), 1);
    assert_eq!(polled.flow_counts(), [11.0]);
}

/// 1 000 rewrites in place, each truncating the file and writing it in
/// pieces cut anywhere (inside a number, a name, a line), with polls at
/// random points between the pieces (at most one per gap: a writer writes
/// faster than the watch interval) and up to two after the last piece:
/// every rule set that reached the instance is one written whole. Each
/// write is stamped with a later modification time, as writes an
/// interval apart are: a prefix of one rewrite read again in the next
/// (the bytes alike, the file rewritten between) is then told apart.
#[test]
fn a_thousand_partial_rewrites_never_put_a_partial_set_in_force() {
    use std::io::Write;

    const RULES: u32 = 40;
    let file_of = |k: u32| flow_file(&vec![1_000 + k; RULES as usize]);
    let mut polled = Polled::new(&file_of(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let heard = seen.clone();
    polled.sentinel.flow_rules().on_change(move |rules| {
        let counts: Vec<f64> = rules.iter().map(|r| r.count).collect();
        heard.lock().unwrap().push(counts);
    });
    let mut random = XorShift(0x9e37_79b9_7f4a_7c15);
    // In the future: always within the racy window, as fresh writes are.
    let mut stamp = SystemTime::now() + Duration::from_secs(86_400);
    let mut stamped = |file: &fs::File| {
        stamp += Duration::from_millis(1);
        file.set_modified(stamp).unwrap();
    };
    for k in 1..=1_000 {
        let text = file_of(k);
        let mut file = fs::File::create(&polled.path).unwrap();
        stamped(&file);
        let mut at = 0;
        while at < text.len() {
            if random.below(3) == 0 {
                polled.poll();
            }
            let piece = 1 + random.below(text.len() as u64 / 4) as usize;
            let end = (at + piece).min(text.len());
            file.write_all(&text.as_bytes()[at..end]).unwrap();
            stamped(&file);
            at = end;
        }
        drop(file);
        for _ in 0..random.below(3) {
            polled.poll();
        }
    }
    let seen = seen.lock().unwrap();
    for counts in seen.iter() {
        let whole = counts.len() == RULES as usize
            && counts.iter().all(|&c| c == counts[0])
            && (1_001.0..=2_000.0).contains(&counts[0]);
        assert!(whole, "a partial set was put in force: {counts:?}");
    }
    // The polls did take whole files: the check is not vacuous.
    assert!(seen.len() > 100, "only {} loads", seen.len());
    assert!(polled.failures().is_empty(), "{:?}", polled.failures());
}

#[test]
fn a_deleted_file_is_told_once_per_deletion_and_taken_back() {
    let mut polled = Polled::new(&flow_file(&[10]));
    let p = polled.path.display().to_string();
    let gone = vec![format!(
        "{p}: the file is gone; the rules in force are kept until it is back"
    )];
    fs::remove_file(&polled.path).unwrap();
    for _ in 0..3 {
        polled.poll();
    }
    assert_eq!(polled.failures(), std::slice::from_ref(&gone));
    assert_eq!(polled.flow_counts(), [10.0]);
    // Created again (in place: taken once it holds still).
    polled.write(&flow_file(&[11]));
    polled.poll();
    polled.poll();
    assert_eq!(polled.flow_counts(), [11.0]);
    fs::remove_file(&polled.path).unwrap();
    polled.poll();
    assert_eq!(polled.failures(), [gone.clone(), gone]);
    // Back with the content in force: nothing to load, and a third
    // deletion is told again.
    polled.rename_in(&flow_file(&[11]));
    polled.poll();
    fs::remove_file(&polled.path).unwrap();
    polled.poll();
    assert_eq!(polled.failures().len(), 3);
    assert_eq!(polled.loads(), 2);
}

#[cfg(unix)]
#[test]
fn a_named_pipe_in_place_of_the_file_is_told_and_not_opened() {
    let mut polled = Polled::new(&flow_file(&[10]));
    fs::remove_file(&polled.path).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&polled.path)
        .status()
        .unwrap();
    assert!(made.success());
    // Opening the pipe for reading would block here: no writer ever comes.
    polled.poll();
    polled.poll();
    let p = polled.path.display().to_string();
    assert_eq!(
        polled.failures(),
        [vec![format!(
            "{p}: cannot read: a named pipe, not a regular file"
        )]]
    );
    assert_eq!(polled.flow_counts(), [10.0]);
}

/// A panic while rules were applied (here in a rule listener) unwound
/// through the watcher's thread and ended it: nothing was told, and no
/// later file was loaded.
#[test]
fn a_panic_while_loading_is_told_and_the_next_file_is_loaded() {
    let mut polled = Polled::new(&flow_file(&[10]));
    let armed = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let fire = armed.clone();
    polled.sentinel.flow_rules().on_change(move |_| {
        if fire.swap(false, std::sync::atomic::Ordering::SeqCst) {
            panic!("a listener failed");
        }
    });
    polled.rename_in(&flow_file(&[11]));
    polled.poll();
    let p = polled.path.display().to_string();
    assert_eq!(
        polled.failures(),
        [vec![format!(
            "{p}: loading the rules panicked: a listener failed"
        )]]
    );
    polled.rename_in(&flow_file(&[12]));
    polled.poll();
    assert_eq!(polled.flow_counts(), [12.0]);
    assert_eq!(polled.loads(), 2);
}

/// A file that is gone is checked again after a wait that doubles from
/// the interval up to the sources' cap (not every interval for as long as
/// it stays gone), told once, and its state says so.
#[test]
fn a_gone_file_is_checked_again_after_a_doubling_wait_up_to_the_cap() {
    let mut polled = Polled::new(&flow_file(&[10]));
    let interval = super::DEFAULT_INTERVAL;
    assert_eq!(polled.poll_and_pause(), interval);
    fs::remove_file(&polled.path).unwrap();
    let pauses: Vec<Duration> = (0..6).map(|_| polled.poll_and_pause()).collect();
    let secs = |s: &[u64]| {
        s.iter()
            .map(|&s| Duration::from_secs(s))
            .collect::<Vec<_>>()
    };
    assert_eq!(pauses, secs(&[1, 2, 4, 5, 5, 5]));
    let state = polled.poller.state();
    assert!(!state.connected, "{state:?}");
    assert_eq!(state.disconnects, 1);
    assert_eq!(polled.failures().len(), 1, "told once");
    // Back: polled every interval again, and taken once it holds still.
    polled.rename_in(&flow_file(&[11]));
    assert_eq!(polled.poll_and_pause(), interval);
    assert!(polled.poller.state().connected);
    polled.poll();
    assert_eq!(polled.flow_counts(), [11.0]);
}
