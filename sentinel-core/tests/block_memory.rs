//! What counting blocks keeps of the rules that blocked: loads of new
//! authority rule sets, each blocking an entry whose counts are then read,
//! end where one load does (Linux: resident memory from /proc/self/statm,
//! measured in a child process so that no other test shares its heap).

use std::process::Command;

use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};

mod support;
use support::{instance, load};

/// Set in the child process to the number of loads it makes.
const LOADS: &str = "SENTINEL_BLOCK_MEMORY_LOADS";
/// Black lists in each load, one per resource.
const RULES: usize = 40;
/// Origins each black list names (the most a rule may list).
const ORIGINS: usize = 1_000;

/// Resident memory in bytes, from /proc/self/statm.
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux /proc");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // Every Linux target Rust supports here uses 4 KiB pages for statm.
    pages * 4096
}

/// Makes `LOADS` loads of [`RULES`] black lists of the same [`ORIGINS`]
/// origins each (each load a new rule set: its own ids), each followed by a
/// blocked entry per rule and a read of the block counts, then an empty set;
/// prints the resident memory before the first load and after each.
#[test]
#[ignore = "run by the test below, in a child process"]
fn child_loads_blocking_black_lists() {
    let loads: u64 = std::env::var(LOADS).unwrap().parse().unwrap();
    let (_clock, sentinel) = instance();
    let origins: Vec<String> = (0..ORIGINS).map(|i| format!("caller-{i:05}")).collect();
    println!("resident 0 {}", resident_bytes());
    let resources: Vec<String> = (0..RULES).map(|i| format!("r{i}")).collect();
    for round in 1..=loads {
        let rules = resources.iter().enumerate().map(|(i, resource)| {
            let mut rule =
                AuthorityRule::new(resource, AuthorityStrategy::Black, origins.iter().cloned());
            rule.id = Some(round * 1_000 + i as u64);
            rule
        });
        load(&sentinel, rules);
        for resource in &resources {
            let blocked = sentinel
                .entry_builder(resource)
                .origin("caller-00007")
                .enter();
            assert!(blocked.is_err());
        }
        let counts = sentinel.block_counts();
        let total: u64 = counts.iter().map(|c| c.count).sum();
        assert_eq!(total, round * RULES as u64, "every block counted");
        println!("resident {round} {}", resident_bytes());
    }
    load::<AuthorityRule>(&sentinel, []);
    for resource in &resources {
        let entry = sentinel
            .entry_builder(resource)
            .origin("caller-00007")
            .enter();
        assert!(entry.is_ok());
    }
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

/// Each load of black lists that blocked entries kept the rules (their
/// 40 000 origins, about 2 MB) in the per-thread block tally, and reading
/// `block_counts()` released none. Now the resident set levels off at the
/// second load, where a load's high-water mark is (the set in force and
/// the one replacing it are both alive while it is applied), and stays
/// there.
#[test]
fn ten_loads_of_blocking_rule_sets_end_within_a_tenth_of_one_load() {
    let resident = run_child(10);
    let at = |round: &str| resident.iter().find(|(r, _)| r == round).unwrap().1;
    let (before, two, ten) = (at("0"), at("2"), at("10"));
    let two_loads = two.saturating_sub(before);
    let ten_loads = ten.saturating_sub(before);
    let one_load = at("1").saturating_sub(before);
    let figures = format!(
        "one load +{} KiB, two +{} KiB, ten +{} KiB, after the empty set +{} KiB",
        one_load / 1024,
        two_loads / 1024,
        ten_loads / 1024,
        at("empty").saturating_sub(before) / 1024
    );
    println!("{figures}");
    assert!(
        ten_loads <= two_loads + one_load / 10,
        "past the second load, more than a tenth of a load kept: {figures}"
    );
}
