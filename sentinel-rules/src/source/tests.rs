//! The watcher against a scripted store: start, backoff, last-known-good.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sentinel_flow_core::{ManualClock, Sentinel};

use super::{KeyValue, RuleFormat, RuleSource, SourceError, SourceWatcher, Values};

/// What the scripted store holds and how it behaves.
#[derive(Default)]
struct Script {
    up: bool,
    values: HashMap<String, Vec<u8>>,
    /// When each `connect` was called.
    connects: Vec<Instant>,
    /// A change to tell at the next wait.
    changed: bool,
    /// Reads answer that every value is being written.
    unsettled: bool,
    /// Reads made.
    reads: usize,
}

#[derive(Clone, Default)]
struct Scripted(Arc<Mutex<Script>>);

impl Scripted {
    fn up_with(key: &str, value: &str) -> Self {
        let scripted = Scripted::default();
        {
            let mut script = scripted.0.lock();
            script.up = true;
            script.values.insert(key.into(), value.as_bytes().to_vec());
        }
        scripted
    }

    fn set(&self, key: &str, value: &str) {
        let mut script = self.0.lock();
        script.values.insert(key.into(), value.as_bytes().to_vec());
        script.changed = true;
    }
}

impl RuleSource for Scripted {
    fn name(&self) -> String {
        "scripted".into()
    }

    fn connect(&mut self, _keys: &[String]) -> Result<(), SourceError> {
        let mut script = self.0.lock();
        script.connects.push(Instant::now());
        if script.up {
            Ok(())
        } else {
            Err(SourceError::new("connection refused"))
        }
    }

    fn read(&mut self, keys: &[String], _max: usize) -> Result<Values, SourceError> {
        let mut script = self.0.lock();
        if !script.up {
            return Err(SourceError::new("connection refused"));
        }
        script.reads += 1;
        if script.unsettled {
            let entries = keys.iter().map(|k| (k.clone(), KeyValue::Unsettled));
            return Ok(Values {
                revision: None,
                entries: entries.collect(),
            });
        }
        let entries = keys
            .iter()
            .map(|k| {
                let value = script.values.get(k).cloned();
                (
                    k.clone(),
                    value.map_or(KeyValue::Missing, KeyValue::Present),
                )
            })
            .collect();
        Ok(Values {
            revision: None,
            entries,
        })
    }

    fn wait(&mut self, timeout: Duration) -> Result<bool, SourceError> {
        std::thread::sleep(timeout.min(Duration::from_millis(2)));
        let mut script = self.0.lock();
        if !script.up {
            return Err(SourceError::new("connection reset"));
        }
        Ok(std::mem::take(&mut script.changed))
    }
}

fn sentinel() -> Arc<Sentinel> {
    Arc::new(Sentinel::builder().clock(ManualClock::new(5_000)).build())
}

fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

const GOOD: &str = "flow:\n  - {resource: a, count: 3}\n";

#[test]
fn reconnection_waits_double_up_to_the_cap_and_the_loss_counts_once() {
    let store = Scripted::up_with("rules", GOOD);
    let s = sentinel();
    let handle = SourceWatcher::new(store.clone(), RuleFormat::yaml("rules"))
        .backoff(Duration::from_millis(10), Duration::from_millis(40))
        .start(s.clone())
        .unwrap();
    let state = handle.state();
    assert!(state.connected);
    assert_eq!(state.applied_at_ms, Some(5_000));
    store.0.lock().up = false;
    assert!(eventually(|| store.0.lock().connects.len() >= 7));
    let connects = store.0.lock().connects.clone();
    let gaps: Vec<Duration> = connects[1..].windows(2).map(|w| w[1] - w[0]).collect();
    // 10, 20, 40, 40, 40 ms: doubling, then capped.
    for (gap, least) in gaps.iter().zip([10, 20, 40, 40, 40]) {
        assert!(*gap >= Duration::from_millis(least), "{gaps:?}");
    }
    assert!(gaps[3] < Duration::from_millis(400), "{gaps:?}");
    let state = handle.state();
    assert!(!state.connected);
    assert_eq!(state.disconnects, 1);
    assert_eq!(state.last_error.as_deref(), Some("connection refused"));
    assert_eq!(s.rule_book().flow.len(), 1);
    // Back, with a change made while down.
    store.set("rules", "flow:\n  - {resource: a, count: 8}\n");
    store.0.lock().up = true;
    assert!(eventually(
        || s.rule_book().flow.first().map(|r| r.count) == Some(8.0)
    ));
    assert!(eventually(|| handle.state().connected));
    assert_eq!(handle.state().last_error, None);
}

