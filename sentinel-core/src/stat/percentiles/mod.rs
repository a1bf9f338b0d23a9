//! Response-time percentiles of one resource over the last minute, opt in
//! per resource ([`Sentinel::track_percentiles`](crate::Sentinel::track_percentiles)).
//!
//! Recording is an exit's job, so it must cost little and never wait:
//!
//! - **Per-thread recorders.** Each thread counts into a recorder of its own
//!   for the resource (one per thread token slot, see
//!   [`owner`](super::owner)): 512 log-linear buckets ([`buckets`]) for the
//!   current second,
//!   written with a relaxed load and a store, no read-modify-write, no lock.
//! - **Handed over once a second.** The first call of a thread in a new
//!   second moves the previous second's counts into the resource's minute
//!   (a ring of 60 sparse per-second histograms) under the minute's lock:
//!   one lock per thread and resource per second in which it records,
//!   uncontended unless a reader holds it.
//! - **Merged off the hot path.** A read locks the minute, adds up the
//!   seconds still in the window and every recorder's unhanded second
//!   (so a thread that stopped recording, or exited, still counts), merges
//!   them into an HDR histogram and reads its quantiles.
//!
//! A thread that exits leaves its recorder to the next thread given its
//! token slot, which hands the old counts over before its own. A thread
//! without a token (more than 4 096 threads, or one in its teardown) records
//! straight into the minute under its lock.
//!
//! Times are whole milliseconds, the response time the statistics get.
//! Below 64 ms every millisecond is its own bucket; above, a quantile is
//! the highest time of its bucket (at most 3 % above the true value, never
//! above the largest time seen). The maximum is exact.

// Imports go one way: `minute` (the handed-over seconds and what a read
// adds up) uses `recorder` (the per-thread counts), both use `buckets`.
mod buckets;
mod minute;
mod recorder;

use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering::{AcqRel, Relaxed};

use parking_lot::Mutex;

pub(crate) use minute::Tally;
use minute::{Minute, SECONDS};
use recorder::{Recorders, ThreadRecorder};

use super::owner::thread_index;

/// Response times of one resource over the last minute (the current second
/// and the 59 before it), in milliseconds.
///
/// A quantile is the time at or below which that share of the calls
/// completed, as an HDR histogram reports it: exact below 64 ms, above that
/// at most 3 % high, never above `max`. All are 0 when no call completed in
/// the minute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RtPercentiles {
    /// The median.
    pub p50: u64,
    /// The 90th percentile.
    pub p90: u64,
    /// The 99th percentile.
    pub p99: u64,
    /// The largest time (exact).
    pub max: u64,
    /// Calls completed in the minute.
    pub count: u64,
    /// The sum of their times.
    pub sum_ms: u64,
    /// Calls recorded since tracking began (never decreases).
    pub total_count: u64,
    /// The sum of their times.
    pub total_sum_ms: u64,
}

/// Who asked for tracking: code.
pub(crate) const BY_CODE: u8 = 1;
/// Who asked for tracking: the rule file (the last rule load).
pub(crate) const BY_RULES: u8 = 2;

/// The percentile recorder of one resource, made when tracking is first
/// turned on and kept as long as the resource.
#[derive(Debug)]
pub(crate) struct Percentiles {
    /// [`BY_CODE`] and [`BY_RULES`]; tracking is on while any is set.
    sources: AtomicU8,
    recorders: Recorders,
    minute: Mutex<Minute>,
}

impl Percentiles {
    pub(crate) fn new() -> Self {
        Percentiles {
            sources: AtomicU8::new(0),
            recorders: Recorders::new(),
            minute: Mutex::new(Minute::new()),
        }
    }

    /// Sets or clears `source`; returns whether tracking is on after.
    pub(crate) fn set(&self, source: u8, on: bool) -> bool {
        let after = if on {
            self.sources.fetch_or(source, AcqRel) | source
        } else {
            self.sources.fetch_and(!source, AcqRel) & !source
        };
        after != 0
    }

    /// Whether `source` asks for tracking.
    pub(crate) fn set_by(&self, source: u8) -> bool {
        self.sources.load(Relaxed) & source != 0
    }

    /// Whether tracking is on.
    #[inline(always)]
    pub(crate) fn is_on(&self) -> bool {
        self.sources.load(Relaxed) != 0
    }

    /// Records a call that completed at `now_ms` (instance clock) after
    /// `rt_ms`, if tracking is on.
    #[inline(always)]
    pub(crate) fn record(&self, now_ms: u64, rt_ms: u64) {
        if self.is_on() {
            self.record_on(now_ms, rt_ms);
        }
    }

    #[inline(never)]
    fn record_on(&self, now_ms: u64, rt_ms: u64) {
        let second = now_ms / 1_000;
        let Some(index) = thread_index() else {
            return self.minute.lock().record(second, rt_ms);
        };
        let recorder = self.recorders.get(index);
        if recorder.second.load(Relaxed) != second {
            self.hand_over(recorder, second);
        }
        recorder.add(buckets::index(rt_ms), rt_ms);
    }

    /// Moves the recorder's counts into the minute and starts `second`.
    #[cold]
    #[inline(never)]
    fn hand_over(&self, recorder: &ThreadRecorder, second: u64) {
        let mut minute = self.minute.lock();
        minute.hand_over(recorder);
        recorder.second.store(second, Relaxed);
    }

    /// The figures at `now_ms`, added up in `tally`; `None` while tracking
    /// is off.
    pub(crate) fn read(&self, now_ms: u64, tally: &mut Tally) -> Option<RtPercentiles> {
        if !self.is_on() {
            return None;
        }
        let oldest = (now_ms / 1_000).saturating_sub(SECONDS - 1);
        tally.reset();
        let minute = self.minute.lock();
        minute.read(oldest, tally);
        for recorder in self.recorders.iter() {
            tally.add_recorder(recorder, oldest);
        }
        drop(minute);
        Some(tally.percentiles())
    }
}
