//! What names cost: rule loads of new names leave nothing behind, origins
//! chosen by callers stay within the instance's budget, and an origin node
//! is small. Memory is read as the process's resident set, each
//! measurement in a child process of its own (this binary, run again for
//! one test), so that no other test's heap blurs it.
#![cfg(target_os = "linux")]

use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::node::{OriginNode, PAST_MAX_ORIGINS};
use sentinel_flow_core::{BlockKind, ManualClock, Sentinel};

/// The variable that tells a child which test to measure.
const CHILD: &str = "SENTINEL_RESERVATIONS_CHILD";

/// Runs `body` in a child process of its own (this binary, filtered to
/// `test`), and fails if it does.
fn in_child(test: &str, body: impl FnOnce()) {
    if std::env::var(CHILD).as_deref() == Ok(test) {
        return body();
    }
    let exe = std::env::current_exe().expect("the test binary");
    let output = std::process::Command::new(exe)
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, test)
        // Large blocks straight from the system and back: the resident set
        // then follows what is live rather than what the heap once held.
        .env(
            "GLIBC_TUNABLES",
            "glibc.malloc.mmap_threshold=65536:glibc.malloc.trim_threshold=65536:glibc.malloc.arena_max=1",
        )
        .output()
        .expect("the child runs");
    let out = String::from_utf8_lossy(&output.stdout);
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{test} failed:\n{out}\n{err}");
    assert!(out.contains("1 passed"), "{test} did not run:\n{out}");
}

/// Ten loads' resident sets (over the start, after each load) level off:
/// the highest of the last five is at most a tenth of one load above the
/// highest of loads two to five. A load holds two sets at its peak, so the
/// level is reached at the second load; from there the heap's reuse of
/// small blocks moves the figure up and down by a few percent, while a
/// leak of more than a fortieth of a load each time would pass the bound.
fn assert_levels_off(after: &[isize]) {
    assert_eq!(after.len(), 10);
    let one = after[0];
    let early = after[1..5].iter().copied().max().unwrap();
    let late = after[5..].iter().copied().max().unwrap();
    assert!(
        late - early <= one / 10,
        "one load: {one} bytes; highest of loads 2-5: {early}, of loads 6-10: {late} ({after:?})"
    );
}

/// The resident set of this process, in bytes.
fn resident() -> isize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm");
    let pages: isize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("resident pages");
    pages * 4_096
}

fn instance(builder: sentinel_flow_core::SentinelBuilder) -> Sentinel {
    builder.clock(ManualClock::new(1_700_000_000_000)).build()
}

/// `n` flow rules with threshold 0 on names new to load `load`.
fn flow_rules(load: usize, n: usize) -> Vec<FlowRule> {
    (0..n)
        .map(|i| FlowRule::new(format!("load/{load}/flow/{i:06}"), 0.0))
        .collect()
}

/// Ten loads of 20 000 flow rules on names new to each. A load builds
/// its set beside the one in force (which stays if the load is refused),
/// so the process holds two sets at the peak of any load after the first;
/// from there the loads level off ([`assert_levels_off`]). Before names
/// were given back, each load kept 20 000 nodes (about 70 MB).
#[test]
fn ten_loads_of_new_resource_names_end_where_one_does() {
    in_child("ten_loads_of_new_resource_names_end_where_one_does", || {
        let sentinel = instance(Sentinel::builder().max_resources(10));
        for i in 0..10 {
            drop(sentinel.entry(&format!("noise/{i}")));
        }
        let base = resident();
        let mut after = Vec::new();
        for load in 0..10 {
            sentinel
                .flow_rules()
                .load(flow_rules(load, 20_000))
                .unwrap();
            // The rules apply past the full cap.
            let first = format!("load/{load}/flow/000000");
            let refused = sentinel.entry(&first).expect_err("threshold 0");
            assert_eq!(refused.kind(), BlockKind::Flow);
            after.push(resident() - base);
        }
        println!("resident set after each load, over the start: {after:?}");
        assert_levels_off(&after);
        let caps = sentinel.caps();
        assert_eq!(caps.rule_names.used, 20_000);
        // One node per load: the name each entered.
        assert_eq!(caps.resources.reserved, 10);
        assert_eq!(sentinel.resource_nodes().count(), 20);
        sentinel.flow_rules().load(Vec::new()).unwrap();
        assert_eq!(sentinel.caps().rule_names.used, 0);
        assert_eq!(sentinel.resource_nodes().count(), 20);
    });
}

