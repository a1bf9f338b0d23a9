//! Time for the engine: the [`Clock`] trait, the production [`SystemClock`]
//! and the [`ManualClock`] tests drive by hand.
//!
//! Every reading is on one timeline: milliseconds (and nanoseconds) since the
//! Unix epoch as read once at start, then advanced by a monotonic clock. Bucket
//! boundaries therefore fall on wall-clock seconds (the metric log relies on
//! it), and an operator changing the wall clock never moves the engine's time.
//! A clock given by the user is read through [`MonotonicClock`], whose
//! timeline (`clock/timeline.rs`) goes on at once when the clock goes back.
//!
//! This is the only module that reads the operating system's time.

pub(crate) mod instance;
mod timeline;

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use once_cell::sync::Lazy;

use timeline::Timeline;

const NANOS_PER_MILLI: u64 = 1_000_000;

/// A source of time for one [`Sentinel`](crate) instance.
///
/// `now_ms` is read on every entry and exit, so it must be cheap; it may be
/// coarse (a millisecond tick). `now_nanos` is a precise reading on the same
/// timeline, for response times finer than a millisecond.
///
/// # The engine's time
///
/// Windows, circuit breakers, rate limiters and hot-parameter tables run on
/// the engine's time, which never goes backwards. The times users read are
/// on the same timeline: [`Sentinel::now_ms`](crate::Sentinel::now_ms), the
/// time in a slot's context, the buckets' start times in snapshots, the
/// metric log's lines and a breaker's next retry time.
///
/// - With [`SystemClock`] (the default) the engine's time is the Unix time
///   read once at start, advanced by the monotonic clock: setting the wall
///   clock, backwards or forwards, moves neither the engine nor the
///   timestamps, which stay on wall-clock seconds.
/// - A clock given with
///   [`SentinelBuilder::clock`](crate::SentinelBuilder::clock) is read
///   through [`MonotonicClock`]: the engine's time is the clock's reading
///   plus how far the clock was seen going back in all (its
///   [`offset_ms`](MonotonicClock::offset_ms)). Until the clock first goes
///   back the two are equal. When it goes back, the engine's time holds for
///   that one reading and then moves on as the clock moves forward, so
///   windows keep counting and an open breaker's retry time comes after its
///   timeout of engine time. A forward jump is followed as it is (it cannot
///   be told from a pause, as of a suspended machine): windows and open
///   breakers see the time pass, and a return from it is a clock going
///   back, from which the engine's time goes on.
///
/// An implementation may go backwards (a test setting an earlier time). Its
/// readings must be coherent across threads: a reading that happens after
/// another is not earlier unless the clock was set back (true of an atomic
/// read, as [`ManualClock`] and [`SystemClock`] are).
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Milliseconds since the clock's origin (the Unix epoch for [`SystemClock`]).
    fn now_ms(&self) -> u64;

    /// Nanoseconds since the same origin, as precise as the platform allows.
    fn now_nanos(&self) -> u64;

    /// Waits until `duration` of this clock's time has passed: what a
    /// synchronous entry queued by a rate limiter does before it is
    /// counted. The default sleeps the thread, right for any clock that
    /// follows real time; a clock driven by hand moves itself instead
    /// ([`ManualClock`] advances by `duration` and returns at once).
    fn sleep(&self, duration: Duration) {
        std::thread::sleep(duration);
    }
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

    fn sleep(&self, duration: Duration) {
        (**self).sleep(duration);
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
/// use sentinel_flow_core::{Clock, ManualClock};
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

    /// Advances the time by `duration` instead of sleeping: a queued entry
    /// returns at once, with the clock moved by exactly its wait.
    fn sleep(&self, duration: Duration) {
        self.advance(duration);
    }
}

/// The engine's view of a [`Clock`]: never earlier than a time it
/// returned, and moving on at once when the clock goes back.
///
/// A reading earlier than the latest time returned (a clock set back, a
/// custom clock with jitter) returns that latest time, and the gap is added
/// to an offset, so that the next readings move on from there as the clock
/// moves forward: a clock set back an hour neither stops the windows nor
/// keeps a breaker open an hour longer. Clones share the offset and the
/// latest time. See [`Clock`] for how the times users read relate to it.
///
/// ```
/// use sentinel_flow_core::{Clock, ManualClock, MonotonicClock};
///
/// let manual = ManualClock::new(10_000);
/// let clock = MonotonicClock::new(manual.clone());
/// assert_eq!(clock.now_ms(), 10_000);
/// manual.set(5_000); // set back 5 s
/// assert_eq!(clock.now_ms(), 10_000);
/// manual.advance_ms(250);
/// assert_eq!(clock.now_ms(), 10_250);
/// assert_eq!(clock.offset_ms(), 5_000);
/// ```
#[derive(Clone, Debug)]
pub struct MonotonicClock<C = SystemClock> {
    inner: C,
    timeline: Arc<Timeline>,
}

impl<C: Clock> MonotonicClock<C> {
    /// Wraps `inner`.
    pub fn new(inner: C) -> Self {
        MonotonicClock {
            inner,
            timeline: Arc::new(Timeline::new()),
        }
    }

    /// The wrapped clock.
    pub fn inner(&self) -> &C {
        &self.inner
    }

    /// How far this clock's time is ahead of the wrapped clock's reading:
    /// the sum of the gaps by which the wrapped clock was seen going back
    /// (0 while it never did).
    pub fn offset_ms(&self) -> u64 {
        self.timeline.offset_ms()
    }
}

impl<C: Clock> Clock for MonotonicClock<C> {
    #[inline]
    fn now_ms(&self) -> u64 {
        self.timeline.now_ms(|| self.inner.now_ms())
    }

    #[inline]
    fn now_nanos(&self) -> u64 {
        self.timeline.now_nanos(|| self.inner.now_nanos())
    }

    fn sleep(&self, duration: Duration) {
        self.inner.sleep(duration);
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
    fn manual_clock_sleep_advances_its_time_and_returns_at_once() {
        let clock = ManualClock::new(1_000);
        let through = MonotonicClock::new(Arc::new(clock.clone()) as Arc<dyn Clock>);
        let started = Instant::now();
        clock.sleep(Duration::from_millis(30_000));
        through.sleep(Duration::from_micros(1_500));
        assert_eq!(clock.now_nanos(), 31_001_500 * 1_000);
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn manual_clock_saturates() {
        let clock = ManualClock::new(u64::MAX);
        clock.advance(Duration::MAX);
        assert_eq!(clock.now_nanos(), u64::MAX);
    }

    #[test]
    fn monotonic_clock_set_backwards_moves_on_from_the_latest_time() {
        let manual = ManualClock::new(1_000);
        let clock = MonotonicClock::new(manual.clone());
        assert_eq!(clock.now_ms(), 1_000);
        manual.set(400);
        assert_eq!(clock.now_ms(), 1_000);
        assert!(clock.now_nanos() >= 1_000 * NANOS_PER_MILLI);
        manual.set(1_200);
        assert_eq!(clock.now_ms(), 1_800);
        manual.set(0);
        assert_eq!(clock.now_ms(), 1_800);
        manual.advance_ms(1);
        assert_eq!(clock.now_ms(), 1_801);
        assert_eq!(clock.now_nanos(), 1_801 * NANOS_PER_MILLI);
        assert_eq!(clock.offset_ms(), 1_800);
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
