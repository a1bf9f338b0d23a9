//! A Kubernetes ConfigMap mounted as a volume: the kubelet writes each new
//! version whole into a fresh timestamped directory, points a temporary
//! `..data_tmp` link at it, renames that over `..data` (one atomic step)
//! and removes the old directory; `rules.yaml` is a link to
//! `..data/rules.yaml`. The watcher follows the links, sees another file
//! at the path, and takes it at once.
#![cfg(unix)]

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sentinel_flow_core::{ManualClock, Sentinel};
use sentinel_flow_rules::{MIN_INTERVAL, RuleWatcher};

/// Version `n`'s file: `n % 7 + 1` flow rules, each counting `n`; every
/// tenth version is refused (a field misspelt in its last rule).
fn version(n: u32) -> String {
    let mut text = format!("version: {n}\nflow:\n");
    let rules = n % 7 + 1;
    for i in 0..rules {
        let field = if n % 10 == 9 && i == rules - 1 {
            "cuont"
        } else {
            "count"
        };
        text.push_str(&format!("  - {{resource: r{i}, {field}: {n}}}\n"));
    }
    text
}

/// What the kubelet does for an update: the new version whole in a new
/// directory, then the `..data` link swapped in one rename.
fn swap(dir: &Path, n: u32, old: Option<u32>) {
    let target = format!("..2026_01_01_00_00_00.{n}");
    fs::create_dir(dir.join(&target)).unwrap();
    fs::write(dir.join(&target).join("rules.yaml"), version(n)).unwrap();
    symlink(&target, dir.join("..data_tmp")).unwrap();
    fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    if let Some(old) = old {
        fs::remove_dir_all(dir.join(format!("..2026_01_01_00_00_00.{old}"))).unwrap();
    }
}

#[derive(Default)]
struct Heard {
    /// (version, flow rules) of each load put in force.
    loaded: Vec<(u32, usize)>,
    /// Each refusal, as told.
    refused: Vec<String>,
}

#[test]
fn a_thousand_configmap_swaps_are_each_applied_or_reported_and_never_partial() {
    let dir = tempfile::tempdir().unwrap();
    swap(dir.path(), 0, None);
    symlink("..data/rules.yaml", dir.path().join("rules.yaml")).unwrap();
    let sentinel = Arc::new(Sentinel::builder().clock(ManualClock::new(0)).build());
    let heard = Arc::new(Mutex::new(Heard::default()));
    let (on_load, on_refusal) = (heard.clone(), heard.clone());
    let _watch = RuleWatcher::new(dir.path().join("rules.yaml"))
        .interval(MIN_INTERVAL)
        .on_success(move |loaded| {
            let version = loaded.version.as_deref().unwrap().parse().unwrap();
            on_load
                .lock()
                .unwrap()
                .loaded
                .push((version, loaded.count("flow")));
        })
        .on_failure(move |error| on_refusal.lock().unwrap().refused.push(error.to_string()))
        .start(sentinel.clone())
        .unwrap();
    let mut in_force = 0;
    for n in 1..=1000 {
        swap(dir.path(), n, Some(n - 1));
        let bad = n % 10 == 9;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let heard = heard.lock().unwrap();
            let done = if bad {
                heard
                    .refused
                    .iter()
                    .any(|e| e.contains("cuont is not a field"))
                    && heard.refused.len() == (n as usize).div_ceil(10)
            } else {
                heard.loaded.last().map(|(v, _)| *v) == Some(n)
            };
            drop(heard);
            if done {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "swap {n} neither applied nor reported"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        if !bad {
            in_force = n;
        }
        // The rules in force are always one whole version: the last good.
        let book = sentinel.rule_book();
        assert_eq!(book.flow.len() as u32, in_force % 7 + 1, "after swap {n}");
        assert!(
            book.flow.iter().all(|r| r.count == f64::from(in_force)),
            "after swap {n}"
        );
    }
    let heard = heard.lock().unwrap();
    // Every version loaded was loaded whole.
    for &(version, rules) in &heard.loaded {
        assert_eq!(rules as u32, version % 7 + 1, "version {version}");
    }
    assert_eq!(heard.loaded.len(), 1 + 900);
    assert_eq!(heard.refused.len(), 100);
}
