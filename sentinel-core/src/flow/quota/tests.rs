//! Unit tests of the quota: tags, late entries, bases across bucket edges.

use super::*;
use crate::stat::StatConfig;

fn node() -> StatisticNode {
    StatisticNode::new(&StatConfig::default())
}

/// When an entry at `now` passes, if it does.
fn pass_time(quota: &Quota, node: &StatisticNode, now: u64) -> Option<u64> {
    match quota.acquire(node, 1, now) {
        Acquired::Passed => Some(now),
        Acquired::PassedAt(at) => Some(at),
        Acquired::Refused => None,
        Acquired::Unserved => panic!("a one-second window is served"),
    }
}

/// Entries at `now` until one is refused (at most `most`): how many
/// passed, each counted on `node` when the quota said.
fn fill(quota: &Quota, node: &StatisticNode, now: u64, most: u64) -> u64 {
    let mut passed = 0;
    while passed < most {
        let Some(at) = pass_time(quota, node, now) else {
            break;
        };
        node.add_pass(at, 1);
        passed += 1;
    }
    passed
}

/// Runs `f` on a thread of its own (its own lease, or none).
fn on_another_thread<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| s.spawn(f).join().unwrap())
}

#[test]
fn a_fresh_quota_serves_every_bucket_number() {
    // Tags on both sides of the half-way mark, and the last one.
    for bucket in [
        0,
        1,
        TAGS / 2 - 1,
        TAGS / 2,
        TAGS / 2 + 1,
        TAGS - 1,
        7 * TAGS + 3,
    ] {
        let now = bucket * 500 + 123;
        let (quota, node) = (Quota::new(10.0), node());
        assert_eq!(fill(&quota, &node, now, 100), 10, "bucket {bucket}");
        // The next bucket sees those 10 in its window.
        assert_eq!(fill(&quota, &node, now + 500, 100), 0, "bucket {bucket}");
        assert_eq!(fill(&quota, &node, now + 1_000, 100), 10, "bucket {bucket}");
    }
}

#[test]
fn a_rule_idle_for_any_time_serves_again() {
    // Also a whole wrap of the tags (97 days) or a bucket or two
    // around one: the bucket's start tells them apart.
    for idle in [
        2,
        3,
        TAGS / 2 - 1,
        TAGS / 2 + 1,
        TAGS - LATE - 1,
        TAGS - 1,
        TAGS,
        TAGS + 1,
        5 * TAGS + 7,
    ] {
        let (quota, node) = (Quota::new(4.0), node());
        assert_eq!(fill(&quota, &node, 0, 100), 4);
        let later = idle * 500;
        assert_eq!(fill(&quota, &node, later, 100), 4, "idle {idle} buckets");
    }
}

#[test]
fn tags_wrap_without_taking_a_later_bucket_for_an_earlier_one() {
    let (quota, node) = (Quota::new(4.0), node());
    let last = (TAGS - 1) * 500;
    assert_eq!(fill(&quota, &node, last, 100), 4);
    // The bucket after the last tag has tag 0: later, not earlier.
    assert_eq!(fill(&quota, &node, last + 500, 100), 0, "window still full");
    assert_eq!(fill(&quota, &node, last + 1_000, 100), 4);
}

/// A rule of 10^11 must not refuse an entry that read the clock just
/// before another thread began the rule's next bucket (one entry in tens
/// of millions was refused).
#[test]
fn an_entry_late_for_its_bucket_is_counted_in_the_rules_bucket() {
    let (quota, node) = (Quota::new(1e11), node());
    let t = 1_000_000;
    assert_eq!(fill(&quota, &node, t + 500, 5), 5);
    // Another thread, which read the clock in the bucket before: it
    // passes, counted at the start of the rule's bucket.
    let late = on_another_thread(|| quota.acquire(&node, 1, t + 499));
    assert_eq!(late, Acquired::PassedAt(t + 500));
    // Two buckets late too; three is taken for a bucket long gone.
    let later = on_another_thread(|| quota.acquire(&node, 1, t - 1));
    assert_eq!(later, Acquired::PassedAt(t + 500));
    // A third thread (no lease left for it) takes exact permits.
    on_another_thread(|| {
        on_another_thread(|| {
            let third = on_another_thread(|| quota.acquire(&node, 1, t + 250));
            assert_eq!(third, Acquired::PassedAt(t + 500));
        })
    });
}

