//! Writes that lose nothing: an outside edit racing a store's replace, and
//! two processes replacing the same file at once. Every lost race is a
//! conflict; no change reported written is overwritten by another writer.

mod support;

use std::fs;
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Barrier;
use std::time::Duration;

use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_rules::{RuleChange, RuleFileStore, StoreError};
use support::{book, sentinel, temp_file};

/// A small deterministic generator for the delays.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn base(round: u32) -> String {
    format!("version: {round}\nflow:\n  - {{resource: a, count: 1}}\n")
}

/// What an editor or a deploy script does: a new file renamed over it.
fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_extension("outside");
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, path).unwrap();
}

/// An edit renamed into place 0-4 ms after a replace began was silently
/// overwritten by it in 22 rounds of 100: the content was checked before
/// the rules were rendered and the file synced, not as it was replaced.
#[test]
fn an_outside_edit_racing_a_replace_is_never_lost_over_100_rounds() {
    let (_dir, path) = temp_file(&base(0));
    let s = sentinel();
    let mut random = XorShift(0x2545_f491_4f6c_dd1d);
    let (mut written, mut conflicts) = (0, 0);
    for round in 1..=100 {
        write_atomic(&path, &base(round));
        let store = RuleFileStore::open(&path).unwrap();
        store.reload(&s).unwrap();
        let outside = format!("# edited outside\n{}", base(round));
        let delay = Duration::from_micros(random.below(4_000));
        let start = Barrier::new(2);
        let result = std::thread::scope(|scope| {
            scope.spawn(|| {
                start.wait();
                std::thread::sleep(delay);
                write_atomic(&path, &outside);
            });
            start.wait();
            store.replace(&s, RuleChange::Flow(vec![FlowRule::new("a", 2.0)]))
        });
        // Whichever came first, the outside edit is what the file holds:
        // written after the replace, or kept by its conflict.
        assert_eq!(
            fs::read_to_string(&path).unwrap(),
            outside,
            "round {round}: {result:?}"
        );
        match result {
            Ok(()) => written += 1,
            Err(StoreError::Conflict { .. }) => conflicts += 1,
            Err(other) => panic!("round {round}: {other}"),
        }
    }
    assert_eq!(written + conflicts, 100);
    eprintln!("{written} written before the edit, {conflicts} conflicts");
}

/// The child side of the two-process test: opens the store (its baseline
/// is the file as it is), waits for a line on stdin, replaces the flow
/// rules with the count it was given and exits 0 when written, 3 on a
/// conflict. Does nothing when run as a test of its own.
#[test]
fn child_writer() {
    let (Ok(path), Ok(count)) = (
        std::env::var("SENTINEL_RULES_RACE_FILE"),
        std::env::var("SENTINEL_RULES_RACE_COUNT"),
    ) else {
        return;
    };
    let s = sentinel();
    let store = RuleFileStore::open(&path).unwrap();
    // After the harness's "test child_writer ... ", on the same line.
    println!("ready");
    std::io::stdout().flush().unwrap();
    let mut go = String::new();
    std::io::stdin().lock().read_line(&mut go).unwrap();
    let count: f64 = count.parse().unwrap();
    let code = match store.replace(&s, RuleChange::Flow(vec![FlowRule::new("a", count)])) {
        Ok(()) => 0,
        Err(StoreError::Conflict { .. }) => 3,
        Err(other) => {
            eprintln!("{other}");
            1
        }
    };
    std::process::exit(code);
}

/// Two processes replacing the same file at once both got OK in 97
/// rounds of 100, one change lost each time: nothing kept them apart.
#[test]
fn two_processes_replacing_at_once_never_both_succeed_over_100_rounds() {
    let (_dir, path) = temp_file(&base(0));
    let exe = std::env::current_exe().unwrap();
    for round in 1..=100u32 {
        write_atomic(&path, &base(round));
        let mut children: Vec<_> = [10 + round, 1_000 + round]
            .into_iter()
            .map(|count| {
                let mut child = Command::new(&exe)
                    .args(["--exact", "child_writer", "--nocapture", "--test-threads=1"])
                    .env("SENTINEL_RULES_RACE_FILE", &path)
                    .env("SENTINEL_RULES_RACE_COUNT", count.to_string())
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap();
                let mut ready = String::new();
                let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
                while !ready.contains("ready") {
                    ready.clear();
                    assert_ne!(out.read_line(&mut ready).unwrap(), 0, "child ended early");
                }
                (count, child)
            })
            .collect();
        for (_, child) in &mut children {
            child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        }
        let codes: Vec<(u32, i32)> = children
            .into_iter()
            .map(|(count, mut child)| (count, child.wait().unwrap().code().unwrap()))
            .collect();
        let won: Vec<u32> = codes.iter().filter(|c| c.1 == 0).map(|c| c.0).collect();
        assert_eq!(won.len(), 1, "round {round}: exactly one writes: {codes:?}");
        assert!(
            codes.iter().all(|c| c.1 == 0 || c.1 == 3),
            "round {round}: the other is a conflict: {codes:?}"
        );
        assert_eq!(
            book(&path).flow,
            [FlowRule::new("a", f64::from(won[0]))],
            "round {round}: the winner's change is in the file"
        );
    }
}

/// Two stores of one file in one process, opened separately (as two
/// processes would), replacing from two threads: one writes, the other
/// gets a conflict.
#[test]
fn two_stores_replacing_at_once_never_both_succeed_over_100_rounds() {
    let (_dir, path) = temp_file(&base(0));
    for round in 1..=100u32 {
        write_atomic(&path, &base(round));
        let stores = [
            RuleFileStore::open(&path).unwrap(),
            RuleFileStore::open(&path).unwrap(),
        ];
        let start = Barrier::new(2);
        let results: Vec<_> = std::thread::scope(|scope| {
            let threads: Vec<_> = stores
                .iter()
                .enumerate()
                .map(|(i, store)| {
                    let start = &start;
                    scope.spawn(move || {
                        let s = sentinel();
                        start.wait();
                        let count = f64::from(10 * round) + i as f64;
                        store.replace(&s, RuleChange::Flow(vec![FlowRule::new("a", count)]))
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let won: Vec<usize> = (0..2).filter(|&i| results[i].is_ok()).collect();
        assert_eq!(won.len(), 1, "round {round}: {results:?}");
        let lost = &results[1 - won[0]];
        assert!(matches!(lost, Err(StoreError::Conflict { .. })), "{lost:?}");
        let count = f64::from(10 * round) + won[0] as f64;
        assert_eq!(book(&path).flow, [FlowRule::new("a", count)]);
    }
}
