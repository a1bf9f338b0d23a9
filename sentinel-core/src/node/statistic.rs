//! `StatisticNode`: the live statistics of one node (a resource, a context's
//! view of a resource, an origin, the inbound total).
//!
//! A node keeps two windows: the second window (1 s in 2 buckets by default)
//! that rule checks read, and the minute window (60 s in 60 buckets) behind
//! totals and the per-second history the metric log writes. Events are written
//! to the second window only, mostly without atomic read-modify-writes, and
//! reach the minute window when their slice is rotated out (see the `live`
//! module of `stat`). The calls currently inside the node (concurrency) are
//! every pass less every completion. Lifetime [`Totals`] come from the same
//! folding: what left the second window, plus what is still in it.
//!
//! If the minute window's buckets are not whole multiples of the second
//! window's, a second-window bucket is counted in the minute bucket where it
//! starts.
//!
//! Every method takes the time (`now`, milliseconds on the instance clock)
//! from its caller, so one entry reads the clock once and every check and
//! count of that entry sees the same instant.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::stat::{Adder, LANES, LiveWindows, MetricEvent, SUCCESS_RT_WORD, StatConfig, rt_as_u32};

/// The statistics of one node, read-only outside the engine: the instance
/// counts on it as entries pass, are refused and exit, and users read it
/// (its rates, totals and [`snapshot`](Self::snapshot)s).
///
/// ```
/// use sentinel_flow_core::{ManualClock, Sentinel};
///
/// let clock = ManualClock::new(1_700_000_000_000);
/// let sentinel = Sentinel::builder().clock(clock.clone()).build();
/// let entry = sentinel.entry("GET:/orders").expect("no rule refuses it");
/// let node = sentinel.resource_node("GET:/orders").expect("entered").stats();
/// assert_eq!(node.cur_concurrency(), 1);
/// clock.advance_ms(12);
/// drop(entry);
/// let now = sentinel.now_ms();
/// assert_eq!(node.pass_qps(now), 1.0);
/// assert_eq!(node.avg_rt(now), 12.0);
/// assert_eq!(node.cur_concurrency(), 0);
/// ```
pub struct StatisticNode {
    windows: LiveWindows,
    /// Batch counts above one of the calls inside (pass counts the batch,
    /// concurrency counts calls). Touched only by batches.
    batch_extra: Adder,
    /// Calls held by concurrency-grade flow rules: reserved before the check,
    /// so that the check is exact under any number of threads. Touched only
    /// while such a rule applies to the node.
    exact: AtomicU64,
    /// `1000 / second window ms`: counts to rates.
    per_second_factor: f64,
    max_rt_ms: u64,
}

/// One completed bucket of the minute window: what happened in that second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MetricSnapshot {
    /// Start of the bucket, in milliseconds on the instance clock.
    pub timestamp_ms: u64,
    /// Requests let through.
    pub pass: u64,
    /// Requests refused.
    pub block: u64,
    /// Requests completed.
    pub success: u64,
    /// Completed requests that recorded an error.
    pub exception: u64,
    /// Sum of the response times of completed requests, in milliseconds.
    pub rt_sum: u64,
    /// Requests let through against a future window's quota.
    pub occupied_pass: u64,
    /// Smallest response time recorded, if any request completed.
    pub min_rt: Option<u64>,
}

impl MetricSnapshot {
    fn of(timestamp_ms: u64, lanes: &[u64; LANES], min_rt: u32) -> Self {
        let get = |event: MetricEvent| lanes[event.lane()];
        MetricSnapshot {
            timestamp_ms,
            pass: get(MetricEvent::Pass),
            block: get(MetricEvent::Block),
            success: get(MetricEvent::Success),
            exception: get(MetricEvent::Exception),
            rt_sum: get(MetricEvent::Rt),
            occupied_pass: get(MetricEvent::OccupiedPass),
            min_rt: (min_rt != u32::MAX).then_some(u64::from(min_rt)),
        }
    }

