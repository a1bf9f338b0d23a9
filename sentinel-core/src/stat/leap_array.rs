//! `LeapArray`: a ring of buckets, each keyed by the start of its time slice.
//!
//! A window of `interval_ms` is split into `sample_count` buckets of
//! `bucket_ms = interval_ms / sample_count`. Time `t` belongs to the bucket
//! starting at `t - t % bucket_ms`, stored in slot `(t / bucket_ms) % sample_count`.
//! The slot holds whatever slice last used it, so finding the current bucket
//! has four cases (Sentinel's `LeapArray.currentWindow`):
//!
//! - the slot has never held a slice: claim it with a compare-and-swap on its
//!   start (the ring is allocated whole, so the bucket is already there and
//!   empty; Sentinel allocates each bucket here instead);
//! - the slot's bucket has the same start: use it;
//! - the slot's bucket is older: it is stale; one thread resets it under a
//!   try-lock while the others yield and retry;
//! - the slot's bucket is newer: `t` is older than the whole ring (a late
//!   reader of the clock); its events go to a detached bucket nobody counts.
//!
//! A bucket counts in reads while it is one of the `sample_count` most recent
//! slices, i.e. while `current_start - start < interval_ms` where
//! `current_start` is the start of the slice holding `now`. This is Sentinel's
//! "deprecated when `now - start > interval`" applied after its reads refresh
//! the current slot; here reads never write, they skip the stale bucket instead.

use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::fmt;

use crate::sync::OnceBox;

use super::bucket::Bucket;
use super::divisor::Divisor;
#[cfg(test)]
use super::shape::WindowError;
use super::shape::WindowShape;

/// A bucket and the start of the slice it currently holds ([`UNUSED`] before
/// the first). Not padded: a minute window is 60 of these, and a bucket
/// written by the current second shares a line only with buckets that are
/// read, not written.
struct Window<B> {
    start: AtomicU64,
    bucket: B,
}

/// The start of a slot that has never held a slice. No slice starts here:
/// times are clamped to [`LAST_TIME`].
const UNUSED: u64 = u64::MAX;

/// The latest time the ring tells apart; later readings are taken as this.
const LAST_TIME: u64 = u64::MAX - 1;

/// A sliding window over time, split into `sample_count` buckets of type `B`:
/// of a window of 1 000 ms in two buckets, a read at 10 900 sums the buckets
/// starting at 10 000 and 10 500; at 11 000 the first has left the window.
pub(crate) struct LeapArray<B> {
    interval_ms: u64,
    bucket_len: Divisor,
    sample_count: Divisor,
    slots: Box<[Window<B>]>,
    resetting: AtomicBool,
    detached: OnceBox<B>,
}

impl<B: Bucket> LeapArray<B> {
    #[cfg(test)]
    /// A window of `interval_ms` split into `sample_count` buckets, allocated
    /// together now (one allocation per ring).
    pub(crate) fn new(interval_ms: u64, sample_count: u32) -> Result<Self, WindowError> {
        WindowShape::new(interval_ms, sample_count).map(Self::with_shape)
    }

    /// A window of a shape already validated.
    pub(crate) fn with_shape(shape: WindowShape) -> Self {
        LeapArray {
            interval_ms: shape.interval_ms(),
            bucket_len: Divisor::new(shape.bucket_ms()),
            sample_count: Divisor::new(u64::from(shape.sample_count())),
            slots: (0..shape.sample_count())
                .map(|_| Window {
                    start: AtomicU64::new(UNUSED),
                    bucket: B::empty(),
                })
                .collect(),
            resetting: AtomicBool::new(false),
            detached: OnceBox::new(),
        }
    }

    /// The whole window, in milliseconds.
    pub(crate) fn interval_ms(&self) -> u64 {
        self.interval_ms
    }

    /// The length of one bucket, in milliseconds.
    pub(crate) fn bucket_ms(&self) -> u64 {
        self.bucket_len.get()
    }

    /// The start of the slice holding `t`.
    #[inline]
    pub(crate) fn bucket_start(&self, t: u64) -> u64 {
        let t = t.min(LAST_TIME);
        t - self.bucket_len.rem(t)
    }