#[test]
fn a_bad_value_at_start_without_a_copy_is_an_error_and_nothing_changes() {
    let store = Scripted::up_with("rules", "flow:\n  - {resource: a, count: -1}\n");
    let s = sentinel();
    let error = SourceWatcher::new(store, RuleFormat::yaml("rules"))
        .start(s.clone())
        .unwrap_err();
    assert_eq!(
        error.lines(),
        ["scripted key rules:2:26: flow[0] (a): count must be a finite number >= 0, got -1"]
    );
    assert!(s.rule_book().flow.is_empty());
}

#[test]
fn a_bad_value_at_start_with_a_copy_starts_from_the_copy() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("lkg.json");
    let store = Scripted::up_with("rules", GOOD);
    drop(
        SourceWatcher::new(store.clone(), RuleFormat::yaml("rules"))
            .last_known_good(&copy)
            .start(sentinel())
            .unwrap(),
    );
    store.set("rules", "flow: [{resource: a, cuont: 1}]\n");
    let s = sentinel();
    let handle = SourceWatcher::new(store, RuleFormat::yaml("rules"))
        .last_known_good(&copy)
        .start(s.clone())
        .unwrap();
    assert_eq!(s.rule_book().flow[0].count, 3.0);
    let state = handle.state();
    assert!(state.from_last_known_good && state.connected, "{state:?}");
    assert_eq!(state.refusals, 1);
}

#[test]
fn a_corrupt_copy_is_ignored_and_the_watcher_still_starts() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("lkg.json");
    std::fs::write(&copy, "{not json").unwrap();
    let store = Scripted::default();
    let s = sentinel();
    let handle = SourceWatcher::new(store.clone(), RuleFormat::yaml("rules"))
        .last_known_good(&copy)
        .backoff(Duration::from_millis(5), Duration::from_millis(10))
        .start(s.clone())
        .unwrap();
    let state = handle.state();
    assert!(!state.connected && !state.from_last_known_good, "{state:?}");
    assert!(s.rule_book().flow.is_empty());
    store.set("rules", GOOD);
    store.0.lock().up = true;
    assert!(eventually(|| s.rule_book().flow.len() == 1));
    // The copy is now a good one (written just after the swap).
    assert!(eventually(|| std::fs::read_to_string(&copy)
        .unwrap()
        .contains("count: 3")));
}

#[test]
fn a_format_without_keys_and_a_bad_backoff_are_refused() {
    let none = RuleFormat::sentinel_json(super::SentinelKeys::none());
    let error = SourceWatcher::new(Scripted::default(), none).start(sentinel());
    assert!(error.unwrap_err().to_string().contains("names no key"));
    let error = SourceWatcher::new(Scripted::default(), RuleFormat::yaml("rules"))
        .backoff(Duration::from_millis(50), Duration::from_millis(10))
        .start(sentinel());
    assert!(error.unwrap_err().to_string().contains("backoff"));
}

#[test]
fn an_unsettled_value_is_not_taken_and_the_next_read_is() {
    let store = Scripted::up_with("rules", GOOD);
    let s = sentinel();
    let handle = SourceWatcher::new(store.clone(), RuleFormat::yaml("rules"))
        .start(s.clone())
        .unwrap();
    let before = handle.state();
    store.0.lock().unsettled = true;
    store.set("rules", "flow:\n  - {resource: a, count: 8}\n");
    assert!(eventually(|| store.0.lock().reads >= 2));
    // Neither applied nor refused: the rules and the state stay.
    assert_eq!(s.rule_book().flow[0].count, 3.0);
    assert_eq!(handle.state(), before);
    store.0.lock().unsettled = false;
    store.set("rules", "flow:\n  - {resource: a, count: 8}\n");
    assert!(eventually(
        || s.rule_book().flow.first().map(|r| r.count) == Some(8.0)
    ));
    // The state is told after the rules are in force: wait for it too.
    assert!(eventually(|| handle.state().applies == 2));
    assert_eq!((handle.state().applies, handle.state().refusals), (2, 0));
}
