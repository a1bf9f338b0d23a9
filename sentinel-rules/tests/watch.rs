//! The watcher on real files: every way a file changes, bad edits, deleted
//! files, and reloads racing with entries. Each test has its own Sentinel
//! and polls with a deadline; no sleep is longer than the watch interval.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sentinel_flow_core::{BlockKind, ManualClock, Sentinel};
use sentinel_flow_rules::{FileError, Reloaded, RuleWatcher};

const INTERVAL: Duration = Duration::from_millis(20);

fn sentinel() -> &'static Sentinel {
    Box::leak(Box::new(
        Sentinel::builder()
            .clock(ManualClock::new(1_700_000_000_000))
            .build(),
    ))
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

/// Checks that `ok` holds over a few watch intervals.
fn stays(what: &str, ok: impl Fn() -> bool) {
    for _ in 0..5 {
        std::thread::sleep(INTERVAL);
        assert!(ok(), "{what}");
    }
}

fn flow_counts(sentinel: &Sentinel) -> Vec<f64> {
    sentinel.rule_book().flow.iter().map(|r| r.count).collect()
}

fn flow_file(counts: &[u32]) -> String {
    let mut text = String::from("flow:\n");
    for (i, count) in counts.iter().enumerate() {
        text.push_str(&format!("  - {{resource: r{i}, count: {count}}}\n"));
    }
    text
}

/// Writes to a temporary file beside `path`, then renames it over `path`.
fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, path).unwrap();
}

struct Heard {
    loads: Arc<Mutex<Vec<Reloaded>>>,
    failures: Arc<Mutex<Vec<FileError>>>,
}

fn watcher(path: &Path) -> (RuleWatcher, Heard) {
    let loads = Arc::new(Mutex::new(Vec::new()));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let (l, f) = (loads.clone(), failures.clone());
    let watcher = RuleWatcher::new(path)
        .interval(INTERVAL)
        .on_success(move |r| l.lock().unwrap().push(r.clone()))
        .on_failure(move |e| f.lock().unwrap().push(e.clone()));
    (watcher, Heard { loads, failures })
}

fn temp_file(text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.yaml");
    fs::write(&path, text).unwrap();
    (dir, path)
}

#[test]
fn start_loads_the_file_and_tells_the_listeners() {
    let s = sentinel();
    let (_dir, path) = temp_file(&format!("version: v1\n{}", flow_file(&[5, 6])));
    let (watcher, heard) = watcher(&path);
    let _handle = watcher.start(s).unwrap();
    assert_eq!(flow_counts(s), [5.0, 6.0]);
    let loads = heard.loads.lock().unwrap();
    assert_eq!(loads.len(), 1);
    assert_eq!(loads[0].version.as_deref(), Some("v1"));
    assert_eq!(loads[0].count("flow"), 2);
    assert_eq!(loads[0].count("degrade"), 0);
}

#[test]
fn start_refuses_a_bad_file_and_loads_nothing() {
    let s = sentinel();
    let (_dir, path) = temp_file("flow:\n  - {resource: r, count: -1}\n");
    let error = RuleWatcher::new(&path)
        .start(Arc::new(Sentinel::builder().build()))
        .unwrap_err();
    assert_eq!(
        error.lines(),
        [format!(
            "{}:2:26: flow[0] (r): count must be a finite number >= 0, got -1",
            path.display()
        )]
    );
    let missing = RuleWatcher::new(path.with_extension("nope"))
        .start(s)
        .unwrap_err();
    assert!(missing.to_string().contains("cannot open"), "{missing}");
    assert!(flow_counts(s).is_empty());
}

#[test]
fn an_edit_in_place_is_picked_up() {
    let s = sentinel();
    let (_dir, path) = temp_file(&flow_file(&[10]));
    let (watcher, heard) = watcher(&path);
    let _handle = watcher.start(s).unwrap();
    // Same length, same inode: only the content (and times) differ.
    fs::write(&path, flow_file(&[20])).unwrap();
    eventually("the edit is loaded", || flow_counts(s) == [20.0]);
    fs::write(&path, flow_file(&[30, 40])).unwrap();
    eventually("the second edit is loaded", || {
        flow_counts(s) == [30.0, 40.0]
    });
    // The listeners are told after the rules are in force: wait for them.
    eventually("the listeners hear the second edit", || {
        heard.loads.lock().unwrap().len() >= 3
    });
    stays("no load beyond the start and the two edits", || {
        heard.loads.lock().unwrap().len() == 3
    });
    assert!(heard.failures.lock().unwrap().is_empty());
}