    /// The bucket for time `now`, making it current if its slot holds an older
    /// slice. Never allocates (except once, for times older than the ring).
    #[inline]
    pub(crate) fn current(&self, now: u64) -> &B {
        let number = self.bucket_len.div(now.min(LAST_TIME));
        let start = number * self.bucket_len.get();
        let window = &self.slots[self.sample_count.rem(number) as usize];
        loop {
            let held = window.start.load(Ordering::Acquire);
            if held == start {
                return &window.bucket;
            }
            if held == UNUSED {
                // The bucket is empty since the ring was made: claiming the
                // slot is one compare-and-swap, as installing a bucket is in
                // Sentinel. A loser sees the winner's start next time round.
                let _ = window.start.compare_exchange(
                    UNUSED,
                    start,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                continue;
            }
            if held > start {
                return self.detached();
            }
            self.reset_stale(window, start);
        }
    }

    /// Resets a stale window to `start` if this thread gets the lock; otherwise
    /// yields so the thread holding it can finish. The caller retries.
    #[cold]
    fn reset_stale(&self, window: &Window<B>, start: u64) {
        if self
            .resetting
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            let held = window.start.load(Ordering::Acquire);
            if held < start || held == UNUSED {
                window.bucket.reset();
                window.start.store(start, Ordering::Release);
            }
            self.resetting.store(false, Ordering::Release);
        } else {
            crate::sync::yield_now();
        }
    }

    #[cold]
    fn detached(&self) -> &B {
        self.detached.get_or_init(|| Box::new(B::empty()))
    }

    /// The buckets that count at `now`, with their start times, in slot order.
    /// Never allocates and never writes.
    pub(crate) fn values(&self, now: u64) -> impl Iterator<Item = (u64, &B)> + '_ {
        let current_start = self.bucket_start(now);
        self.slots.iter().filter_map(move |window| {
            let start = window.start.load(Ordering::Acquire);
            let counts = start <= current_start && current_start - start < self.interval_ms;
            counts.then_some((start, &window.bucket))
        })
    }

    #[cfg(test)]
    /// The bucket of the slice before the one holding `now`, if it was used.
    pub(crate) fn previous(&self, now: u64) -> Option<&B> {
        self.bucket_at(self.bucket_start(now).checked_sub(self.bucket_ms())?)
    }

    /// The bucket holding exactly the slice that contains `t`, if that slice
    /// is still in its slot.
    pub(crate) fn bucket_at(&self, t: u64) -> Option<&B> {
        let number = self.bucket_len.div(t.min(LAST_TIME));
        let window = &self.slots[self.sample_count.rem(number) as usize];
        let start = window.start.load(Ordering::Acquire);
        (start == number * self.bucket_len.get()).then_some(&window.bucket)
    }

    #[cfg(test)]
    /// How many slots have held a time slice.
    pub(crate) fn allocated_buckets(&self) -> usize {
        self.slots
            .iter()
            .filter(|window| window.start.load(Ordering::Relaxed) != UNUSED)
            .count()
    }
}

