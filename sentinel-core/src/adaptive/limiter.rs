//! `AdaptiveLimiter`: one adaptive rule compiled: its gate (the limit and
//! the calls admitted and completed, with the completed calls' RTT sum,
//! `gate.rs`), the start of the current window, and the algorithm's state.
//!
//! Every exit gives its sample and frees its place with one atomic
//! addition to the gate's completion word (the count and the RTT sum in
//! one word), a read of the window's lowest RTT (lowered by one atomic
//! operation only when the call beats it), and a flag store on a failure. The window is the completions
//! since the completion word at its start. The exit that finds the window
//! over (at least `window_ms` old, with at least `min_samples` calls, or
//! [`MAX_WINDOW_SAMPLES`] calls whatever its age) claims it by a
//! compare-and-swap of its start, and folds it into the algorithm under a
//! lock no admission takes, then stores the new limit in the gate. The
//! window's base moves only under that lock: a claim whose base moved
//! before it took the lock (another exit claimed and folded the same
//! window) folds nothing, and an exit whose completion is older than the
//! base (its call was folded already) claims nothing.

use std::sync::Arc;

use super::algorithm::{Estimator, Sample};
use super::gate::{COUNT_BITS, COUNT_MASK, Gate, completed_between};
use super::rule::{ADAPTIVE_APP_DEFAULT, ADAPTIVE_APP_OTHER, AdaptiveRule};
use crate::sync::Mutex;
use crate::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// A sample's RTT is taken as at most this many ms (about 65 s), so that
/// the RTT sum of `2^COUNT_BITS` samples fits the sum's bits.
pub(crate) const MAX_SAMPLE_RTT_MS: u64 = (1 << (64 - 2 * COUNT_BITS)) - 1;
/// A window with this many samples folds whatever its age (far below the
/// `2^(COUNT_BITS - 1)` past which a count between the window's base and an
/// exit's completion word reads as an exit that completed before the base).
const MAX_WINDOW_SAMPLES: u64 = 1 << 22;

/// Whom a rule counts.
#[derive(Debug)]
pub(crate) enum Callers {
    Every,
    Other,
    Origin(Box<str>),
}

/// What an adaptive rule shows of its state.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub struct AdaptiveSnapshot {
    /// The limit in force.
    pub limit: u32,
    /// Calls admitted under the rule and not exited yet.
    pub in_flight: u32,
    /// The RTT the algorithm compares windows against, in ms: Gradient2's
    /// long-term average, Vegas's no-load RTT; 0 for AIMD and before the
    /// first window.
    pub reference_rtt_ms: f64,
    /// The average RTT of the last window folded, in ms (0 before any).
    pub last_rtt_ms: f64,
}

/// One adaptive rule with its learned state.
#[derive(Debug)]
pub(crate) struct AdaptiveLimiter {
    rule: Arc<AdaptiveRule>,
    pub(crate) callers: Callers,
    gate: Gate,
    /// When the current window began, in ms (0: no sample yet).
    window_start: AtomicU64,
    /// The gate's completion word when the current window began.
    window_base: AtomicU64,
    max_in_flight: AtomicU32,
    /// The window's lowest RTT, in ms (`u64::MAX`: none yet).
    min_rtt: AtomicU64,
    dropped: AtomicBool,
    /// The last folded window's average RTT, as `f64` bits.
    last_rtt: AtomicU64,
    estimator: Mutex<Estimator>,
    /// The claims and folds, in order, for the model's check.
    #[cfg(all(test, loom))]
    trace: loom_tests::Trace,
}

