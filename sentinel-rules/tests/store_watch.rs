//! `RuleFileStore` with a watcher and with threads: the watcher never takes
//! a store's write for an outside edit and still loads outside edits;
//! racing replaces are serialised; a directory that cannot be written
//! changes nothing.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::{ManualClock, Sentinel};
use sentinel_flow_rules::{LoadOptions, RuleChange, RuleFileStore, RuleWatcher, StoreError};

const INTERVAL: Duration = Duration::from_millis(20);

fn sentinel() -> Arc<Sentinel> {
    Arc::new(
        Sentinel::builder()
            .clock(ManualClock::new(1_700_000_000_000))
            .build(),
    )
}

fn temp_file(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.yaml");
    fs::write(&path, text).unwrap();
    (dir, path)
}

/// Waits until `ok` holds, failing after 10 s.
fn eventually(what: &str, ok: impl Fn() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn flow_counts(s: &Sentinel) -> Vec<f64> {
    s.rule_book().flow.iter().map(|r| r.count).collect()
}

fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_extension("outside");
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, path).unwrap();
}

#[test]
fn the_watcher_does_not_reload_a_stores_write_and_loads_an_outside_edit_after_it() {
    let (_dir, path) = temp_file("flow:\n  - {resource: a, count: 1}\n");
    let s = sentinel();
    let loads = Arc::new(AtomicUsize::new(0));
    let heard = loads.clone();
    let handle = RuleWatcher::new(&path)
        .interval(INTERVAL)
        .on_success(move |_| {
            heard.fetch_add(1, Ordering::SeqCst);
        })
        .start(s.clone())
        .unwrap();
    assert_eq!(loads.load(Ordering::SeqCst), 1);
    let store = handle.store();
    store
        .replace(&s, RuleChange::Flow(vec![FlowRule::new("a", 2.0)]))
        .unwrap();
    assert_eq!(flow_counts(&s), [2.0]);
    // Many polls see the new inode and the fresh modification time, read
    // the content, find it known, and do nothing.
    std::thread::sleep(INTERVAL * 10);
    assert_eq!(
        loads.load(Ordering::SeqCst),
        1,
        "the store's write was reloaded"
    );
    assert_eq!(flow_counts(&s), [2.0]);

    write_atomic(&path, "flow:\n  - {resource: a, count: 3}\n");
    // The watcher tells of a load after it is in force: wait for the
    // telling, not for the rules.
    eventually("the outside edit loaded", || {
        loads.load(Ordering::SeqCst) == 2
    });
    assert_eq!(flow_counts(&s), [3.0]);
    // The watcher's load is the store's new baseline: no conflict.
    store
        .replace(&s, RuleChange::Flow(vec![FlowRule::new("a", 4.0)]))
        .unwrap();
    assert_eq!(flow_counts(&s), [4.0]);
    drop(handle);
    // The store outlives the watcher.
    store.replace(&s, RuleChange::Flow(vec![])).unwrap();
}

#[test]
fn an_edit_the_watcher_has_not_seen_yet_is_a_conflict() {
    let (_dir, path) = temp_file("flow:\n  - {resource: a, count: 1}\n");
    let s = sentinel();
    // A watcher that will not poll during the test.
    let handle = RuleWatcher::new(&path)
        .interval(Duration::from_secs(3600))
        .start(s.clone())
        .unwrap();
    write_atomic(&path, "flow:\n  - {resource: a, count: 5}\n");
    let error = handle
        .store()
        .replace(&s, RuleChange::Flow(vec![]))
        .unwrap_err();
    assert!(matches!(error, StoreError::Conflict { .. }), "{error:?}");
    assert_eq!(flow_counts(&s), [1.0]);
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "flow:\n  - {resource: a, count: 5}\n"
    );
}