#[test]
fn a_temp_file_renamed_over_it_is_picked_up() {
    let s = sentinel();
    let (_dir, path) = temp_file(&flow_file(&[10]));
    let (watcher, _heard) = watcher(&path);
    let _handle = watcher.start(s).unwrap();
    write_atomic(&path, &flow_file(&[11]));
    eventually("the renamed file is loaded", || flow_counts(s) == [11.0]);
}

#[cfg(unix)]
#[test]
fn a_swapped_symlink_is_picked_up_kubernetes_style() {
    use std::os::unix::fs::symlink;
    // rules.yaml -> ..data/rules.yaml, ..data -> ..v1, as a ConfigMap volume.
    let dir = tempfile::tempdir().unwrap();
    let version = |name: &str, text: &str| {
        fs::create_dir(dir.path().join(name)).unwrap();
        fs::write(dir.path().join(name).join("rules.yaml"), text).unwrap();
    };
    version("..v1", &flow_file(&[1]));
    symlink("..v1", dir.path().join("..data")).unwrap();
    let path = dir.path().join("rules.yaml");
    symlink("..data/rules.yaml", &path).unwrap();

    let s = sentinel();
    let (watcher, _heard) = watcher(&path);
    let _handle = watcher.start(s).unwrap();
    assert_eq!(flow_counts(s), [1.0]);

    version("..v2", &flow_file(&[2]));
    symlink("..v2", dir.path().join("..data_tmp")).unwrap();
    fs::rename(dir.path().join("..data_tmp"), dir.path().join("..data")).unwrap();
    fs::remove_dir_all(dir.path().join("..v1")).unwrap();
    eventually("the new target is loaded", || flow_counts(s) == [2.0]);
}

#[test]
fn a_deleted_file_keeps_the_rules_until_it_comes_back() {
    let s = sentinel();
    let (_dir, path) = temp_file(&flow_file(&[7]));
    let (watcher, heard) = watcher(&path);
    let _handle = watcher.start(s).unwrap();
    fs::remove_file(&path).unwrap();
    stays("the rules stay while the file is gone", || {
        flow_counts(s) == [7.0]
    });
    let p = path.display();
    let gone = format!("{p}: the file is gone; the rules in force are kept until it is back");
    assert_eq!(failures(&heard), std::slice::from_ref(&gone), "told once");
    fs::write(&path, flow_file(&[8])).unwrap();
    eventually("the file is loaded again", || flow_counts(s) == [8.0]);
    fs::remove_file(&path).unwrap();
    eventually("a second deletion is told", || failures(&heard).len() == 2);
    assert_eq!(failures(&heard), [gone.clone(), gone]);
    write_atomic(&path, &flow_file(&[9]));
    eventually("and the file loaded again", || flow_counts(s) == [9.0]);
}

/// Every failure told, one line each.
fn failures(heard: &Heard) -> Vec<String> {
    let failures = heard.failures.lock().unwrap();
    failures.iter().map(ToString::to_string).collect()
}

#[test]
fn a_bad_edit_keeps_the_rules_and_reports_every_error() {
    let s = sentinel();
    let (_dir, path) = temp_file(&flow_file(&[10]));
    let (watcher, heard) = watcher(&path);
    let _handle = watcher.start(s).unwrap();
    let bad = "flow:\n  - {resource: a, count: 1}\n  - {resource: b, count: -5}\n\
               degrade:\n  - {resource: c, grade: error_ratio, count: 3}\n";
    write_atomic(&path, bad);
    eventually("the failure is told", || {
        !heard.failures.lock().unwrap().is_empty()
    });
    let p = path.display();
    assert_eq!(
        heard.failures.lock().unwrap()[0].lines(),
        [
            format!("{p}:3:26: flow[1] (b): count must be a finite number >= 0, got -5"),
            format!(
                "{p}:5:46: degrade[0] (c): count is an error ratio and must be in 0..=1, got 3"
            ),
        ]
    );
    stays("the old rules stay", || flow_counts(s) == [10.0]);
    assert!(s.rule_book().degrade.is_empty(), "all or nothing");
    assert_eq!(heard.failures.lock().unwrap().len(), 1, "told once");
    // Fixed: loaded.
    write_atomic(&path, &flow_file(&[12]));
    eventually("the fixed file is loaded", || flow_counts(s) == [12.0]);
}

