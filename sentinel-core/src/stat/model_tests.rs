//! Property tests (crate-internal: they write counts directly): the
//! sliding windows and the node against a naive model
//! that keeps every event with its timestamp and recomputes each read from
//! scratch. Time comes from a `MonotonicClock` over a `ManualClock` that
//! sometimes jumps backwards, as the engine sees it.

use std::sync::Arc;

use proptest::prelude::*;

use super::{LeapArray, MetricBucket, MetricEvent, StatConfig, WindowShape};
use crate::node::StatisticNode;
use crate::{Clock, ManualClock, MonotonicClock};

const T0: u64 = 1_700_000_000_000;

/// A step of time: mostly small, sometimes a bucket, an interval, many
/// intervals, or backwards.
#[derive(Clone, Debug)]
enum Step {
    Ms(u64),
    Buckets(u64),
    Intervals(u64),
    Back(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u64..50).prop_map(Step::Ms),
        2 => (1u64..4).prop_map(Step::Buckets),
        1 => (1u64..3).prop_map(Step::Intervals),
        1 => (0u64..5_000).prop_map(Step::Back),
    ]
}

#[derive(Clone, Debug)]
enum Op {
    Add(usize, u64),
    Rt(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..6, 0u64..5).prop_map(|(e, n)| Op::Add(e, n)),
        (0u64..10_000).prop_map(Op::Rt),
    ]
}

fn shape() -> impl Strategy<Value = WindowShape> {
    prop_oneof![
        Just((1_000, 2)),
        Just((1_000, 10)),
        Just((500, 5)),
        Just((60_000, 60)),
        Just((100, 1)),
        Just((3_000, 3)),
    ]
    .prop_map(|(interval, samples)| WindowShape::new(interval, samples).unwrap())
}

/// A second thread that runs one write at a time for the test thread.
struct Other {
    jobs: std::sync::mpsc::Sender<Job>,
    done: std::sync::mpsc::Receiver<()>,
}

type Job = Box<dyn FnOnce() + Send>;

impl Other {
    fn start() -> Self {
        let (jobs, inbox) = std::sync::mpsc::channel::<Job>();
        let (finished, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for job in inbox {
                job();
                if finished.send(()).is_err() {
                    break;
                }
            }
        });
        Other { jobs, done }
    }

    /// Runs `write(node)` on the other thread and waits for it.
    fn run(&self, node: &Arc<StatisticNode>, write: impl Fn(&StatisticNode) + Send + 'static) {
        let node = Arc::clone(node);
        self.jobs
            .send(Box::new(move || write(&node)))
            .expect("other thread alive");
        self.done.recv().expect("other thread alive");
    }
}

struct Time {
    manual: ManualClock,
    clock: MonotonicClock<ManualClock>,
}

impl Time {
    fn new() -> Self {
        let manual = ManualClock::new(T0);
        Time {
            clock: MonotonicClock::new(manual.clone()),
            manual,
        }
    }

    fn apply(&self, step: &Step, shape: WindowShape) -> u64 {
        match *step {
            Step::Ms(ms) => self.manual.advance_ms(ms),
            Step::Buckets(n) => self.manual.advance_ms(n * shape.bucket_ms()),
            Step::Intervals(n) => self.manual.advance_ms(n * shape.interval_ms()),
            Step::Back(ms) => self.manual.set(self.manual.now_ms().saturating_sub(ms)),
        }
        self.clock.now_ms()
    }
}

/// Every event ever recorded, with the time it was recorded at.
#[derive(Default)]
struct Log {
    events: Vec<(u64, MetricEvent, u64)>,
    rts: Vec<(u64, u64)>,
}

impl Log {
    /// Whether an event at `t` counts in a window of `shape` read at `now`.
    fn counts(shape: WindowShape, t: u64, now: u64) -> bool {
        let b = shape.bucket_ms();
        let (start, current) = (t - t % b, now - now % b);
        start <= current && current - start < shape.interval_ms()
    }