/// Ten authority loads of 40 000 origins each (40 white lists of 1 000,
/// the most a rule may list), new to each load. Before names were given
/// back each load kept 40 000 origin nodes (about 130 MB); now what stays
/// is the set in force and the origins entries used. The resident set
/// levels off from the second load on (the first load's set and the
/// second's are both alive while the second is applied), and the counts
/// show nothing per name is kept.
#[test]
fn loads_of_new_origins_end_where_one_does() {
    const RULES: usize = 40;
    in_child("loads_of_new_origins_end_where_one_does", || {
        let sentinel = instance(Sentinel::builder().max_origins(10));
        let base = resident();
        let mut after = Vec::new();
        for load in 0..10 {
            let rules = (0..RULES).map(|r| {
                let origins = (0..1_000).map(|i| format!("load/{load}/app/{r}/{i:04}"));
                AuthorityRule::new(format!("guarded-{r}"), AuthorityStrategy::White, origins)
            });
            sentinel.authority_rules().load(rules.collect()).unwrap();
            for r in 0..RULES {
                let allowed = format!("load/{load}/app/{r}/0000");
                drop(
                    sentinel
                        .entry_builder(&format!("guarded-{r}"))
                        .origin(&allowed)
                        .enter()
                        .unwrap(),
                );
            }
            after.push(resident() - base);
        }
        println!("resident set after each load, over the start: {after:?}");
        assert_levels_off(&after);
        let caps = sentinel.caps();
        assert_eq!(caps.rule_names.used, RULES + RULES * 1_000);
        assert_eq!(
            caps.origins.reserved,
            10 * RULES,
            "one per resource and load: the origin entered"
        );
        let guarded = sentinel.resource_node("guarded-0").unwrap();
        assert_eq!(guarded.origins().count(), 10);
    });
}

#[test]
fn an_origin_node_costs_at_most_one_kib() {
    let size = std::mem::size_of::<OriginNode>();
    assert!(size <= 512, "size_of::<OriginNode>() = {size}");
    in_child("an_origin_node_costs_at_most_one_kib", || {
        let sentinel = instance(Sentinel::builder().max_origins(100_000));
        drop(sentinel.entry("r"));
        let origins: Vec<String> = (0..50_000).map(|i| format!("o{i:05}")).collect();
        let base = resident();
        for origin in &origins {
            drop(sentinel.entry_builder("r").origin(origin).enter().unwrap());
        }
        let per_origin = (resident() - base) / 50_000;
        println!("{per_origin} bytes per origin, size_of {size}");
        // Everything: the node, its name, its windows, its place in the index.
        assert!(per_origin <= 1_024, "{per_origin} bytes per origin");
        let r = sentinel.resource_node("r").unwrap();
        let node = r.find_origin("o00000").unwrap();
        assert!(!node.stats().keeps_minute());
        node.stats().keep_minute();
        assert!(node.stats().keeps_minute());
    });
}

#[test]
fn a_million_caller_chosen_origins_stay_within_the_global_budget() {
    in_child(
        "a_million_caller_chosen_origins_stay_within_the_global_budget",
        million,
    );
}

fn million() {
    let sentinel = instance(
        Sentinel::builder()
            .max_resources(200)
            .max_origins(1_000)
            .max_origins_total(20_000),
    );
    let resources: Vec<String> = (0..200).map(|r| format!("route/{r}")).collect();
    for name in &resources {
        drop(sentinel.entry(name));
    }
    let base = resident();
    let mut origin = String::new();
    for i in 0..1_000_000u32 {
        origin.clear();
        use std::fmt::Write;
        let _ = write!(origin, "caller-{i}");
        let resource = &resources[(i % 200) as usize];
        drop(
            sentinel
                .entry_builder(resource)
                .origin(&origin)
                .enter()
                .unwrap(),
        );
    }
    let bytes = resident() - base;
    println!("{bytes} bytes for a million origins");
    let nodes: usize = sentinel.resource_nodes().map(|r| r.origins().count()).sum();
    assert_eq!(nodes, 20_000, "the budget");
    let past_cap = sentinel
        .resource_nodes()
        .filter_map(|r| r.origins_past_cap())
        .inspect(|shared| assert_eq!(shared.name(), PAST_MAX_ORIGINS))
        .count();
    assert_eq!(past_cap, 200);
    // Each origin node at most 1 KiB, and one shared node per resource.
    assert!(bytes <= (20_000 + 200) * 1_024, "{bytes} bytes");
    let caps = sentinel.caps();
    assert_eq!(caps.origins_total.max, 20_000);
    assert_eq!(caps.origins_total.used, 20_000);
    assert_eq!(caps.origins_total.refused, 980_000);
    assert_eq!(sentinel.refused_origins(), 980_000);
    assert_eq!(caps.origins.used, 20_000);
}