impl AdaptiveLimiter {
    pub(crate) fn new(rule: Arc<AdaptiveRule>) -> Self {
        let callers = match rule.limit_app.as_str() {
            ADAPTIVE_APP_DEFAULT => Callers::Every,
            ADAPTIVE_APP_OTHER => Callers::Other,
            origin => Callers::Origin(origin.into()),
        };
        AdaptiveLimiter {
            callers,
            gate: Gate::new(rule.initial_limit),
            window_start: AtomicU64::new(0),
            window_base: AtomicU64::new(0),
            max_in_flight: AtomicU32::new(0),
            min_rtt: AtomicU64::new(u64::MAX),
            dropped: AtomicBool::new(false),
            last_rtt: AtomicU64::new(0),
            estimator: Mutex::new(Estimator::new(&rule)),
            #[cfg(all(test, loom))]
            trace: loom_tests::Trace::default(),
            rule,
        }
    }

    pub(crate) fn rule(&self) -> &Arc<AdaptiveRule> {
        &self.rule
    }

    /// Whether the rule counts a call from `origin` (`named`: whether
    /// another adaptive rule of the resource names it).
    #[inline]
    pub(crate) fn counts(&self, origin: &str, named: impl FnOnce(&str) -> bool) -> bool {
        match &self.callers {
            Callers::Every => true,
            Callers::Origin(name) => **name == *origin,
            Callers::Other => !origin.is_empty() && !named(origin),
        }
    }

    /// Admits one call if fewer than the limit are in flight, keeping the
    /// most calls in flight of the window.
    #[inline]
    pub(crate) fn try_acquire(&self) -> bool {
        let Some((_, in_flight)) = self.gate.try_acquire() else {
            return false;
        };
        // A read first: the most is seldom raised, and a read-modify-write
        // on every admission would cost as much as the admission.
        if in_flight > self.max_in_flight.load(Ordering::Relaxed) {
            self.max_in_flight.fetch_max(in_flight, Ordering::Relaxed);
        }
        true
    }

    /// Takes back the place of an admitted call that will not run: no
    /// sample.
    #[inline]
    pub(crate) fn give_back(&self) {
        self.gate.give_back();
    }

    /// Completes an admitted call at `now` (ms): hears its RTT and whether
    /// it failed, and frees its place; folds the window if it is over.
    pub(crate) fn complete(&self, now: u64, rt: u64, failed: bool) {
        if failed {
            self.dropped.store(true, Ordering::Relaxed);
        }
        let rt = rt.min(MAX_SAMPLE_RTT_MS);
        // A read first: the lowest is seldom lowered once the window is
        // under way.
        if rt < self.min_rtt.load(Ordering::Relaxed) {
            self.min_rtt.fetch_min(rt, Ordering::Relaxed);
        }
        let completions = self.gate.complete(rt);
        #[cfg(all(test, loom))]
        self.trace.stall();
        self.end_window_if_over(now, completions);
    }

