//! Time for the engine: the [`Clock`] trait, the production [`SystemClock`]
//! and the [`ManualClock`] tests drive by hand.
//!
//! Every reading is on one timeline: milliseconds (and nanoseconds) since the
//! Unix epoch as read once at start, then advanced by a monotonic clock. Bucket
//! boundaries therefore fall on wall-clock seconds (the metric log relies on
//! it), and an operator changing the wall clock never moves the engine's time.
//!
//! This is the only module that reads the operating system's time.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use once_cell::sync::Lazy;

const NANOS_PER_MILLI: u64 = 1_000_000;

/// A source of time for one [`Sentinel`](crate) instance.
///
/// `now_ms` is read on every entry and exit, so it must be cheap; it may be
/// coarse (a millisecond tick). `now_nanos` is a precise reading on the same
/// timeline, for response times finer than a millisecond.
///
/// An implementation may go backwards (a test setting an earlier time); the
/// engine reads time through [`MonotonicClock`], which treats a backwards
/// reading as the last time seen.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Milliseconds since the clock's origin (the Unix epoch for [`SystemClock`]).
    fn now_ms(&self) -> u64;

    /// Nanoseconds since the same origin, as precise as the platform allows.
    fn now_nanos(&self) -> u64;
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    #[inline]
    fn now_ms(&self) -> u64 {
        (**self).now_ms()
    }

    #[inline]
    fn now_nanos(&self) -> u64 {
        (**self).now_nanos()
    }
}

/// The production clock: a cached millisecond for bucket selection and a
/// precise monotonic reading for response times.
///
/// The millisecond is an atomic that a ticker thread refreshes every
/// millisecond; the thread starts the first time any `SystemClock` is read and
/// lives as long as the process. Reading it is one atomic load (about 1 ns),
/// against about 20 ns for `Instant::now` and 4 ms of granularity for the
/// kernel's coarse clock; the README's clock benchmark has the figures.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

struct Ticker {
    origin: Instant,
    origin_unix_nanos: u64,
    cached_ms: AtomicU64,
}

impl Ticker {
    fn start() -> Self {
        let origin = Instant::now();
        let unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        let origin_unix_nanos = u64::try_from(unix.as_nanos()).unwrap_or(u64::MAX);
        Ticker {
            origin,
            origin_unix_nanos,
            cached_ms: AtomicU64::new(origin_unix_nanos / NANOS_PER_MILLI),
        }
    }

    fn precise_nanos(&self) -> u64 {
        let elapsed = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.origin_unix_nanos.saturating_add(elapsed)
    }