    /// Average response time of the completed requests (the RT sum when none
    /// completed, as in Sentinel's metric log).
    pub fn avg_rt(&self) -> u64 {
        self.rt_sum.checked_div(self.success).unwrap_or(self.rt_sum)
    }

    /// Whether anything at all was recorded.
    pub fn is_empty(&self) -> bool {
        self.pass == 0
            && self.block == 0
            && self.success == 0
            && self.exception == 0
            && self.rt_sum == 0
            && self.occupied_pass == 0
    }
}

/// Everything a node can report at one instant, read in one go.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NodeSnapshot {
    /// Passed requests per second over the second window.
    pub pass_qps: f64,
    /// Blocked requests per second over the second window.
    pub block_qps: f64,
    /// Completed requests per second over the second window.
    pub success_qps: f64,
    /// Errors per second over the second window.
    pub exception_qps: f64,
    /// Average response time over the second window, in milliseconds.
    pub avg_rt: f64,
    /// Smallest response time over the second window (the ceiling when none).
    pub min_rt: u64,
    /// Calls inside the node now.
    pub concurrency: u64,
    /// Passed requests over the minute window.
    pub total_pass: u64,
    /// Blocked requests over the minute window.
    pub total_block: u64,
    /// Completed requests over the minute window.
    pub total_success: u64,
    /// Errors over the minute window.
    pub total_exception: u64,
}

impl NodeSnapshot {
    /// The figures of several nodes together (an entrance over its
    /// children): counts and rates added, the average RT weighted by
    /// completions, the smallest non-zero minimum RT.
    pub fn sum<'a>(parts: impl IntoIterator<Item = &'a NodeSnapshot>) -> NodeSnapshot {
        let mut total = NodeSnapshot::default();
        for s in parts {
            total.pass_qps += s.pass_qps;
            total.block_qps += s.block_qps;
            total.success_qps += s.success_qps;
            total.exception_qps += s.exception_qps;
            total.concurrency += s.concurrency;
            total.total_pass += s.total_pass;
            total.total_block += s.total_block;
            total.total_success += s.total_success;
            total.total_exception += s.total_exception;
            total.avg_rt += s.avg_rt * s.success_qps;
            total.min_rt = if total.min_rt == 0 {
                s.min_rt
            } else {
                total.min_rt.min(s.min_rt)
            };
        }
        if total.success_qps > 0.0 {
            total.avg_rt /= total.success_qps;
        }
        total
    }
}

/// Everything a node has recorded since it was made, exact at the instant
/// it was read (see [`StatisticNode::lifetime`]). Counters in the
/// Prometheus sense: they only go up (wrapping past `u64::MAX`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Requests let through.
    pub pass: u64,
    /// Requests refused, by any rule.
    pub block: u64,
    /// Requests completed.
    pub success: u64,
    /// Completed requests that recorded an error.
    pub exception: u64,
    /// Sum of the response times of completed requests, in milliseconds
    /// (each capped at the configured ceiling).
    pub rt_sum: u64,
    /// Requests let through against a future window's quota.
    pub occupied_pass: u64,
}

impl Totals {
    fn of(lanes: &[u64; LANES]) -> Self {
        let get = |event: MetricEvent| lanes[event.lane()];
        Totals {
            pass: get(MetricEvent::Pass),
            block: get(MetricEvent::Block),
            success: get(MetricEvent::Success),
            exception: get(MetricEvent::Exception),
            rt_sum: get(MetricEvent::Rt),
            occupied_pass: get(MetricEvent::OccupiedPass),
        }
    }
}

impl StatisticNode {
    /// An empty node with the windows of `config`.
    pub(crate) fn new(config: &StatConfig) -> Self {
        Self::with_windows(LiveWindows::new(config.second(), config.minute()), config)
    }

    fn with_windows(windows: LiveWindows, config: &StatConfig) -> Self {
        StatisticNode {
            windows,
            batch_extra: Adder::new(),
            exact: AtomicU64::new(0),
            per_second_factor: 1_000.0 / config.second().interval_ms() as f64,
            max_rt_ms: config.max_rt(),
        }
    }

