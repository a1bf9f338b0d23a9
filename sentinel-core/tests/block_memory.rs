//! What counting blocks keeps of the rules that blocked: loads of new
//! authority rule sets, each blocking an entry whose counts are then read,
//! end where one load does (Linux: resident memory from /proc/self/statm,
//! measured in a child process so that no other test shares its heap).

use std::process::Command;

use sentinel_core::authority::{AuthorityRule, AuthorityStrategy};

mod support;
use support::{instance, load};

/// Set in the child process to the number of loads it makes.
const LOADS: &str = "SENTINEL_BLOCK_MEMORY_LOADS";
/// Origins each black list names.
const ORIGINS: usize = 40_000;

/// Resident memory in bytes, from /proc/self/statm.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux /proc");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // Every Linux target Rust supports here uses 4 KiB pages for statm.
    pages * 4096
}

/// Loads `LOADS` black lists of the same [`ORIGINS`] origins (each a new
/// rule set: its own id), each followed by a blocked entry and a read of
/// the block counts, then an empty set; prints the resident memory before
/// the first load and after each.
#[test]
#[ignore = "run by the test below, in a child process"]
fn child_loads_blocking_black_lists() {
    let loads: u64 = std::env::var(LOADS).unwrap().parse().unwrap();
    let (_clock, sentinel) = instance();
    let origins: Vec<String> = (0..ORIGINS).map(|i| format!("caller-{i:05}")).collect();
    println!("resident 0 {}", resident_bytes());
    for round in 1..=loads {
        let mut rule = AuthorityRule::new("r", AuthorityStrategy::Black, origins.iter().cloned());
        rule.id = Some(round);
        load(&sentinel, [rule]);
        let blocked = sentinel.entry_builder("r").origin("caller-00007").enter();
        assert!(blocked.is_err());
        drop(blocked);
        let counts = sentinel.block_counts();
        assert_eq!(counts[0].count, round, "every block counted");
        println!("resident {round} {}", resident_bytes());
    }
    load::<AuthorityRule>(&sentinel, []);
    assert!(
        sentinel
            .entry_builder("r")
            .origin("caller-00007")
            .enter()
            .is_ok()
    );
    println!("resident empty {}", resident_bytes());
}

/// The resident memory the child printed, by round (`empty`: after the
/// empty set).
fn run_child(loads: u64) -> Vec<(String, u64)> {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_loads_blocking_black_lists",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(LOADS, loads.to_string())
        // A fixed threshold: every large buffer is mapped and given back
        // when freed, so the figures follow what is kept, not where glibc
        // placed what was freed.
        .env("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=131072")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "child failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        // The harness may print the test's name on the line of its first
        // output.
        .filter_map(|line| Some(&line[line.find("resident ")? + "resident ".len()..]))
        .map(|line| {
            let (round, bytes) = line.split_once(' ').unwrap();
            (round.to_owned(), bytes.parse().unwrap())
        })
        .collect()
}

/// Each load of a black list that blocked an entry kept the rule (its
/// 40 000 origins, about 2 MB) in the per-thread block tally, and reading
/// `block_counts()` released none.
#[test]
fn ten_loads_of_blocking_rule_sets_end_within_a_tenth_of_one_load() {
    let resident = run_child(10);
    let at = |round: &str| resident.iter().find(|(r, _)| r == round).unwrap().1;
    let (before, one, ten) = (at("0"), at("1"), at("10"));
    let one_load = one.saturating_sub(before);
    let ten_loads = ten.saturating_sub(before);
    let figures = format!(
        "one load +{} KiB, ten loads +{} KiB, after the empty set +{} KiB",
        one_load / 1024,
        ten_loads / 1024,
        at("empty").saturating_sub(before) / 1024
    );
    println!("{figures}");
    assert!(ten_loads <= one_load + one_load / 10, "{figures}");
}