#[test]
fn rapid_successive_edits_end_on_the_last() {
    let s = sentinel();
    let (_dir, path) = temp_file(&flow_file(&[1]));
    let (watcher, _heard) = watcher(&path);
    let _handle = watcher.start(s).unwrap();
    for i in 2..=40 {
        if i % 2 == 0 {
            fs::write(&path, flow_file(&[i])).unwrap();
        } else {
            write_atomic(&path, &flow_file(&[i]));
        }
    }
    eventually("the last edit wins", || flow_counts(s) == [40.0]);
    stays("and stays", || flow_counts(s) == [40.0]);
}

#[test]
fn entries_never_see_a_mix_of_two_files_over_100_reloads() {
    // File A refuses origin "x" by flow, file B by authority; a mix (flow
    // from B, authority from A) would let the entry through.
    let a = "flow:\n  - {resource: r, count: 0}\n";
    let b = "authority:\n  - {resource: r, strategy: black, limit_app: [x]}\n";
    let s = sentinel();
    let (_dir, path) = temp_file(&format!("version: 0\n{a}"));
    let loaded = Arc::new(AtomicU64::new(u64::MAX));
    let seen = loaded.clone();
    let _handle = RuleWatcher::new(&path)
        .interval(Duration::from_millis(10))
        .on_success(move |r| {
            let version = r.version.as_deref().unwrap_or("0").parse().unwrap();
            seen.store(version, Ordering::SeqCst);
        })
        .start(s)
        .unwrap();
    let done = AtomicBool::new(false);
    let (flow, authority, passed) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    match s.entry_builder("r").origin("x").enter() {
                        Ok(_) => passed.fetch_add(1, Ordering::Relaxed),
                        Err(e) if e.kind() == BlockKind::Flow => {
                            flow.fetch_add(1, Ordering::Relaxed)
                        }
                        Err(_) => authority.fetch_add(1, Ordering::Relaxed),
                    };
                }
            });
        }
        for i in 1..=100u64 {
            let rules = if i % 2 == 0 { a } else { b };
            write_atomic(&path, &format!("version: {i}\n{rules}"));
            eventually("the reload", || loaded.load(Ordering::SeqCst) == i);
        }
        done.store(true, Ordering::Relaxed);
    });
    assert_eq!(passed.into_inner(), 0, "an entry saw a mix of two files");
    assert!(flow.into_inner() > 0 && authority.into_inner() > 0);
}

#[test]
fn a_reload_keeps_the_state_of_unchanged_breakers() {
    let s = sentinel();
    let breaker =
        "degrade:\n  - {resource: pay, grade: error_count, count: 1, min_request_amount: 1}\n";
    let (_dir, path) = temp_file(breaker);
    let (watcher, _heard) = watcher(&path);
    let _handle = watcher.start(s).unwrap();
    // Two errors are more than `count: 1`: the breaker opens.
    for _ in 0..2 {
        let entry = s.entry("pay").unwrap();
        entry.set_error("boom");
    }
    let blocked = || s.entry("pay").err().map(|e| e.kind()) == Some(BlockKind::Degrade);
    assert!(blocked(), "the breaker opened");
    write_atomic(&path, &format!("{breaker}{}", flow_file(&[5])));
    eventually("the reload", || flow_counts(s) == [5.0]);
    assert!(blocked(), "the unchanged breaker is still open");
    // Statistics are kept too.
    let node = s.resource_node("pay").unwrap();
    assert!(node.stats().block_qps(s.now_ms()) >= 2.0);
}