    /// An empty node with the windows of `config`, its minute window made
    /// only when first asked for ([`keep_minute`](Self::keep_minute), or a
    /// read of the previous second's rate): until then the minute's
    /// figures (totals, per-second history) hold only what the second
    /// window still does, and the node costs about an eighth.
    pub(crate) fn without_minute(config: &StatConfig) -> Self {
        Self::with_windows(
            LiveWindows::without_minute(config.second(), config.minute()),
            config,
        )
    }

    /// Makes the minute window if the node has none yet: its figures
    /// count from then on.
    pub fn keep_minute(&self) {
        self.windows.keep_minute();
    }

    /// Whether the node keeps a minute window (every node but origin
    /// nodes from the start; an origin node once asked for one).
    pub fn keeps_minute(&self) -> bool {
        self.windows.keeps_minute()
    }

    #[inline(always)]
    fn add(&self, now: u64, event: MetricEvent, n: u64) {
        let lane = event.lane();
        let (low, high) = if lane % 2 == 0 { (n, 0) } else { (0, n) };
        self.windows.add(now, lane / 2, low, high, None);
    }

    // ---- writes (the hot path) ----

    /// Records a call of `n` requests (its batch count) let through: `n`
    /// passes, and one call inside the node until
    /// [`add_rt_and_success`](Self::add_rt_and_success) completes it.
    #[inline(always)]
    pub(crate) fn add_pass(&self, now: u64, n: u64) {
        self.add(now, MetricEvent::Pass, n);
        if n > 1 {
            self.batch_extra.add(n - 1);
        }
    }

    /// Records `n` blocked requests.
    #[inline]
    pub(crate) fn add_block(&self, now: u64, n: u64) {
        self.add(now, MetricEvent::Block, n);
    }

    /// Records `n` requests that completed with an error.
    #[inline]
    pub(crate) fn add_exception(&self, now: u64, n: u64) {
        self.add(now, MetricEvent::Exception, n);
    }

    #[cfg(test)]
    /// Records `n` passed requests admitted against a future window's quota.
    #[inline]
    pub(crate) fn add_occupied_pass(&self, now: u64, n: u64) {
        self.add(now, MetricEvent::OccupiedPass, n);
    }

    /// Records the completion of a call of `n` requests that took `rt_ms`
    /// (capped at the configured ceiling): `n` successes and one response
    /// time, and one call fewer inside the node.
    #[inline(always)]
    pub(crate) fn add_rt_and_success(&self, now: u64, rt_ms: u64, n: u64) {
        let rt_ms = rt_ms.min(self.max_rt_ms);
        self.windows
            .add(now, SUCCESS_RT_WORD, n, rt_ms, Some(rt_as_u32(rt_ms)));
        if n > 1 {
            self.batch_extra.add((n - 1).wrapping_neg());
        }
    }

    /// Takes one of the calls counted exactly for concurrency rules; returns
    /// how many were held before.
    #[inline]
    pub(crate) fn reserve_concurrency(&self) -> u64 {
        self.exact.fetch_add(1, Ordering::AcqRel)
    }

    /// Gives one back.
    #[inline]
    pub(crate) fn release_concurrency(&self) {
        self.exact.fetch_sub(1, Ordering::AcqRel);
    }

    /// Calls held by concurrency rules now.
    pub(crate) fn exact_concurrency(&self) -> u64 {
        self.exact.load(Ordering::Acquire)
    }

    /// The count of `event` over the second window at `now`.
    #[inline]
    pub fn sum(&self, now: u64, event: MetricEvent) -> u64 {
        self.windows.second_sum(now, event.lane())
    }

    /// The count of `event` over the minute window at `now`.
    pub fn total(&self, now: u64, event: MetricEvent) -> u64 {
        self.windows.minute_sums(now)[event.lane()]
    }

    // ---- reads over the second window ----