#[test]
fn clones_racing_apply_in_turn_and_separate_stores_conflict() {
    for _ in 0..20 {
        let (_dir, path) = temp_file("flow: []\ndegrade: []\n");
        let s = sentinel();
        // Clones share one view: both changes land, one after the other.
        let store = RuleFileStore::open(&path).unwrap();
        let barrier = Arc::new(Barrier::new(2));
        let flow = RuleChange::Flow(vec![FlowRule::new("a", 1.0)]);
        let degrade = DegradeRule::new("b", DegradeGrade::ErrorCount, 2.0);
        let changes = [flow, RuleChange::Degrade(vec![degrade])];
        let results: Vec<_> = std::thread::scope(|scope| {
            let threads: Vec<_> = changes
                .into_iter()
                .map(|change| {
                    let (store, barrier, s) = (store.clone(), barrier.clone(), s.clone());
                    scope.spawn(move || {
                        barrier.wait();
                        store.replace(&s, change)
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        let on_disk = sentinel_flow_rules::load_file(&path, &LoadOptions::default()).unwrap();
        assert_eq!(
            (on_disk.book.flow.len(), on_disk.book.degrade.len()),
            (1, 1)
        );
        assert_eq!(s.rule_book(), on_disk.book);

        // Stores opened on their own: exactly one writes, the other is told.
        let stores = [
            RuleFileStore::open(&path).unwrap(),
            RuleFileStore::open(&path).unwrap(),
        ];
        let results: Vec<_> = std::thread::scope(|scope| {
            let threads: Vec<_> = stores
                .iter()
                .enumerate()
                .map(|(i, store)| {
                    let (barrier, s) = (barrier.clone(), s.clone());
                    scope.spawn(move || {
                        barrier.wait();
                        let change = vec![FlowRule::new("a", 10.0 + i as f64)];
                        store.replace(&s, RuleChange::Flow(change))
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let won: Vec<usize> = (0..2).filter(|&i| results[i].is_ok()).collect();
        assert_eq!(won.len(), 1, "{results:?}");
        let lost = &results[1 - won[0]];
        assert!(matches!(lost, Err(StoreError::Conflict { .. })), "{lost:?}");
        assert_eq!(flow_counts(&s), [10.0 + won[0] as f64]);
        let on_disk = sentinel_flow_rules::load_file(&path, &LoadOptions::default()).unwrap();
        assert_eq!(s.rule_book(), on_disk.book);
    }
}

#[test]
fn replaces_outside_edits_and_the_watcher_together_end_in_agreement() {
    let (_dir, path) = temp_file("flow:\n  - {resource: a, count: 0}\n");
    let s = sentinel();
    let handle = RuleWatcher::new(&path)
        .interval(Duration::from_millis(10))
        .start(s.clone())
        .unwrap();
    let (written, conflicts) = (AtomicUsize::new(0), AtomicUsize::new(0));
    std::thread::scope(|scope| {
        for thread in 0..2 {
            let (store, s, written, conflicts) = (handle.store(), &s, &written, &conflicts);
            scope.spawn(move || {
                // Each change is retried on conflict until it is written:
                // once the watcher has loaded the outside edit it goes in.
                let start = Instant::now();
                for i in 0..20 {
                    let count = f64::from(1_000 * thread + i);
                    loop {
                        let change = RuleChange::Flow(vec![FlowRule::new("a", count)]);
                        match store.replace(s, change) {
                            Ok(()) => break,
                            Err(StoreError::Conflict { .. }) => {
                                conflicts.fetch_add(1, Ordering::Relaxed);
                                assert!(start.elapsed() < Duration::from_secs(10), "starved");
                                std::thread::sleep(Duration::from_millis(1));
                            }
                            Err(other) => panic!("{other}"),
                        }
                    }
                    written.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        scope.spawn(|| {
            for i in 0..50 {
                write_atomic(
                    &path,
                    &format!("flow:\n  - {{resource: a, count: {}}}\n", 5_000 + i),
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        });
    });
    assert_eq!(written.load(Ordering::Relaxed), 40);
    // Whatever the order, the watcher and the stores settle on the file.
    eventually("the rules in force are the file's", || {
        let on_disk = sentinel_flow_rules::load_file(&path, &LoadOptions::default());
        on_disk.is_ok_and(|file| file.book == s.rule_book())
    });
    let counts = (
        written.load(Ordering::Relaxed),
        conflicts.load(Ordering::Relaxed),
    );
    eprintln!("written, conflicts: {counts:?}");
}

/// Makes `dir` refuse new files for the guard's life: mode 0555, and for a
/// process that ignores modes (root) the immutable attribute as well.
struct ReadOnly<'d>(&'d Path);

impl<'d> ReadOnly<'d> {
    fn new(dir: &'d Path) -> Self {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o555)).unwrap();
        let guard = ReadOnly(dir);
        if fs::write(dir.join("probe"), "").is_ok() {
            fs::remove_file(dir.join("probe")).unwrap();
            let status = std::process::Command::new("chattr")
                .arg("+i")
                .arg(dir)
                .status();
            assert!(
                status.is_ok_and(|s| s.success()),
                "cannot make {dir:?} read-only (chattr +i)"
            );
            assert!(
                fs::write(dir.join("probe"), "").is_err(),
                "{dir:?} is still writable"
            );
        }
        guard
    }
}

impl Drop for ReadOnly<'_> {
    fn drop(&mut self) {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(self.0)
            .status();
        let _ = fs::set_permissions(self.0, fs::Permissions::from_mode(0o755));
    }
}

#[cfg(unix)]
#[test]
fn a_directory_that_cannot_be_written_changes_nothing() {
    let text = "flow:\n  - {resource: a, count: 1}\n";
    let (dir, path) = temp_file(text);
    let s = sentinel();
    let store = RuleFileStore::open(&path).unwrap();
    store.reload(&s).unwrap();
    let error = {
        let _read_only = ReadOnly::new(dir.path());
        store
            .replace(&s, RuleChange::Flow(vec![FlowRule::new("a", 2.0)]))
            .unwrap_err()
    };
    assert!(matches!(&error, StoreError::Io(_)), "{error:?}");
    assert!(
        error
            .to_string()
            .starts_with("rule file not written: cannot create"),
        "{error}"
    );
    assert_eq!(fs::read_to_string(&path).unwrap(), text);
    assert_eq!(flow_counts(&s), [1.0]);
    let names: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["rules.yaml"]);
    // Writable again, the same change goes through: nothing was half done.
    store
        .replace(&s, RuleChange::Flow(vec![FlowRule::new("a", 2.0)]))
        .unwrap();
    assert_eq!(flow_counts(&s), [2.0]);
}
