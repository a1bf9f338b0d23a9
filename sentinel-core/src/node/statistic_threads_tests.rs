//! A node under threads: totals are exact once writers join, and the
//! concurrency read never exceeds the calls inside.

use std::sync::Barrier;
use std::sync::atomic::{AtomicU64, Ordering};

use super::StatisticNode;
use crate::stat::{MetricEvent, StatConfig};

const THREADS: usize = 4;
const T0: u64 = 1_700_000_000_000;

#[test]
fn node_totals_are_exact_after_threads_join() {
    let node = StatisticNode::new(&StatConfig::default());
    let now = T0 + 250;
    let per_thread = 50_000u64;
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                barrier.wait();
                for i in 0..per_thread {
                    node.add_pass(now, 1);
                    if i % 10 == 0 {
                        node.add_block(now, 2);
                    }
                    node.add_rt_and_success(now, i % 7, 1);
                }
            });
        }
    });
    let total = THREADS as u64 * per_thread;
    assert_eq!(node.total_pass(now), total);
    assert_eq!(node.total_success(now), total);
    assert_eq!(
        node.total_block(now),
        2 * THREADS as u64 * per_thread.div_ceil(10)
    );
    assert_eq!(node.pass_qps(now), total as f64);
    let rt_sum: u64 = (0..per_thread).map(|i| i % 7).sum::<u64>() * THREADS as u64;
    assert_eq!(node.sum(now, MetricEvent::Rt), rt_sum);
    assert_eq!(node.min_rt(now), 1, "0 ms is read as Sentinel's floor of 1");
    assert_eq!(node.cur_concurrency(), 0);
}

#[test]
fn concurrency_never_exceeds_the_threads_inside() {
    let node = StatisticNode::new(&StatConfig::default());
    let peak = AtomicU64::new(0);
    let barrier = Barrier::new(THREADS);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                barrier.wait();
                for _ in 0..20_000 {
                    node.add_pass(T0, 1);
                    peak.fetch_max(node.cur_concurrency(), Ordering::Relaxed);
                    node.add_rt_and_success(T0, 0, 1);
                }
            });
        }
    });
    assert_eq!(node.cur_concurrency(), 0);
    let peak = peak.load(Ordering::Relaxed);
    assert!((1..=THREADS as u64).contains(&peak), "peak {peak}");
}
