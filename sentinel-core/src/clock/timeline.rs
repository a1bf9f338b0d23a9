//! The engine's timeline over a clock that may go backwards: never
//! earlier than a time already returned, and moving on with the clock at
//! once after the clock is set back.
//!
//! Invariant: the engine's time is the clock's reading plus an offset,
//! `offset_ms`, which only grows; `last_ms`, the latest time returned,
//! only grows. A reading is one load of each, then the clock: when the
//! clock reads earlier than `last_ms` less the offset, the clock went
//! back, and the offset grows by that gap (one compare-and-swap) so the
//! engine's time goes on from `last_ms` as the clock moves forward.
//!
//! What it keeps (the loom model in `timeline_loom_tests.rs` checks each):
//! - the time a thread reads never decreases, and a time read after
//!   another (by happens-before, any thread) is not earlier;
//! - the engine's time never runs ahead of the clock's forward movement:
//!   every time returned is at most the first reading plus the sum of the
//!   clock's forward steps, so a set-back never adds time;
//! - once the clock has gone back and a reading has seen it, the engine's
//!   time moves by exactly what the clock moves forward.
//!
//! Why the state is read before the clock: a reading that loads
//! `last_ms` sees a time whose own clock reading happened before its load
//! (a release by the `fetch_max` that stored it, an acquire here), so a
//! clock read after the load cannot be earlier unless the clock was set
//! back. A reading that loaded the offset before another thread grew it
//! can only find the clock behind, and its compare-and-swap fails: it
//! returns the latest time, with no step forward. Were the clock read
//! first, a reading delayed between the two would look like a set-back
//! and push the time forward by the delay.
//!
//! The clock's readings must be coherent across threads (a reading that
//! happens after another is not earlier, unless the clock was set back):
//! true of an atomic read, as [`ManualClock`](crate::ManualClock) and
//! [`SystemClock`](crate::SystemClock) are.

use crate::sync::atomic::{AtomicU64, Ordering};

const NANOS_PER_MILLI: u64 = 1_000_000;

/// See the module's documentation.
#[derive(Debug)]
pub(crate) struct Timeline {
    /// How far the engine's time is ahead of the clock's reading: the sum
    /// of the gaps by which the clock was seen going back.
    offset_ms: AtomicU64,
    /// The latest time returned.
    last_ms: AtomicU64,
}

impl Timeline {
    pub(crate) fn new() -> Self {
        Timeline {
            offset_ms: AtomicU64::new(0),
            last_ms: AtomicU64::new(0),
        }
    }

    /// The engine's time for the clock's millisecond reading `read`.
    #[inline]
    pub(crate) fn now_ms(&self, read: impl FnOnce() -> u64) -> u64 {
        let offset = self.offset_ms.load(Ordering::Acquire);
        let last = self.last_ms.load(Ordering::Acquire);
        let now = read().saturating_add(offset);
        if now > last {
            // Written at most once per millisecond of progress, so the
            // shared line stays read-mostly on the hot path.
            let previous = self.last_ms.fetch_max(now, Ordering::AcqRel);
            return previous.max(now);
        }
        if now == last {
            return last;
        }
        self.went_back(offset, last - now)
    }

    /// The clock read `gap` earlier than the latest time, with `offset`:
    /// the offset grows by the gap, unless another reading moved it since
    /// `offset` was loaded (for this set-back or a later one: this reading
    /// then learns nothing). Either way the time is the latest returned.
    #[cold]
    #[inline(never)]
    fn went_back(&self, offset: u64, gap: u64) -> u64 {
        let _ = self.offset_ms.compare_exchange(
            offset,
            offset.saturating_add(gap),
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
        self.last_ms.load(Ordering::Acquire)
    }

    /// The engine's time in nanoseconds for the clock's precise reading
    /// `read`: on the same timeline, never earlier than the latest
    /// millisecond returned. It moves no state: a set-back is learnt by
    /// the millisecond readings, which the engine makes on every entry.
    #[inline]
    pub(crate) fn now_nanos(&self, read: impl FnOnce() -> u64) -> u64 {
        let offset = self.offset_ms.load(Ordering::Acquire);
        let last = self.last_ms.load(Ordering::Acquire);
        read()
            .saturating_add(offset.saturating_mul(NANOS_PER_MILLI))
            .max(last.saturating_mul(NANOS_PER_MILLI))
    }

    /// How far the engine's time is ahead of the clock's reading.
    pub(crate) fn offset_ms(&self) -> u64 {
        self.offset_ms.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clock_set_back_moves_on_from_the_latest_time_at_once() {
        let timeline = Timeline::new();
        assert_eq!(timeline.now_ms(|| 1_000), 1_000);
        assert_eq!(timeline.now_ms(|| 400), 1_000, "never earlier");
        assert_eq!(timeline.offset_ms(), 600);
        assert_eq!(timeline.now_ms(|| 401), 1_001, "on at once");
        assert_eq!(timeline.now_ms(|| 1_200), 1_800);
        assert_eq!(timeline.now_nanos(|| 1_200_500_000), 1_800_500_000);
    }

    #[test]
    fn a_far_forward_reading_then_a_return_does_not_pin_the_time() {
        let timeline = Timeline::new();
        let year_2500 = 16_725_225_600_000;
        assert_eq!(timeline.now_ms(|| 1_000), 1_000);
        assert_eq!(timeline.now_ms(|| year_2500), year_2500);
        assert_eq!(timeline.now_ms(|| 1_001), year_2500);
        assert_eq!(timeline.now_ms(|| 1_002), year_2500 + 1);
        assert_eq!(timeline.now_ms(|| 2_001), year_2500 + 1_000);
    }

    #[test]
    fn readings_saturate_at_the_end_of_time() {
        let timeline = Timeline::new();
        assert_eq!(timeline.now_ms(|| u64::MAX), u64::MAX);
        assert_eq!(timeline.now_ms(|| 0), u64::MAX);
        assert_eq!(timeline.now_ms(|| 5), u64::MAX);
        assert_eq!(timeline.now_nanos(|| 5), u64::MAX);
    }
}

#[cfg(all(test, loom))]
#[path = "timeline_loom_tests.rs"]
mod loom_tests;