#[test]
fn an_origin_a_rule_names_is_made_past_the_global_budget() {
    let sentinel = instance(Sentinel::builder().max_origins_total(1));
    drop(sentinel.entry_builder("a").origin("first").enter().unwrap());
    drop(
        sentinel
            .entry_builder("b")
            .origin("second")
            .enter()
            .unwrap(),
    );
    let b = sentinel.resource_node("b").unwrap();
    assert!(b.find_origin("second").is_none());
    assert_eq!(b.origins_past_cap().unwrap().stats().lifetime().pass, 1);
    let mut rule = FlowRule::new("b", 0.0);
    rule.limit_app = "vip".into();
    sentinel.flow_rules().load(vec![rule]).unwrap();
    let vip = sentinel.entry_builder("b").origin("vip").enter();
    assert_eq!(vip.expect_err("limited").kind(), BlockKind::Flow);
    assert!(b.find_origin("vip").is_some());
    let caps = sentinel.caps();
    assert_eq!(
        (caps.origins_total.used, caps.origins_total.reserved),
        (1, 1)
    );
    assert_eq!(caps.origins_total.refused, 1);
}

#[test]
fn a_load_past_max_rule_names_is_refused_and_the_rules_in_force_stay() {
    let sentinel = instance(Sentinel::builder().max_rule_names(3));
    let mut rule = FlowRule::new("a", 0.0);
    rule.limit_app = "app".into();
    sentinel.flow_rules().load(vec![rule]).unwrap();
    let rules = vec![
        FlowRule::new("b", 1.0),
        FlowRule::new("c", 1.0),
        FlowRule::new("d", 1.0),
        FlowRule::new("e", 1.0),
    ];
    let errors = sentinel.flow_rules().load(rules).expect_err("4 names");
    let error = &errors.errors()[0];
    assert_eq!(
        (error.kind, error.index, error.field),
        ("flow", 3, "resource")
    );
    assert!(
        error.message.contains("more than 3 distinct names"),
        "{error}"
    );
    assert_eq!(sentinel.flow_rules().rules()[0].resource, "a");
    assert!(sentinel.is_reserved("a") && !sentinel.is_reserved("b"));
    let caps = sentinel.caps().rule_names;
    assert_eq!((caps.max, caps.used, caps.refused), (3, 2, 1));
}

#[test]
fn a_handle_never_reads_another_resources_node_after_reloads() {
    let sentinel = instance(Sentinel::builder().max_resources(1));
    drop(sentinel.entry("filler"));
    sentinel
        .flow_rules()
        .load(vec![FlowRule::new("old", 100.0)])
        .unwrap();
    let handle = sentinel.resource("old");
    assert_eq!(handle.node().map(|n| n.name()), Some("old"));
    drop(handle.entry().unwrap());
    // The rule goes; new names come and get nodes through their entries.
    for load in 0..3 {
        let rules = flow_rules(load, 100);
        sentinel.flow_rules().load(rules).unwrap();
        for i in 0..100 {
            let _ = sentinel.entry(&format!("load/{load}/flow/{i:06}"));
        }
    }
    let node = handle.node().unwrap();
    assert_eq!(node.name(), "old");
    drop(handle.entry().unwrap());
    assert_eq!(node.stats().lifetime().pass, 2);
    for other in sentinel
        .resource_nodes()
        .filter(|n| !["old", "filler"].contains(&n.name()))
    {
        assert!(!std::ptr::eq(other, node));
        assert_eq!(other.stats().lifetime().pass, 0, "{}", other.name());
    }
}