    fn run(&self) {
        loop {
            // `fetch_max`, not `store`: the tick never moves the cached time back.
            self.cached_ms
                .fetch_max(self.precise_nanos() / NANOS_PER_MILLI, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

static TICKER: Lazy<&'static Ticker> = Lazy::new(|| {
    let ticker: &'static Ticker = Box::leak(Box::new(Ticker::start()));
    let spawned = std::thread::Builder::new()
        .name("sentinel-clock".into())
        .spawn(move || ticker.run());
    if let Err(err) = spawned {
        // Without the ticker the cached time would freeze; fail loudly once.
        panic!("sentinel: cannot start the clock ticker thread: {err}");
    }
    ticker
});

impl Clock for SystemClock {
    #[inline]
    fn now_ms(&self) -> u64 {
        TICKER.cached_ms.load(Ordering::Relaxed)
    }

    #[inline]
    fn now_nanos(&self) -> u64 {
        TICKER.precise_nanos()
    }
}

/// A clock that moves only when told to; clones share one time.
///
/// ```
/// use sentinel_core::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::new(1_000);
/// let shared = clock.clone();
/// clock.advance(Duration::from_millis(250));
/// assert_eq!(shared.now_ms(), 1_250);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading `start_ms` milliseconds.
    pub fn new(start_ms: u64) -> Self {
        ManualClock {
            nanos: Arc::new(AtomicU64::new(start_ms.saturating_mul(NANOS_PER_MILLI))),
        }
    }

    /// Moves the time forward by `by` (saturating).
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        // An `Err` is impossible: the closure always returns `Some`.
        let _ = self
            .nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_add(by))
            });
    }

    /// Moves the time forward by `ms` milliseconds.
    pub fn advance_ms(&self, ms: u64) {
        self.advance(Duration::from_millis(ms));
    }

    /// Sets the time to `ms` milliseconds, forwards or backwards.
    pub fn set(&self, ms: u64) {
        self.nanos
            .store(ms.saturating_mul(NANOS_PER_MILLI), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now_ms(&self) -> u64 {
        self.nanos.load(Ordering::SeqCst) / NANOS_PER_MILLI
    }

    #[inline]
    fn now_nanos(&self) -> u64 {
        self.nanos.load(Ordering::SeqCst)
    }
}

/// The engine's view of a [`Clock`]: never earlier than the last time seen.
///
/// A reading earlier than one already returned (a clock set back, a custom
/// clock with jitter) is replaced by that last reading, so windows never see
/// time run backwards. Clones share the last time seen.
#[derive(Clone, Debug)]
pub struct MonotonicClock<C = SystemClock> {
    inner: C,
    last_ms: Arc<AtomicU64>,
}

impl<C: Clock> MonotonicClock<C> {
    /// Wraps `inner`.
    pub fn new(inner: C) -> Self {
        MonotonicClock {
            inner,
            last_ms: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The wrapped clock.
    pub fn inner(&self) -> &C {
        &self.inner
    }
}

impl<C: Clock> Clock for MonotonicClock<C> {
    #[inline]
    fn now_ms(&self) -> u64 {
        let now = self.inner.now_ms();
        let last = self.last_ms.load(Ordering::Relaxed);
        if now > last {
            // Written at most once per millisecond of progress, so the shared
            // line stays read-mostly on the hot path.
            let previous = self.last_ms.fetch_max(now, Ordering::Relaxed);
            previous.max(now)
        } else {
            last
        }
    }

    #[inline]
    fn now_nanos(&self) -> u64 {
        let nanos = self.inner.now_nanos();
        let floor = self
            .last_ms
            .load(Ordering::Relaxed)
            .saturating_mul(NANOS_PER_MILLI);
        nanos.max(floor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_clones_share_time() {
        let clock = ManualClock::new(10);
        let other = clock.clone();
        clock.advance_ms(5);
        assert_eq!(other.now_ms(), 15);
        other.set(3);
        assert_eq!(clock.now_ms(), 3);
        clock.advance(Duration::from_nanos(1_500_000));
        assert_eq!(clock.now_ms(), 4);
        assert_eq!(clock.now_nanos(), 4_500_000);
    }

    #[test]
    fn manual_clock_saturates() {
        let clock = ManualClock::new(u64::MAX);
        clock.advance(Duration::MAX);
        assert_eq!(clock.now_nanos(), u64::MAX);
    }

    #[test]
    fn monotonic_clock_holds_last_time_when_set_backwards() {
        let manual = ManualClock::new(1_000);
        let clock = MonotonicClock::new(manual.clone());
        assert_eq!(clock.now_ms(), 1_000);
        manual.set(400);
        assert_eq!(clock.now_ms(), 1_000);
        assert!(clock.now_nanos() >= 1_000 * NANOS_PER_MILLI);
        manual.set(1_200);
        assert_eq!(clock.now_ms(), 1_200);
        manual.set(0);
        assert_eq!(clock.now_ms(), 1_200);
    }

    #[test]
    fn system_clock_is_wall_aligned_and_monotonic() {
        let clock = SystemClock;
        let wall = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let first = clock.now_ms();
        // The ticker thread and the wall clock agree to well within a second.
        assert!(first.abs_diff(wall) < 1_000, "{first} vs {wall}");
        let precise = clock.now_nanos() / NANOS_PER_MILLI;
        assert!(
            precise + 2 >= first,
            "precise {precise} behind cached {first}"
        );
        let mut last = first;
        for _ in 0..1_000 {
            let now = clock.now_ms();
            assert!(now >= last);
            last = now;
        }
    }
}