    #[inline]
    fn per_second(&self, now: u64, event: MetricEvent) -> f64 {
        // A multiply, not a divide: this is on every QPS rule check.
        self.sum(now, event) as f64 * self.per_second_factor
    }

    /// The second window's interval and bucket length, in ms.
    pub(crate) fn second_window_ms(&self) -> (u64, u64) {
        (self.windows.interval_ms(), self.windows.bucket_len_ms())
    }

    /// The second window's length in seconds.
    pub(crate) fn second_interval_secs(&self) -> f64 {
        self.windows.interval_ms() as f64 / 1_000.0
    }

    /// Passed requests per second.
    #[inline]
    pub fn pass_qps(&self, now: u64) -> f64 {
        self.per_second(now, MetricEvent::Pass)
    }

    /// Blocked requests per second.
    pub fn block_qps(&self, now: u64) -> f64 {
        self.per_second(now, MetricEvent::Block)
    }

    /// Passed plus blocked requests per second.
    pub fn total_qps(&self, now: u64) -> f64 {
        self.pass_qps(now) + self.block_qps(now)
    }

    /// Completed requests per second.
    pub fn success_qps(&self, now: u64) -> f64 {
        self.per_second(now, MetricEvent::Success)
    }

    /// Errors per second.
    pub fn exception_qps(&self, now: u64) -> f64 {
        self.per_second(now, MetricEvent::Exception)
    }

    /// Requests per second admitted against a future window's quota.
    pub fn occupied_pass_qps(&self, now: u64) -> f64 {
        self.per_second(now, MetricEvent::OccupiedPass)
    }

    /// Average response time of completed requests in milliseconds; 0 when
    /// none completed.
    pub fn avg_rt(&self, now: u64) -> f64 {
        let success = self.sum(now, MetricEvent::Success);
        if success == 0 {
            return 0.0;
        }
        self.sum(now, MetricEvent::Rt) as f64 / success as f64
    }

    /// Smallest response time in milliseconds: the configured ceiling when no
    /// request completed, and never below 1 (Sentinel's `minRt`).
    pub fn min_rt(&self, now: u64) -> u64 {
        self.windows
            .second_min_rt(now)
            .unwrap_or(self.max_rt_ms)
            .min(self.max_rt_ms)
            .max(1)
    }

    /// The highest rate of completions seen in one bucket of the second
    /// window, scaled to a second; at least one completion per bucket
    /// (Sentinel's `maxSuccessQps`, used by the system rule's BBR check).
    pub fn max_success_qps(&self, now: u64) -> f64 {
        let max = self
            .windows
            .second_max(now, MetricEvent::Success.lane())
            .max(1);
        max as f64 * f64::from(self.windows.sample_count()) / self.second_interval_secs()
    }

    /// Calls inside the node now.
    pub fn cur_concurrency(&self) -> u64 {
        // Negative only transiently (a completion seen before its pass) or
        // if a caller completed more than it let through.
        self.concurrency_signed().max(0) as u64
    }

    /// The concurrency as counted: every pass less every completion, in
    /// calls. May be negative transiently.
    pub(crate) fn concurrency_signed(&self) -> i64 {
        self.windows
            .pass_less_success()
            .wrapping_sub(self.batch_extra.sum_signed())
    }

    /// Every counter over the second window at `now`, by lane.
    pub(crate) fn second_sums(&self, now: u64) -> [u64; LANES] {
        self.windows.second_sums(now)
    }

    /// Every counter over the minute window at `now`, by lane.
    pub(crate) fn minute_sums(&self, now: u64) -> [u64; LANES] {
        self.windows.minute_sums(now)
    }

    // ---- reads over the minute window ----

    fn previous_per_second(&self, now: u64, event: MetricEvent) -> f64 {
        // Rule checks read it (warm-up): the history is kept from now on.
        let minute = self.windows.keep_minute();
        let count = minute
            .bucket_start(now)
            .checked_sub(minute.bucket_ms())
            .and_then(|start| self.windows.minute_slice(start))
            .map_or(0, |(lanes, _)| lanes[event.lane()]);
        count as f64 * 1_000.0 / minute.bucket_ms() as f64
    }