/// Found by the stress test: an entry that read the clock buckets before
/// the rule's (its thread stalled while the clock moved on) moved the rule
/// back to its bucket, and the rule's own bucket then began anew from
/// nothing: twice the count in one window.
#[test]
fn an_entry_many_buckets_late_never_moves_the_rule_back() {
    let (quota, node) = (Quota::new(10.0), node());
    let t = 1_000_000;
    assert_eq!(fill(&quota, &node, t + 5_000, 100), 10);
    for late in [t, t + 3_000, t + 4_400] {
        let refused = on_another_thread(|| pass_time(&quota, &node, late));
        assert_eq!(refused, None, "checked against the rule's full bucket");
    }
    assert_eq!(fill(&quota, &node, t + 5_000, 100), 0, "not begun anew");
    assert_eq!(fill(&quota, &node, t + 5_500, 100), 0);
    assert_eq!(fill(&quota, &node, t + 6_000, 100), 10);
}

#[test]
fn a_late_entry_takes_the_rules_bucket_permits() {
    let (quota, node) = (Quota::new(100.0), node());
    let t = 1_000_000;
    assert_eq!(fill(&quota, &node, t + 500, 99), 99);
    let late = on_another_thread(|| pass_time(&quota, &node, t + 400));
    assert_eq!(late, Some(t + 500));
    node.add_pass(t + 500, 1);
    assert_eq!(fill(&quota, &node, t + 500, 10), 0, "the bucket is full");
    on_another_thread(|| assert_eq!(pass_time(&quota, &node, t + 400), None));
}

#[test]
fn permits_spent_before_a_buckets_edge_count_in_the_next_bucket_before_the_node_has_them() {
    // Passes of the last bucket still in flight (their permits spent,
    // not yet counted on the node) when another thread begins the
    // next: the next bucket's base holds them all the same.
    let (quota, node) = (Quota::new(10.0), node());
    let t = 1_000_000;
    let spent = on_another_thread(|| {
        (0..10)
            .filter(|_| pass_time(&quota, &node, t).is_some())
            .count()
    });
    assert_eq!(spent, 10);
    assert_eq!(fill(&quota, &node, t + 500, 100), 0, "[t, t+1000) holds 10");
    // The in-flight passes land in their own bucket.
    node.add_pass(t, 10);
    assert_eq!(fill(&quota, &node, t + 1_000, 100), 10);
}

#[test]
fn permits_left_in_leases_at_a_buckets_edge_do_not_count_as_passes() {
    for renewed_first in [false, true] {
        let (quota, node) = (Quota::new(100.0), node());
        let t = 1_000_000;
        // The lease of another thread takes an eighth of the count and
        // spends one permit of it.
        on_another_thread(|| {
            assert_eq!(fill(&quota, &node, t, 1), 1);
            if renewed_first {
                // It renews its lease in the next bucket itself.
                assert_eq!(fill(&quota, &node, t + 500, 1), 1);
            }
        });
        // One pass in the window so far (two if renewed): the rest of
        // the 100 passes in the next bucket, the lease's leftovers
        // taken back out of its base.
        let already = 1 + u64::from(renewed_first);
        assert_eq!(fill(&quota, &node, t + 500, 200), 100 - already);
    }
}

#[test]
fn permits_given_back_after_a_buckets_edge_leave_the_next_bucket() {
    let (quota, node) = (Quota::new(10.0), node());
    let t = 1_000_000;
    // Ten permits spent by entries a later check refuses, given back
    // once the next bucket has begun.
    on_another_thread(|| {
        for _ in 0..10 {
            assert_eq!(pass_time(&quota, &node, t), Some(t));
        }
        assert_eq!(fill(&quota, &node, t + 500, 1), 0, "begins the next bucket");
        for _ in 0..10 {
            quota.give_back(1, t);
        }
    });
    assert_eq!(fill(&quota, &node, t + 500, 100), 10);
}

#[test]
fn passes_counted_before_the_rule_count_in_its_first_two_buckets() {
    let (quota, node) = (Quota::new(10.0), node());
    let t = 1_000_000;
    node.add_pass(t - 400, 3); // the bucket before
    node.add_pass(t + 100, 4); // this bucket, before the rule
    assert_eq!(fill(&quota, &node, t + 200, 100), 3);
    // The next bucket: the 4 counted before the rule and the 3 passed.
    assert_eq!(fill(&quota, &node, t + 500, 100), 3);
    assert_eq!(fill(&quota, &node, t + 1_000, 100), 7);
}

#[test]
fn a_window_other_than_one_second_of_two_buckets_is_left_to_the_caller() {
    for (interval, samples) in [(2_000, 4), (1_000, 10), (1_000, 1)] {
        let config = StatConfig::default()
            .second_window(crate::stat::WindowShape::new(interval, samples).unwrap());
        let node = StatisticNode::new(&config);
        assert_eq!(Quota::new(5.0).acquire(&node, 1, 1_000), Acquired::Unserved);
    }
}