#[test]
fn dropping_the_handle_stops_the_watcher() {
    let s = sentinel();
    let (_dir, path) = temp_file(&flow_file(&[1]));
    let (watcher, _heard) = watcher(&path);
    let handle = watcher.start(s).unwrap();
    assert!(handle.file().ends_with("rules.yaml"));
    drop(handle);
    write_atomic(&path, &flow_file(&[2]));
    stays("nothing is watched", || flow_counts(s) == [1.0]);
}

/// An interval of 0 kept a core busy polling (86 %).
#[test]
fn an_interval_under_10_ms_is_refused_and_nothing_is_loaded() {
    let s = sentinel();
    let (_dir, path) = temp_file(&flow_file(&[1]));
    for interval in [Duration::ZERO, Duration::from_micros(9_999)] {
        let error = RuleWatcher::new(&path)
            .interval(interval)
            .start(s)
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "{}: the watch interval must be at least 10ms, got {interval:?}",
                path.display()
            )
        );
    }
    assert!(flow_counts(s).is_empty());
    let _handle = RuleWatcher::new(&path)
        .interval(sentinel_flow_rules::MIN_INTERVAL)
        .start(s)
        .unwrap();
    assert_eq!(flow_counts(s), [1.0]);
}

/// A named pipe at the path blocked the watcher's open (no writer ever
/// comes), and with it the handle's drop, which waits for the thread.
#[cfg(unix)]
#[test]
fn a_named_pipe_at_the_path_is_told_and_the_handle_still_drops() {
    let mkfifo = |path: &Path| {
        let made = std::process::Command::new("mkfifo").arg(path).status();
        assert!(made.unwrap().success());
    };
    let s = sentinel();
    let (dir, path) = temp_file(&flow_file(&[1]));
    let (watcher, heard) = watcher(&path);
    let handle = watcher.start(s).unwrap();
    fs::remove_file(&path).unwrap();
    mkfifo(&path);
    eventually("the pipe is told", || {
        failures(&heard)
            .iter()
            .any(|f| f.ends_with("cannot read: a named pipe, not a regular file"))
    });
    assert_eq!(flow_counts(s), [1.0]);
    let (dropped, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(handle);
        dropped.send(()).unwrap();
    });
    done.recv_timeout(Duration::from_secs(10))
        .expect("the handle's drop returns");
    // Nor does a watcher start on one.
    let pipe = dir.path().join("pipe.yaml");
    mkfifo(&pipe);
    let error = RuleWatcher::new(&pipe).start(s).unwrap_err();
    assert!(
        error
            .to_string()
            .ends_with("cannot read: a named pipe, not a regular file"),
        "{error}"
    );
    let error = sentinel_flow_rules::load_file(&pipe, &Default::default()).unwrap_err();
    assert!(
        error
            .to_string()
            .ends_with("a named pipe, not a regular file")
    );
}

/// A panic while a file was applied (here in a rule listener of the
/// instance) ended the watcher's thread silently: no later file was
/// loaded and nothing was told.
#[test]
fn a_panic_while_applying_is_told_and_the_next_good_file_is_loaded() {
    let s = sentinel();
    let (_dir, path) = temp_file(&flow_file(&[1]));
    let armed = Arc::new(AtomicBool::new(false));
    let fire = armed.clone();
    s.flow_rules().on_change(move |_| {
        if fire.swap(false, Ordering::SeqCst) {
            panic!("listener failed once");
        }
    });
    let (watcher, heard) = watcher(&path);
    let _handle = watcher.start(s).unwrap();
    armed.store(true, Ordering::SeqCst);
    write_atomic(&path, &flow_file(&[2]));
    eventually("the panic is told", || !failures(&heard).is_empty());
    assert_eq!(
        failures(&heard),
        [format!(
            "{}: loading the rules panicked: listener failed once",
            path.display()
        )]
    );
    write_atomic(&path, &flow_file(&[3]));
    eventually("the next file is loaded", || flow_counts(s) == [3.0]);
}

