//! A breaker's statistics: calls completed and bad calls (slow or failed) in
//! one window of `stat_interval_ms`, as Sentinel's breakers keep them (a
//! `LeapArray` of a single bucket).
//!
//! Windows are aligned to multiples of the interval. Recording a call is a
//! load of the window's start and one or two `fetch_add`s; moving to a new
//! window resets the counters under a try-lock, as `LeapArray` does. A time
//! earlier than the window's start (a thread that read the clock late, or a
//! clock that went back) counts in the current window rather than in none.

use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The counters of one breaker, on a pair of cache lines of their own so that
/// completions counted here do not evict the breaker's state word, which
/// every entry reads.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct Window {
    interval_ms: u64,
    start: AtomicU64,
    total: AtomicU64,
    bad: AtomicU64,
    rotating: AtomicBool,
}

impl Window {
    /// An empty window of `interval_ms` (taken as 1 if 0).
    pub(crate) fn new(interval_ms: u64) -> Self {
        Window {
            interval_ms: interval_ms.max(1),
            start: AtomicU64::new(0),
            total: AtomicU64::new(0),
            bad: AtomicU64::new(0),
            rotating: AtomicBool::new(false),
        }
    }

    /// Counts one completed call at `now`; returns the window's total,
    /// this call included.
    #[inline]
    pub(crate) fn record(&self, now: u64, bad: bool) -> u64 {
        loop {
            let start = self.start.load(Ordering::Acquire);
            if now.saturating_sub(start) < self.interval_ms {
                break;
            }
            self.rotate(start, now);
        }
        // Bad first: a thread that sees this call in the total most likely
        // sees it in the bad count too (the figures are read racily anyway,
        // as in Sentinel).
        if bad {
            self.bad.fetch_add(1, Ordering::Relaxed);
        }
        self.total.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Starts the window holding `now`, if this thread gets the lock and no
    /// other thread has moved on from `seen` meanwhile; otherwise yields so
    /// the thread holding it can finish. The caller retries.
    #[cold]
    fn rotate(&self, seen: u64, now: u64) {
        if self
            .rotating
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            if self.start.load(Ordering::Relaxed) == seen {
                self.bad.store(0, Ordering::Relaxed);
                self.total.store(0, Ordering::Relaxed);
                self.start
                    .store(now - now % self.interval_ms, Ordering::Release);
            }
            self.rotating.store(false, Ordering::Release);
        } else {
            crate::sync::yield_now();
        }
    }

    /// The bad calls counted in the current window.
    #[inline]
    pub(crate) fn bad(&self) -> u64 {
        self.bad.load(Ordering::Relaxed)
    }

    /// Empties the current window (the breaker closed).
    pub(crate) fn reset(&self) {
        self.bad.store(0, Ordering::Relaxed);
        self.total.store(0, Ordering::Relaxed);
    }

    /// `(total, bad)` of the window holding `now`: zeros if no call was
    /// counted since it began.
    pub(crate) fn counts(&self, now: u64) -> (u64, u64) {
        let start = self.start.load(Ordering::Acquire);
        if now.saturating_sub(start) < self.interval_ms {
            let bad = self.bad.load(Ordering::Relaxed);
            (self.total.load(Ordering::Relaxed).max(bad), bad)
        } else {
            (0, 0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_within_one_aligned_window() {
        let window = Window::new(1_000);
        assert_eq!(window.record(10_100, false), 1);
        assert_eq!(window.record(10_500, true), 2);
        assert_eq!(window.record(10_999, true), 3);
        assert_eq!(window.counts(10_999), (3, 2));
        assert_eq!(window.bad(), 2);
    }

    #[test]
    fn a_new_window_starts_empty() {
        let window = Window::new(1_000);
        window.record(10_100, true);
        window.record(10_900, true);
        // 11 000 starts the next aligned window, though only 100 ms passed
        // since the last call.
        assert_eq!(window.counts(11_000), (0, 0));
        assert_eq!(window.record(11_000, false), 1);
        assert_eq!(window.counts(11_999), (1, 0));
        // Long after, the figures have expired without a write.
        assert_eq!(window.counts(50_000), (0, 0));
    }

    #[test]
    fn a_late_time_counts_in_the_current_window() {
        let window = Window::new(1_000);
        window.record(20_500, true);
        assert_eq!(window.record(19_000, false), 2);
        assert_eq!(window.counts(20_600), (2, 1));
        assert_eq!(window.counts(3), (2, 1));
    }

    #[test]
    fn reset_empties_but_keeps_the_window() {
        let window = Window::new(500);
        window.record(1_000, true);
        window.reset();
        assert_eq!(window.counts(1_100), (0, 0));
        assert_eq!(window.record(1_200, false), 1);
        assert_eq!(window.counts(1_499), (1, 0));
    }

    #[test]
    fn threads_lose_no_count_within_a_window() {
        let window = Window::new(1_000);
        std::thread::scope(|s| {
            for t in 0..4 {
                let window = &window;
                s.spawn(move || {
                    for i in 0..10_000 {
                        window.record(5_000 + (i % 1_000), t % 2 == 0);
                    }
                });
            }
        });
        assert_eq!(window.counts(5_999), (40_000, 20_000));
    }
}