    /// Passed requests per second in the previous bucket of the minute window
    /// (the previous second by default; warm-up flow control reads it).
    pub fn previous_pass_qps(&self, now: u64) -> f64 {
        self.previous_per_second(now, MetricEvent::Pass)
    }

    /// Blocked requests per second in the previous bucket of the minute window.
    pub fn previous_block_qps(&self, now: u64) -> f64 {
        self.previous_per_second(now, MetricEvent::Block)
    }

    /// Passed requests over the minute window.
    pub fn total_pass(&self, now: u64) -> u64 {
        self.total(now, MetricEvent::Pass)
    }

    /// Blocked requests over the minute window.
    pub fn total_block(&self, now: u64) -> u64 {
        self.total(now, MetricEvent::Block)
    }

    /// Passed plus blocked requests over the minute window.
    pub fn total_request(&self, now: u64) -> u64 {
        self.total_pass(now) + self.total_block(now)
    }

    /// Completed requests over the minute window.
    pub fn total_success(&self, now: u64) -> u64 {
        self.total(now, MetricEvent::Success)
    }

    /// Errors over the minute window.
    pub fn total_exception(&self, now: u64) -> u64 {
        self.total(now, MetricEvent::Exception)
    }

    /// Calls `f` with every completed, non-empty bucket of the minute window
    /// that starts at or after `from_ms`, oldest first. The bucket holding
    /// `now` is still filling and is left out. Does not allocate.
    pub fn for_each_metric_since(&self, from_ms: u64, now: u64, mut f: impl FnMut(MetricSnapshot)) {
        let minute = self.windows.minute_shape();
        let current = self.windows.minute_bucket_start(now);
        // Walk the ring by start time rather than slot order, oldest first.
        let bucket_ms = minute.bucket_ms();
        let oldest = current.saturating_sub(minute.interval_ms() - bucket_ms);
        let mut start = oldest.max(from_ms.div_ceil(bucket_ms).saturating_mul(bucket_ms));
        while start < current {
            if let Some((lanes, min_rt)) = self.windows.minute_slice(start) {
                let snapshot = MetricSnapshot::of(start, &lanes, min_rt);
                if !snapshot.is_empty() {
                    f(snapshot);
                }
            }
            start += bucket_ms;
        }
    }

    /// The completed, non-empty buckets of the minute window starting at or
    /// after `from_ms`, oldest first (see [`for_each_metric_since`](Self::for_each_metric_since)).
    pub fn metrics_since(&self, from_ms: u64, now: u64) -> Vec<MetricSnapshot> {
        let mut out = Vec::new();
        self.for_each_metric_since(from_ms, now, |m| out.push(m));
        out
    }

    // ---- lifetime totals ----

    /// Every request the node has recorded since it was made, including
    /// those whose seconds have left the minute window and those recorded
    /// late (stamped before the slice their slot holds), counted exactly
    /// once, up to the instant of the call.
    ///
    /// Nothing is counted on the entry path for this: a slice's counts are
    /// added to the totals once, when it is rotated out of the second
    /// window, and a read adds the slices not rotated out yet. Reads that
    /// follow one another never see a total go down, whatever the writers
    /// do meanwhile; a read that meets a rotation in progress waits for it
    /// (a few dozen stores). It needs no time: everything recorded counts,
    /// whenever it happened.
    ///
    /// ```
    /// use sentinel_flow_core::flow::FlowRule;
    /// use sentinel_flow_core::{ManualClock, Sentinel};
    ///
    /// let clock = ManualClock::new(1_700_000_000_000);
    /// let sentinel = Sentinel::builder().clock(clock.clone()).build();
    /// let entry = sentinel.entry("r").expect("no rule yet");
    /// clock.advance_ms(5);
    /// drop(entry);
    /// clock.advance_ms(90_000); // the first second leaves every window
    /// sentinel.flow_rules().load(vec![FlowRule::new("r", 0.0)]).expect("valid");
    /// assert!(sentinel.entry("r").is_err() && sentinel.entry("r").is_err());
    /// let node = sentinel.resource_node("r").expect("entered").stats();
    /// let totals = node.lifetime();
    /// assert_eq!((totals.pass, totals.success, totals.block), (1, 1, 2));
    /// assert_eq!(totals.rt_sum, 5);
    /// assert_eq!(node.total_pass(sentinel.now_ms()), 0, "the minute window forgot it");
    /// ```
    pub fn lifetime(&self) -> Totals {
        Totals::of(&self.windows.lifetime_sums())
    }