    fn sum(&self, shape: WindowShape, now: u64, event: MetricEvent) -> u64 {
        let events = self.events.iter().filter(|(_, e, _)| *e == event);
        let rts = self.rts.iter().map(|&(t, rt)| (t, MetricEvent::Rt, rt));
        let all: Vec<_> = if event == MetricEvent::Rt {
            events.copied().chain(rts).collect()
        } else {
            events.copied().collect()
        };
        all.iter()
            .filter(|(t, _, _)| Self::counts(shape, *t, now))
            .map(|(_, _, n)| n)
            .sum()
    }

    fn min_rt(&self, shape: WindowShape, now: u64) -> Option<u64> {
        self.rts
            .iter()
            .filter(|(t, _)| Self::counts(shape, *t, now))
            .map(|(_, rt)| *rt)
            .min()
    }

    /// Per-bucket sums of `event` over the buckets that count at `now`.
    fn bucket_sums(&self, shape: WindowShape, now: u64, event: MetricEvent) -> Vec<u64> {
        let b = shape.bucket_ms();
        let mut sums = std::collections::BTreeMap::new();
        for &(t, e, n) in &self.events {
            if e == event && Self::counts(shape, t, now) {
                *sums.entry(t - t % b).or_insert(0) += n;
            }
        }
        sums.into_values().collect()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn leap_array_matches_the_event_log(
        shape in shape(),
        ops in prop::collection::vec((step(), op()), 1..150),
    ) {
        let window = LeapArray::<MetricBucket>::with_shape(shape);
        let time = Time::new();
        let mut log = Log::default();
        for (step, op) in &ops {
            let now = time.apply(step, shape);
            match *op {
                Op::Add(e, n) => {
                    let event = MetricEvent::ALL[e];
                    window.add(now, event, n);
                    log.events.push((now, event, n));
                }
                Op::Rt(rt) => {
                    window.current(now).add_rt(rt);
                    log.rts.push((now, rt));
                }
            }
            for event in MetricEvent::ALL {
                prop_assert_eq!(window.sum(now, event), log.sum(shape, now, event), "{:?} at {}", event, now);
            }
            prop_assert_eq!(window.min_rt(now), log.min_rt(shape, now));
            // Every bucket that counts holds a slice inside the window.
            let current = window.bucket_start(now);
            for (start, _) in window.values(now) {
                prop_assert!(start <= current && current - start < shape.interval_ms());
            }
        }
    }

    #[test]
    fn statistic_node_matches_the_event_log(
        custom in any::<bool>(),
        ops in prop::collection::vec((step(), 0usize..5, 1u64..4, 0u64..8_000, any::<bool>()), 1..150),
    ) {
        let (second, minute) = if custom {
            (WindowShape::new(2_000, 4).unwrap(), WindowShape::new(30_000, 15).unwrap())
        } else {
            (WindowShape::SECOND, WindowShape::MINUTE)
        };
        let config = StatConfig::default().second_window(second).minute_window(minute);
        let max_rt = config.max_rt();
        let node = Arc::new(StatisticNode::new(&config));
        let time = Time::new();
        let mut log = Log::default();
        // Writes come from this thread (the node's owner) or, when the op
        // says so, from a second thread (the shared parts); one at a time.
        let other = Other::start();
        let mut calls: i64 = 0;
        for (step, kind, n, rt, elsewhere) in &ops {
            let now = time.apply(step, second);
            let (n, rt, kind) = (*n, *rt, *kind);
            let write = move |node: &StatisticNode| match kind {
                0 => node.add_pass(now, n),
                1 => node.add_block(now, n),
                2 => node.add_exception(now, n),
                3 => node.add_occupied_pass(now, n),
                _ => node.add_rt_and_success(now, rt, n),
            };
            if *elsewhere {
                other.run(&node, write);
            } else {
                write(&node);
            }
            match kind {
                0 => {
                    calls += 1;
                    log.events.push((now, MetricEvent::Pass, n));
                }
                1 => log.events.push((now, MetricEvent::Block, n)),
                2 => log.events.push((now, MetricEvent::Exception, n)),
                3 => log.events.push((now, MetricEvent::OccupiedPass, n)),
                _ => {
                    calls -= 1;
                    log.events.push((now, MetricEvent::Success, n));
                    log.rts.push((now, rt.min(max_rt)));
                }
            }
            // A pass of any batch is one call in, a completion one call out,
            // whatever windows the events have left.
            prop_assert_eq!(node.cur_concurrency(), calls.max(0) as u64);
            let secs = second.interval_ms() as f64 / 1_000.0;
            let qps = |e| log.sum(second, now, e) as f64 / secs;
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
            prop_assert!(close(node.pass_qps(now), qps(MetricEvent::Pass)));
            prop_assert!(close(node.block_qps(now), qps(MetricEvent::Block)));
            prop_assert!(close(node.success_qps(now), qps(MetricEvent::Success)));
            prop_assert!(close(node.exception_qps(now), qps(MetricEvent::Exception)));
            prop_assert!(close(node.occupied_pass_qps(now), qps(MetricEvent::OccupiedPass)));
            let success = log.sum(second, now, MetricEvent::Success);
            let avg = if success == 0 { 0.0 } else { log.sum(second, now, MetricEvent::Rt) as f64 / success as f64 };
            prop_assert!(close(node.avg_rt(now), avg));
            prop_assert_eq!(node.min_rt(now), log.min_rt(second, now).unwrap_or(max_rt).min(max_rt).max(1));
            let busiest = log.bucket_sums(second, now, MetricEvent::Success).into_iter().max().unwrap_or(0).max(1);
            prop_assert!(close(node.max_success_qps(now), busiest as f64 * f64::from(second.sample_count()) / secs));
            prop_assert_eq!(node.total_pass(now), log.sum(minute, now, MetricEvent::Pass));
            prop_assert_eq!(node.total_block(now), log.sum(minute, now, MetricEvent::Block));
            prop_assert_eq!(node.total_success(now), log.sum(minute, now, MetricEvent::Success));
            prop_assert_eq!(node.total_exception(now), log.sum(minute, now, MetricEvent::Exception));
            prop_assert_eq!(node.total_request(now), node.total_pass(now) + node.total_block(now));

            // The previous minute bucket, per second.
            let b = minute.bucket_ms();
            let previous_start = (now - now % b).checked_sub(b);
            let previous: u64 = log.events.iter()
                .filter(|(t, e, _)| *e == MetricEvent::Pass && Some(t - t % b) == previous_start)
                .map(|(_, _, n)| n)
                .sum();
            prop_assert!(close(node.previous_pass_qps(now), previous as f64 * 1_000.0 / b as f64));

            // Completed minute buckets, oldest first, from any point.
            let from = now.saturating_sub(minute.interval_ms() / 2);
            let metrics = node.metrics_since(from, now);
            let mut expected = std::collections::BTreeMap::<u64, (u64, u64, u64)>::new();
            let current = now - now % b;
            for &(t, e, n) in &log.events {
                let start = t - t % b;
                if start >= from && start < current && Log::counts(minute, t, now) {
                    let entry = expected.entry(start).or_default();
                    match e {
                        MetricEvent::Pass => entry.0 += n,
                        MetricEvent::Block => entry.1 += n,
                        MetricEvent::Success => entry.2 += n,
                        _ => {}
                    }
                }
            }
            let got: Vec<_> = metrics.iter()
                .filter(|m| m.pass + m.block + m.success > 0)
                .map(|m| (m.timestamp_ms, (m.pass, m.block, m.success)))
                .collect();
            let want: Vec<_> = expected.into_iter().filter(|(_, v)| v.0 + v.1 + v.2 > 0).collect();
            prop_assert_eq!(got, want);
        }
    }
}