/// 50 of 68 rule sets put in force during in-place rewrites were partial
/// (a count cut short, a list cut after a rule). A writer thread rewrites
/// a 300-rule file in place 1 000 times, truncating and writing it in
/// pieces, pausing now and then for a few intervals so that whole files
/// are taken; every set the instance heard of is a whole one. The
/// interval is long beside the writer's pieces (a writer stopped halfway
/// for a whole interval is read as done, which a loaded machine can do
/// to a thread for some milliseconds).
#[test]
fn a_thousand_in_place_rewrites_never_put_a_partial_set_in_force() {
    use std::io::Write;

    const RULES: usize = 300;
    const PIECES: usize = 16;
    let file_of = |k: u32| flow_file(&vec![10_000 + k; RULES]);
    let s = sentinel();
    let (_dir, path) = temp_file(&file_of(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let heard = seen.clone();
    s.flow_rules().on_change(move |rules| {
        let counts: Vec<f64> = rules.iter().map(|r| r.count).collect();
        heard.lock().unwrap().push(counts);
    });
    let (watcher, heard) = watcher(&path);
    let _handle = watcher
        .interval(Duration::from_millis(100))
        .start(s)
        .unwrap();
    for k in 1..=1_000u32 {
        let text = file_of(k);
        let mut file = fs::File::create(&path).unwrap();
        for piece in text.as_bytes().chunks(text.len().div_ceil(PIECES)) {
            file.write_all(piece).unwrap();
        }
        drop(file);
        if k % 100 == 0 {
            let whole = f64::from(10_000 + k);
            eventually("a whole file is taken", || flow_counts(s)[0] == whole);
        }
    }
    let seen = seen.lock().unwrap().clone();
    for counts in &seen {
        let whole = counts.len() == RULES && counts.iter().all(|&c| c == counts[0]);
        assert!(
            whole,
            "a partial set was put in force: {} rules",
            counts.len()
        );
    }
    assert!(seen.len() >= 10, "{} sets", seen.len());
    assert!(failures(&heard).is_empty(), "{:?}", failures(&heard));
}

#[test]
fn the_handle_shows_the_files_state_as_a_rule_sources() {
    let s = sentinel();
    let (_dir, path) = temp_file(&flow_file(&[1]));
    let (watcher, _heard) = watcher(&path);
    let handle = watcher.start(s).unwrap();
    let state = handle.state();
    assert!(state.connected);
    assert_eq!(state.name, path.display().to_string());
    assert_eq!(
        (state.applies, state.refusals, state.disconnects),
        (1, 0, 0)
    );
    assert_eq!(state.applied_at_ms, Some(1_700_000_000_000));
    let first = state.revision.clone().unwrap();
    assert!(first.starts_with("h:"), "{first}");

    write_atomic(&path, "flow:\n  - {resource: a, cuont: 1}\n");
    eventually("the bad edit is counted", || handle.state().refusals == 1);
    let state = handle.state();
    assert!(state.last_error.as_deref().unwrap().contains("cuont"));
    assert_eq!(state.revision.as_deref(), Some(first.as_str()));

    fs::remove_file(&path).unwrap();
    eventually("the deletion is seen", || !handle.state().connected);
    assert_eq!(handle.state().disconnects, 1);

    write_atomic(&path, &flow_file(&[2]));
    eventually("the file is back", || handle.state().applies == 2);
    let state = handle.state();
    assert!(state.connected && state.last_error.is_none(), "{state:?}");
    assert_ne!(state.revision.as_deref(), Some(first.as_str()));
    assert!(
        state
            .prometheus()
            .contains("sentinel_rule_source_applies_total{source=\"")
    );
}

#[test]
fn a_state_reader_outlives_the_handle_and_then_says_not_connected() {
    let s = sentinel();
    let (_dir, path) = temp_file(&flow_file(&[1]));
    let (watcher, _heard) = watcher(&path);
    let handle = watcher.start(s).unwrap();
    let reader = handle.state_reader();
    assert!(reader().connected);
    assert_eq!(reader(), handle.state());
    drop(handle);
    let state = reader();
    assert!(!state.connected, "{state:?}");
    assert_eq!(state.applies, 1);
}