    /// Every figure at once.
    pub fn snapshot(&self, now: u64) -> NodeSnapshot {
        NodeSnapshot {
            pass_qps: self.pass_qps(now),
            block_qps: self.block_qps(now),
            success_qps: self.success_qps(now),
            exception_qps: self.exception_qps(now),
            avg_rt: self.avg_rt(now),
            min_rt: self.min_rt(now),
            concurrency: self.cur_concurrency(),
            total_pass: self.total_pass(now),
            total_block: self.total_block(now),
            total_success: self.total_success(now),
            total_exception: self.total_exception(now),
        }
    }
}

impl fmt::Debug for StatisticNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatisticNode")
            .field("windows", &self.windows)
            .field("concurrency", &self.cur_concurrency())
            .field("max_rt_ms", &self.max_rt_ms)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stat::WindowShape;
    use std::num::NonZeroU64;

    const T0: u64 = 1_700_000_000_000;

    fn node() -> StatisticNode {
        StatisticNode::new(&StatConfig::default())
    }

    #[test]
    fn qps_reads_the_second_window() {
        let node = node();
        node.add_pass(T0, 3);
        node.add_pass(T0 + 600, 2);
        node.add_block(T0 + 700, 4);
        assert_eq!(node.pass_qps(T0 + 999), 5.0);
        assert_eq!(node.block_qps(T0 + 999), 4.0);
        assert_eq!(node.total_qps(T0 + 999), 9.0);
        // The first bucket leaves the second window; the minute keeps it.
        assert_eq!(node.pass_qps(T0 + 1_000), 2.0);
        assert_eq!(node.total_pass(T0 + 1_000), 5);
        assert_eq!(node.total_request(T0 + 1_000), 9);
    }

    #[test]
    fn rates_scale_with_the_window_length() {
        let config = StatConfig::default().second_window(WindowShape::new(2_000, 4).unwrap());
        let node = StatisticNode::new(&config);
        node.add_pass(T0, 10);
        assert_eq!(node.pass_qps(T0), 5.0);
    }

    #[test]
    fn rt_is_capped_and_min_rt_defaults_to_ceiling() {
        let config = StatConfig::default().max_rt_ms(NonZeroU64::new(100).unwrap());
        let node = StatisticNode::new(&config);
        assert_eq!(node.min_rt(T0), 100);
        assert_eq!(node.avg_rt(T0), 0.0);
        node.add_rt_and_success(T0, 500, 1);
        node.add_rt_and_success(T0, 0, 1);
        assert_eq!(node.avg_rt(T0), 50.0);
        assert_eq!(node.min_rt(T0), 1, "min RT is at least 1");
        assert_eq!(node.total_success(T0), 2);
    }

    #[test]
    fn max_success_qps_scales_the_busiest_bucket() {
        let node = node();
        assert_eq!(node.max_success_qps(T0), 2.0, "at least one per bucket");
        node.add_rt_and_success(T0, 1, 30);
        node.add_rt_and_success(T0 + 500, 1, 10);
        assert_eq!(node.max_success_qps(T0 + 500), 60.0);
    }

    #[test]
    fn previous_pass_qps_is_the_previous_second() {
        let node = node();
        node.add_pass(T0 + 10, 7);
        node.add_block(T0 + 20, 2);
        assert_eq!(node.previous_pass_qps(T0 + 500), 0.0);
        assert_eq!(node.previous_pass_qps(T0 + 1_500), 7.0);
        assert_eq!(node.previous_block_qps(T0 + 1_500), 2.0);
        assert_eq!(node.previous_pass_qps(T0 + 2_000), 0.0);
    }

    #[test]
    fn concurrency_counts_calls_not_batches() {
        let node = node();
        node.add_pass(T0, 1);
        node.add_pass(T0 + 1, 5);
        assert_eq!(node.cur_concurrency(), 2);
        node.add_rt_and_success(T0 + 2, 1, 5);
        assert_eq!(node.cur_concurrency(), 1);
        // Across a minute of rotations, folded values still count.
        node.add_pass(T0 + 30_000, 3);
        assert_eq!(node.cur_concurrency(), 2);
        node.add_rt_and_success(T0 + 61_000, 1, 1);
        node.add_rt_and_success(T0 + 125_000, 1, 3);
        assert_eq!(node.cur_concurrency(), 0);
        node.add_rt_and_success(T0 + 125_001, 1, 1);
        assert_eq!(node.cur_concurrency(), 0, "never reported negative");
    }

    #[test]
    fn metrics_since_lists_completed_seconds_oldest_first() {
        let node = node();
        node.add_pass(T0 + 5, 1);
        node.add_rt_and_success(T0 + 2_100, 40, 2);
        node.add_exception(T0 + 2_200, 1);
        node.add_pass(T0 + 3_000, 9); // still filling at T0 + 3 500
        let metrics = node.metrics_since(0, T0 + 3_500);
        assert_eq!(metrics.len(), 2);
        assert_eq!(metrics[0].timestamp_ms, T0);
        assert_eq!(metrics[0].pass, 1);
        assert_eq!(metrics[1].timestamp_ms, T0 + 2_000);
        assert_eq!(metrics[1].success, 2);
        assert_eq!(metrics[1].exception, 1);
        assert_eq!(metrics[1].avg_rt(), 20);
        assert_eq!(metrics[1].min_rt, Some(40));
        assert_eq!(node.metrics_since(T0 + 1, T0 + 3_500).len(), 1);
        assert_eq!(node.metrics_since(T0 + 2_000, T0 + 3_500).len(), 1);
        assert_eq!(node.metrics_since(T0 + 2_001, T0 + 3_500).len(), 0);
        // A minute later everything has left the window.
        assert!(node.metrics_since(0, T0 + 63_000).is_empty());
    }

    #[test]
    fn lifetime_totals_match_the_minute_then_outlive_it() {
        let node = node();
        node.add_pass(T0, 3); // a batch of three
        node.add_block(T0 + 400, 2);
        node.add_occupied_pass(T0 + 600, 1);
        node.add_exception(T0 + 1_200, 1);
        node.add_rt_and_success(T0 + 1_300, 25, 3);
        let expected = Totals {
            pass: 3,
            block: 2,
            success: 3,
            exception: 1,
            rt_sum: 25,
            occupied_pass: 1,
        };
        assert_eq!(node.lifetime(), expected);
        let now = T0 + 1_500;
        assert_eq!(
            (node.total_pass(now), node.total_block(now)),
            (expected.pass, expected.block),
            "the minute window agrees while it holds everything"
        );
        node.add_pass(T0 + 200_000, 1);
        assert_eq!(node.total_pass(T0 + 200_000), 1);
        assert_eq!(node.lifetime().pass, 4);
        assert_eq!(node.lifetime().rt_sum, 25);
    }

    #[test]
    fn snapshot_reads_everything_at_one_instant() {
        let node = node();
        node.add_pass(T0, 1);
        node.add_pass(T0, 1);
        node.add_rt_and_success(T0 + 10, 10, 1);
        let s = node.snapshot(T0 + 10);
        assert_eq!(s.pass_qps, 2.0);
        assert_eq!(s.success_qps, 1.0);
        assert_eq!(s.avg_rt, 10.0);
        assert_eq!(s.min_rt, 10);
        assert_eq!(s.concurrency, 1);
        assert_eq!(s.total_pass, 2);
    }
}