    /// Folds the window if an exit at `now` whose completion left the
    /// completion word at `completions` finds it over.
    #[inline]
    fn end_window_if_over(&self, now: u64, completions: u64) {
        let start = self.window_start.load(Ordering::Relaxed);
        if start == 0 {
            let _ = self.window_start.compare_exchange(
                0,
                now.max(1),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
            return;
        }
        let base = self.window_base.load(Ordering::Relaxed);
        let (count, _) = completed_between(base, completions);
        if count > COUNT_MASK / 2 {
            // The base is past this call's completion: a fold since took
            // the window with this call in it, and the next one has just
            // begun (read as a count, the gap wraps to nearly
            // `2^COUNT_BITS`).
            return;
        }
        let due = (now.saturating_sub(start) >= self.rule.window_ms
            && count >= u64::from(self.rule.min_samples))
            || count >= MAX_WINDOW_SAMPLES;
        if due
            && self
                .window_start
                .compare_exchange(start, now.max(1), Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            #[cfg(all(test, loom))]
            self.trace.claimed(now, start, base, completions);
            self.fold(base);
        }
    }

    /// Folds the window this thread claimed, found over from `base`.
    #[cold]
    fn fold(&self, base: u64) {
        let mut estimator = self.estimator.lock();
        if self.window_base.load(Ordering::Relaxed) != base {
            // Another exit claimed the window too (it read the start this
            // one set and the base before its fold) and folded it first:
            // the window since has just begun.
            return;
        }
        let completions = self.gate.completions();
        self.window_base.store(completions, Ordering::Relaxed);
        let (count, sum) = completed_between(base, completions);
        if count == 0 {
            return;
        }
        #[cfg(all(test, loom))]
        self.trace.folded(base, completions);
        let (_, now_in_flight) = self.gate.read();
        let rtt = (sum as f64 / count as f64).max(1.0);
        let min_rtt = self.min_rtt.swap(u64::MAX, Ordering::Relaxed);
        let sample = Sample {
            rtt,
            // At most the average (a call of the next window may have
            // lowered it after the sums were taken).
            min_rtt: (min_rtt as f64).clamp(1.0, rtt),
            in_flight: self.max_in_flight.swap(now_in_flight, Ordering::Relaxed),
            dropped: self.dropped.swap(false, Ordering::Relaxed),
        };
        self.last_rtt.store(sample.rtt.to_bits(), Ordering::Relaxed);
        let before = estimator.limit();
        let limit = estimator.update(sample);
        self.gate.set_limit(limit);
        if limit != before {
            tracing::debug!(
                resource = %self.rule.resource,
                algorithm = self.rule.algorithm.name(),
                limit,
                before,
                rtt_ms = sample.rtt,
                min_rtt_ms = sample.min_rtt,
                reference_rtt_ms = estimator.reference_rtt(),
                in_flight = sample.in_flight,
                dropped = sample.dropped,
                "adaptive limit changed"
            );
        }
    }

    /// The rule's state now.
    pub(crate) fn snapshot(&self) -> AdaptiveSnapshot {
        let reference_rtt_ms = self.estimator.lock().reference_rtt();
        let (limit, in_flight) = self.gate.read();
        AdaptiveSnapshot {
            limit,
            in_flight,
            reference_rtt_ms,
            last_rtt_ms: f64::from_bits(self.last_rtt.load(Ordering::Relaxed)),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::adaptive::AdaptiveAlgorithm;

    fn limiter(rule: AdaptiveRule) -> AdaptiveLimiter {
        AdaptiveLimiter::new(Arc::new(rule))
    }

    #[test]
    fn a_window_folds_once_it_is_old_enough_and_has_its_samples() {
        let l = limiter(AdaptiveRule {
            min_samples: 3,
            ..AdaptiveRule::new("r", AdaptiveAlgorithm::aimd())
        });
        for _ in 0..20 {
            assert!(l.try_acquire());
        }
        // Opens the window at 1000.
        l.complete(1_000, 10, false);
        l.complete(2_000, 10, false);
        // Old enough but two samples: goes on.
        assert_eq!(l.snapshot().limit, 20);
        l.complete(2_000, 10, false);
        // Three samples, 20 in flight: AIMD adds one.
        assert_eq!(l.snapshot().limit, 21);
        assert_eq!(l.snapshot().last_rtt_ms, 10.0);
        // Each completion freed its place.
        assert_eq!(l.snapshot().in_flight, 17);
        for _ in 0..3 {
            l.give_back();
        }
        assert_eq!(l.snapshot().in_flight, 14);
        // The next window counts its own samples alone.
        l.complete(2_500, 40, false);
        l.complete(2_500, 40, false);
        assert_eq!(l.snapshot().last_rtt_ms, 10.0, "not old enough yet");
        l.complete(3_000, 40, false);
        assert_eq!(l.snapshot().last_rtt_ms, 40.0);
        assert_eq!(l.snapshot().in_flight, 11);
    }

    #[test]
    fn a_window_hands_the_algorithm_its_fastest_call_beside_its_average() {
        let l = limiter(AdaptiveRule {
            min_samples: 3,
            ..AdaptiveRule::new("r", AdaptiveAlgorithm::vegas())
        });
        l.complete(1_000, 10, false);
        l.complete(1_500, 50, false);
        l.complete(2_000, 30, false);
        // Vegas's no-load RTT is the fastest call, the window's RTT the
        // average.
        let snapshot = l.snapshot();
        assert_eq!(
            (snapshot.reference_rtt_ms, snapshot.last_rtt_ms),
            (10.0, 30.0)
        );
        // The next window starts its lowest afresh.
        assert_eq!(l.min_rtt.load(Ordering::Relaxed), u64::MAX);
        l.complete(2_500, 40, false);
        assert_eq!(l.min_rtt.load(Ordering::Relaxed), 40);
    }

    /// An exit whose completion lands before a fold reads the window
    /// after it: the base it reads is newer than its completion word, and
    /// the count between them wraps to `2^COUNT_BITS` less a few. It must
    /// not fold the next window, which has just begun.
    #[test]
    fn an_exit_that_reads_the_window_after_a_fold_does_not_fold_the_next_window() {
        let l = limiter(AdaptiveRule {
            window_ms: 100,
            min_samples: 1,
            ..AdaptiveRule::new("r", AdaptiveAlgorithm::aimd())
        });
        // Opens the window at 1 ms.
        l.complete(1, 10, false);
        // A call completes (10 ms) and its thread stalls before it looks at
        // the window.
        let late = l.gate.complete(10);
        // Another exit finds the window over and folds it: three calls of
        // 10 ms.
        l.complete(200, 10, false);
        assert_eq!(l.snapshot().last_rtt_ms, 10.0);
        // The next window's first call.
        l.complete(200, 70, false);
        // The stalled exit looks at the window now.
        l.end_window_if_over(200, late);
        assert_eq!(
            l.snapshot().last_rtt_ms,
            10.0,
            "a window 0 ms old of one call was folded"
        );
    }

    /// Two exits claim one window: the first finds it over and stalls
    /// before its fold; the second reads the start the first set and the
    /// base not yet moved, finds `MAX_WINDOW_SAMPLES` calls, and folds.
    /// The first must not fold the window begun since.
    #[test]
    fn an_exit_that_claimed_a_window_another_folded_does_not_fold_the_next() {
        let l = limiter(AdaptiveRule {
            window_ms: 100,
            min_samples: 1,
            ..AdaptiveRule::new("r", AdaptiveAlgorithm::aimd())
        });
        // Opens the window at 1 ms, then fills it.
        l.complete(1, 10, false);
        for _ in 0..MAX_WINDOW_SAMPLES {
            l.gate.complete(10);
        }
        // The first exit claims the window (at 2 ms) and stalls.
        let base = l.window_base.load(Ordering::Relaxed);
        let start = l.window_start.load(Ordering::Relaxed);
        l.window_start
            .compare_exchange(start, 2, Ordering::AcqRel, Ordering::Relaxed)
            .unwrap();
        // The second finds it full and folds it.
        l.complete(2, 10, false);
        assert_eq!(l.snapshot().last_rtt_ms, 10.0);
        // The next window's first call; then the first exit goes on.
        l.complete(2, 70, false);
        l.fold(base);
        assert_eq!(
            l.snapshot().last_rtt_ms,
            10.0,
            "a window 0 ms old of one call was folded"
        );
    }

    #[test]
    fn an_rtt_past_the_sample_bound_is_taken_at_the_bound() {
        let l = limiter(AdaptiveRule {
            min_samples: 1,
            ..AdaptiveRule::new("r", AdaptiveAlgorithm::aimd())
        });
        assert!(l.try_acquire() && l.try_acquire());
        l.complete(1, u64::MAX, false);
        l.complete(2_000, u64::MAX, false);
        assert_eq!(l.snapshot().in_flight, 0);
        let rtt = l.snapshot().last_rtt_ms;
        assert_eq!(rtt, MAX_SAMPLE_RTT_MS as f64);
    }
}

/// Model checks of the window's claim and fold (`--cfg loom`; see
/// `crate::sync`).
#[cfg(all(test, loom))]
#[path = "limiter_loom.rs"]
mod loom_tests;