impl<B> fmt::Debug for LeapArray<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeapArray")
            .field("interval_ms", &self.interval_ms)
            .field("bucket_ms", &self.bucket_len.get())
            .field("sample_count", &self.sample_count.get())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_leaves_the_window_when_its_slice_does() {
        use crate::stat::{MetricBucket, MetricEvent};
        let window = LeapArray::<MetricBucket>::new(1_000, 2).unwrap();
        window.current(10_100).add(MetricEvent::Pass, 3);
        window.current(10_600).add(MetricEvent::Pass, 4);
        assert_eq!(window.sum(10_900, MetricEvent::Pass), 7);
        assert_eq!(window.sum(11_000, MetricEvent::Pass), 4);
    }
    use std::sync::atomic::AtomicU64;

    /// A plain counter bucket, to test the ring apart from `MetricBucket`.
    #[derive(Debug, Default)]
    struct Count(AtomicU64);

    impl Bucket for Count {
        fn empty() -> Self {
            Count::default()
        }
        fn reset(&self) {
            self.0.store(0, Ordering::Relaxed);
        }
    }

    impl Count {
        fn add(&self, n: u64) {
            self.0.fetch_add(n, Ordering::Relaxed);
        }
    }

    fn sum(array: &LeapArray<Count>, now: u64) -> u64 {
        array
            .values(now)
            .map(|(_, b)| b.0.load(Ordering::Relaxed))
            .sum()
    }

    #[test]
    fn refuses_bad_shapes() {
        assert_eq!(
            LeapArray::<Count>::new(0, 2).unwrap_err(),
            WindowError::ZeroInterval
        );
        assert_eq!(
            LeapArray::<Count>::new(1000, 0).unwrap_err(),
            WindowError::ZeroSamples
        );
        let uneven = LeapArray::<Count>::new(1000, 3).unwrap_err();
        assert_eq!(
            uneven.to_string(),
            "window interval 1000 ms is not a multiple of the sample count 3"
        );
    }

    #[test]
    fn slot_and_start_follow_time() {
        let array = LeapArray::<Count>::new(1000, 2).unwrap();
        assert_eq!(array.bucket_ms(), 500);
        assert_eq!(array.bucket_start(1_499), 1_000);
        array.current(1_499).add(1);
        array.current(1_000).add(1);
        assert_eq!(array.bucket_at(1_250).unwrap().0.load(Ordering::Relaxed), 2);
        assert_eq!(array.allocated_buckets(), 1);
    }

    #[test]
    fn bucket_reused_after_full_rotation_is_reset() {
        let array = LeapArray::<Count>::new(1000, 2).unwrap();
        array.current(100).add(5);
        // Same slot, one full interval later: the old count must not leak in.
        let bucket = array.current(1_100);
        assert_eq!(bucket.0.load(Ordering::Relaxed), 0);
        bucket.add(1);
        assert_eq!(sum(&array, 1_100), 1);
        assert_eq!(array.allocated_buckets(), 1);
    }

    #[test]
    fn deprecated_buckets_are_not_counted() {
        let array = LeapArray::<Count>::new(1000, 2).unwrap();
        array.current(0).add(1); // [0, 500)
        array.current(500).add(10); // [500, 1000)
        assert_eq!(sum(&array, 999), 11);
        // At 1000 the slice [0, 500) is a full interval behind the current one.
        assert_eq!(sum(&array, 1_000), 10);
        assert_eq!(sum(&array, 1_499), 10);
        assert_eq!(sum(&array, 1_500), 0);
    }

    #[test]
    fn jump_of_exactly_one_interval() {
        let array = LeapArray::<Count>::new(1000, 4).unwrap();
        for t in (0..1_000).step_by(250) {
            array.current(t).add(1);
        }
        assert_eq!(sum(&array, 999), 4);
        array.current(1_000).add(7);
        assert_eq!(sum(&array, 1_000), 3 + 7);
        assert_eq!(array.previous(1_000).unwrap().0.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn jump_of_many_intervals_forgets_everything() {
        let array = LeapArray::<Count>::new(1000, 4).unwrap();
        for t in (0..1_000).step_by(250) {
            array.current(t).add(1);
        }
        let later = 1_000 * 1_000 + 10;
        assert_eq!(sum(&array, later), 0);
        assert!(array.previous(later).is_none());
        array.current(later).add(2);
        assert_eq!(sum(&array, later), 2);
    }

    #[test]
    fn time_older_than_the_ring_goes_to_a_detached_bucket() {
        let array = LeapArray::<Count>::new(1000, 2).unwrap();
        array.current(5_000).add(1);
        // 4 000 maps to the same slot, which now holds the newer slice.
        array.current(4_000).add(100);
        assert_eq!(sum(&array, 5_000), 1);
        assert_eq!(array.bucket_at(5_000).unwrap().0.load(Ordering::Relaxed), 1);
        // A backwards time in the window is still counted where it belongs.
        array.current(4_600).add(3);
        assert_eq!(sum(&array, 5_000), 4);
    }

    #[test]
    fn time_zero_and_huge_times_do_not_panic() {
        let array = LeapArray::<Count>::new(60_000, 60).unwrap();
        array.current(0).add(1);
        array.current(u64::MAX).add(1);
        assert_eq!(sum(&array, u64::MAX), 1);
        assert!(array.previous(0).is_none());
    }

    #[test]
    fn concurrent_rotation_keeps_every_bucket_consistent() {
        let array = LeapArray::<Count>::new(1000, 2).unwrap();
        std::thread::scope(|s| {
            for thread in 0..4u64 {
                let array = &array;
                s.spawn(move || {
                    for step in 0..2_000u64 {
                        array.current(step * 250 + thread).add(1);
                    }
                });
            }
        });
        // Every slot holds one slice and nothing panicked or deadlocked.
        assert_eq!(array.allocated_buckets(), 2);
        assert!(sum(&array, 2_000 * 250) <= 4 * 4);
    }
}
