//! The circuit breaker of one degrade rule: its window of statistics and its
//! state machine.
//!
//! ```text
//!             the window's ratio or count over the threshold
//!   Closed -------------------------------------------------> Open
//!     ^                                                        |  ^
//!     |                               time_window_sec is over, |  | a probe completes
//!     |                               a call probes            v  | badly or is abandoned
//!     +--------------------------------------------------- HalfOpen
//!              all probe_num probes completed well
//! ```
//!
//! The state, the probes taken and completed well in the current half-open
//! period, and a generation counting half-open periods live in one atomic
//! word, so every transition and every probe admission is one
//! compare-and-swap on it: a probe is never admitted beyond `probe_num`, and
//! a transition that loses a race does nothing. A probe carries the
//! generation it was admitted in, so a probe from an earlier period that
//! completes late cannot decide the current one.
//!
//! Semantics follow Sentinel 1.8's `ResponseTimeCircuitBreaker` and
//! `ExceptionCircuitBreaker`, with `probe_num` from sentinel-golang made
//! exact: Sentinel lets one call through when half-open; sentinel-golang
//! lets every call through while half-open and closes after `probe_num`
//! completed well; here exactly `probe_num` calls are let through per
//! half-open period, the breaker closes when all of them complete well and
//! opens again at the first that completes badly or is abandoned.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::rule::{DegradeGrade, DegradeRule, MAX_PROBE_NUM};
use super::window::Window;

/// Where a circuit breaker stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BreakerState {
    /// Calls pass; completions are counted and may trip the breaker.
    Closed,
    /// Calls are refused until the open time is over.
    Open,
    /// A few probe calls were let through; their outcome closes or reopens
    /// the breaker. Other calls are refused meanwhile.
    HalfOpen,
}

impl BreakerState {
    /// A short lowercase name: `closed`, `open`, `half_open`.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

impl fmt::Display for BreakerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A circuit breaker's change of state, as reported to listeners.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StateChange<'a> {
    /// The state left.
    pub prev: BreakerState,
    /// The state entered.
    pub next: BreakerState,
    /// The rule whose breaker changed.
    pub rule: &'a DegradeRule,
    /// What opened the breaker: from closed, the slow or error ratio or the
    /// error count of the window; from half-open, `1.0` for a probe that
    /// completed badly (as Sentinel reports it). `None` for every other
    /// change, and for a probe that was abandoned.
    pub snapshot: Option<f64>,
}

/// A breaker's figures at one time, for observability.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BreakerSnapshot {
    /// The state.
    pub state: BreakerState,
    /// Calls completed in the current statistics window.
    pub total: u64,
    /// Of those, the slow ones (slow ratio grade) or the failed ones (error
    /// grades).
    pub bad: u64,
    /// When open: the time from which a call may probe, in clock ms.
    pub next_retry_ms: Option<u64>,
    /// When half-open: probes let through in this half-open period.
    pub probes_admitted: u32,
    /// When half-open: probes that completed well in this period.
    pub probes_passed: u32,
}

/// The probe a half-open breaker let through: hand it back to
/// [`CircuitBreaker::on_complete`] or [`CircuitBreaker::on_abandon`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Probe {
    generation: u32,
}

/// What a breaker says to a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Closed: the call passes.
    Pass,
    /// Half-open: the call passes as one of the probes.
    Probe(Probe),
    /// Open, or half-open with every probe taken: the call is refused.
    Block,
}

const CLOSED: u64 = 0;
const OPEN: u64 = 1;
const HALF_OPEN: u64 = 2;
const STATE_MASK: u64 = 0b11;
const PROBES_ADMITTED_SHIFT: u32 = 2;
const PROBES_PASSED_SHIFT: u32 = 17;
const GENERATION_SHIFT: u32 = 32;
const PROBE_MASK: u64 = MAX_PROBE_NUM as u64;

/// The packed state word: bits 0-1 the state, 2-16 probes admitted, 17-31
/// probes passed, 32-63 the half-open generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Word(u64);

impl Word {
    fn new(state: u64, admitted: u64, passed: u64, generation: u32) -> Word {
        Word(
            state
                | admitted << PROBES_ADMITTED_SHIFT
                | passed << PROBES_PASSED_SHIFT
                | u64::from(generation) << GENERATION_SHIFT,
        )
    }

    fn state_bits(self) -> u64 {
        self.0 & STATE_MASK
    }

    fn state(self) -> BreakerState {
        match self.state_bits() {
            CLOSED => BreakerState::Closed,
            OPEN => BreakerState::Open,
            _ => BreakerState::HalfOpen,
        }
    }

    fn admitted(self) -> u64 {
        (self.0 >> PROBES_ADMITTED_SHIFT) & PROBE_MASK
    }

    fn passed(self) -> u64 {
        (self.0 >> PROBES_PASSED_SHIFT) & PROBE_MASK
    }

    fn generation(self) -> u32 {
        (self.0 >> GENERATION_SHIFT) as u32
    }

    /// Half-open in the period of `probe`.
    fn is_probing(self, probe: Probe) -> bool {
        self.state_bits() == HALF_OPEN && self.generation() == probe.generation
    }
}

/// The breaker of one [`DegradeRule`]. One per rule; a reload that keeps the
/// rule unchanged keeps the breaker (and its state).
///
/// Time is passed in by the caller, in the instance clock's milliseconds.
/// The rule is expected to be valid; fields out of range are clamped.
#[derive(Debug)]
pub(crate) struct CircuitBreaker {
    /// Read by every entry: kept apart from the window's counters.
    state: AtomicU64,
    next_retry_ms: AtomicU64,
    grade: DegradeGrade,
    /// Slow ratio: the ratio; error grades: `count`.
    threshold: f64,
    max_rt_ms: u64,
    min_request_amount: u64,
    retry_timeout_ms: u64,
    probe_num: u64,
    rule: Arc<DegradeRule>,
    window: Window,
}

impl CircuitBreaker {
    /// A closed breaker for `rule`.
    pub(crate) fn new(rule: Arc<DegradeRule>) -> Self {
        let threshold = match rule.grade {
            DegradeGrade::SlowRequestRatio => rule.slow_ratio_threshold,
            DegradeGrade::ErrorRatio | DegradeGrade::ErrorCount => rule.count,
        };
        CircuitBreaker {
            state: AtomicU64::new(Word::new(CLOSED, 0, 0, 0).0),
            next_retry_ms: AtomicU64::new(0),
            grade: rule.grade,
            threshold,
            // Sentinel rounds the RT threshold to a whole millisecond; the
            // cast saturates (and takes NaN as 0).
            max_rt_ms: rule.count.round() as u64,
            min_request_amount: rule.min_request_amount,
            retry_timeout_ms: u64::from(rule.time_window_sec) * 1_000,
            probe_num: u64::from(rule.probe_num.clamp(1, MAX_PROBE_NUM)),
            window: Window::new(rule.stat_interval_ms),
            rule,
        }
    }

    /// The rule this breaker enforces.
    pub(crate) fn rule(&self) -> &Arc<DegradeRule> {
        &self.rule
    }

    /// The current state (the public view is [`snapshot`](Self::snapshot)).
    #[cfg(test)]
    pub(crate) fn state(&self) -> BreakerState {
        Word(self.state.load(Ordering::Acquire)).state()
    }

    /// The breaker's figures at `now_ms`.
    pub(crate) fn snapshot(&self, now_ms: u64) -> BreakerSnapshot {
        let word = Word(self.state.load(Ordering::Acquire));
        let (total, bad) = self.window.counts(now_ms);
        let state = word.state();
        let probing = state == BreakerState::HalfOpen;
        BreakerSnapshot {
            state,
            total,
            bad,
            next_retry_ms: (state == BreakerState::Open)
                .then(|| self.next_retry_ms.load(Ordering::Relaxed)),
            probes_admitted: if probing { word.admitted() as u32 } else { 0 },
            probes_passed: if probing { word.passed() as u32 } else { 0 },
        }
    }

    /// Whether a call entering at `now_ms` may pass. Closed: one load. Open
    /// once the open time is over: moves to half-open and admits the call as
    /// the first probe. Half-open: admits the call as a probe while fewer
    /// than `probe_num` were admitted in this period.
    #[inline]
    pub(crate) fn try_pass(&self, now_ms: u64, notify: &dyn Fn(&StateChange<'_>)) -> Admission {
        if self.state.load(Ordering::Relaxed) & STATE_MASK == CLOSED {
            return Admission::Pass;
        }
        self.try_pass_slow(now_ms, notify)
    }

    #[inline(never)]
    fn try_pass_slow(&self, now_ms: u64, notify: &dyn Fn(&StateChange<'_>)) -> Admission {
        let mut word = Word(self.state.load(Ordering::Acquire));
        loop {
            let next = match word.state_bits() {
                CLOSED => return Admission::Pass,
                OPEN => {
                    if now_ms < self.next_retry_ms.load(Ordering::Relaxed) {
                        return Admission::Block;
                    }
                    Word::new(HALF_OPEN, 1, 0, word.generation().wrapping_add(1))
                }
                _ => {
                    if word.admitted() >= self.probe_num {
                        return Admission::Block;
                    }
                    Word(word.0 + (1 << PROBES_ADMITTED_SHIFT))
                }
            };
            match self.swap(word, next) {
                Ok(()) => {
                    if word.state_bits() == OPEN {
                        self.announce(BreakerState::Open, BreakerState::HalfOpen, None, notify);
                    }
                    return Admission::Probe(Probe {
                        generation: next.generation(),
                    });
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Counts a call that completed at `now_ms` after `rt_ms`, with or
    /// without an error, and changes state if that decides it. `probe` is
    /// what [`try_pass`](Self::try_pass) gave the call, if it was a probe.
    ///
    /// Closed: once the window holds `min_request_amount` calls, trips when
    /// the slow ratio is over `slow_ratio_threshold` (or equals it at 1.0),
    /// the error ratio over `count`, or the error count over `count`, as
    /// Sentinel compares. Half-open: a probe of this period that completed
    /// badly reopens the breaker; the last of `probe_num` that completed well
    /// closes it. Other calls completing while half-open or open are counted
    /// but decide nothing.
    #[inline]
    pub(crate) fn on_complete(
        &self,
        now_ms: u64,
        rt_ms: u64,
        error: bool,
        probe: Option<Probe>,
        notify: &dyn Fn(&StateChange<'_>),
    ) {
        let bad = match self.grade {
            DegradeGrade::SlowRequestRatio => rt_ms > self.max_rt_ms,
            DegradeGrade::ErrorRatio | DegradeGrade::ErrorCount => error,
        };
        let total = self.window.record(now_ms, bad);
        let word = Word(self.state.load(Ordering::Acquire));
        match word.state_bits() {
            CLOSED if total >= self.min_request_amount => {
                self.check_trip(word, total, now_ms, notify);
            }
            HALF_OPEN => {
                if let Some(probe) = probe {
                    self.settle_probe(word, probe, bad, now_ms, notify);
                }
            }
            _ => {}
        }
    }

    /// A probe that will not complete: blocked by a later check, or dropped
    /// before its call ran. If its half-open period is still on, the breaker
    /// opens again for another `time_window_sec`; otherwise half-open would
    /// wait forever for it (Sentinel issue 1638).
    pub(crate) fn on_abandon(&self, now_ms: u64, probe: Probe, notify: &dyn Fn(&StateChange<'_>)) {
        let mut word = Word(self.state.load(Ordering::Acquire));
        while word.is_probing(probe) {
            match self.reopen(word, now_ms) {
                Ok(()) => {
                    self.announce(BreakerState::HalfOpen, BreakerState::Open, None, notify);
                    return;
                }
                Err(actual) => word = actual,
            }
        }
    }

    fn check_trip(&self, closed: Word, total: u64, now_ms: u64, notify: &dyn Fn(&StateChange<'_>)) {
        let bad = self.window.bad().min(total);
        let (value, trips) = match self.grade {
            DegradeGrade::SlowRequestRatio => {
                let ratio = bad as f64 / total as f64;
                // Sentinel: over the threshold, or every call slow at 1.0.
                let trips = ratio > self.threshold || (ratio == self.threshold && ratio == 1.0);
                (ratio, trips)
            }
            DegradeGrade::ErrorRatio => {
                let ratio = bad as f64 / total as f64;
                (ratio, ratio > self.threshold)
            }
            DegradeGrade::ErrorCount => (bad as f64, bad as f64 > self.threshold),
        };
        if trips && self.reopen(closed, now_ms).is_ok() {
            self.announce(
                BreakerState::Closed,
                BreakerState::Open,
                Some(value),
                notify,
            );
        }
    }

    fn settle_probe(
        &self,
        mut word: Word,
        probe: Probe,
        bad: bool,
        now_ms: u64,
        notify: &dyn Fn(&StateChange<'_>),
    ) {
        while word.is_probing(probe) {
            let settled = if bad {
                self.reopen(word, now_ms)
                    .map(|()| (BreakerState::Open, Some(1.0)))
            } else if word.passed() + 1 >= self.probe_num {
                // Empty the window before closing, so that no call completing
                // just after the close judges the figures that opened it.
                self.window.reset();
                self.swap(word, Word::new(CLOSED, 0, 0, word.generation()))
                    .map(|()| (BreakerState::Closed, None))
            } else {
                match self.swap(word, Word(word.0 + (1 << PROBES_PASSED_SHIFT))) {
                    Ok(()) => return,
                    Err(actual) => Err(actual),
                }
            };
            match settled {
                Ok((next, snapshot)) => {
                    self.announce(BreakerState::HalfOpen, next, snapshot, notify);
                    return;
                }
                Err(actual) => word = actual,
            }
        }
    }

    /// Opens the breaker from `from` (closed or half-open) until
    /// `now_ms + time_window_sec`.
    fn reopen(&self, from: Word, now_ms: u64) -> Result<(), Word> {
        // The retry time is written before the state, so a thread that sees
        // the breaker open sees its retry time. Written by a thread that
        // then loses the race, it only matters if the breaker is open, and
        // then it is a time as good as the winner's.
        self.next_retry_ms.store(
            now_ms.saturating_add(self.retry_timeout_ms),
            Ordering::Relaxed,
        );
        self.swap(from, Word::new(OPEN, 0, 0, from.generation()))
    }

    /// One compare-and-swap of the state word.
    fn swap(&self, current: Word, next: Word) -> Result<(), Word> {
        self.state
            .compare_exchange(current.0, next.0, Ordering::AcqRel, Ordering::Acquire)
            .map(drop)
            .map_err(Word)
    }

    fn announce(
        &self,
        prev: BreakerState,
        next: BreakerState,
        snapshot: Option<f64>,
        notify: &dyn Fn(&StateChange<'_>),
    ) {
        tracing::info!(
            resource = %self.rule.resource,
            rule = %self.rule,
            %prev,
            %next,
            snapshot,
            "sentinel: circuit breaker changed state"
        );
        notify(&StateChange {
            prev,
            next,
            rule: &self.rule,
            snapshot,
        });
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::sync::Barrier;
    use std::sync::atomic::AtomicUsize;

    use super::*;
    use BreakerState::{Closed, HalfOpen, Open};

    const T0: u64 = 1_700_000_000_000;

    fn breaker(rule: DegradeRule) -> CircuitBreaker {
        assert_eq!(rule.validate(0), Ok(()));
        CircuitBreaker::new(Arc::new(rule))
    }

    fn slow_rule(max_rt: f64, ratio: f64) -> DegradeRule {
        DegradeRule {
            slow_ratio_threshold: ratio,
            ..DegradeRule::new("res", DegradeGrade::SlowRequestRatio, max_rt)
        }
    }

    fn quiet(_: &StateChange<'_>) {}

    /// Records every change reported: `(prev, next, snapshot)`.
    #[derive(Default)]
    struct Changes(RefCell<Vec<(BreakerState, BreakerState, Option<f64>)>>);

    impl Changes {
        fn listener(&self) -> impl Fn(&StateChange<'_>) + '_ {
            |change| {
                assert_eq!(change.rule.resource, "res");
                self.0
                    .borrow_mut()
                    .push((change.prev, change.next, change.snapshot));
            }
        }

        fn take(&self) -> Vec<(BreakerState, BreakerState, Option<f64>)> {
            std::mem::take(&mut self.0.borrow_mut())
        }
    }

    /// Completes calls at `now`: `true` for a bad one (slow, or an error).
    fn complete(cb: &CircuitBreaker, now: u64, calls: &[bool]) {
        for &bad in calls {
            let rt = if bad { cb.max_rt_ms + 1 } else { cb.max_rt_ms };
            cb.on_complete(now, rt, bad, None, &quiet);
        }
    }

    fn probe(cb: &CircuitBreaker, now: u64) -> Probe {
        match cb.try_pass(now, &quiet) {
            Admission::Probe(probe) => probe,
            other => panic!("expected a probe at {now}, got {other:?} in {}", cb.state()),
        }
    }

    fn trip(cb: &CircuitBreaker, now: u64) {
        complete(cb, now, &[true; 5]);
        assert_eq!(cb.state(), Open);
    }

    #[test]
    fn closed_passes_and_counts() {
        let cb = breaker(slow_rule(100.0, 0.5));
        assert_eq!(cb.try_pass(T0, &quiet), Admission::Pass);
        complete(&cb, T0, &[true, false, false]);
        let snap = cb.snapshot(T0);
        assert_eq!((snap.state, snap.total, snap.bad), (Closed, 3, 1));
        assert_eq!(snap.next_retry_ms, None);
    }

    #[test]
    fn slow_means_rt_over_the_rounded_count() {
        let cb = breaker(slow_rule(10.4, 0.0));
        cb.on_complete(T0, 10, false, None, &quiet);
        assert_eq!(cb.snapshot(T0).bad, 0);
        cb.on_complete(T0, 11, false, None, &quiet);
        assert_eq!(cb.snapshot(T0).bad, 1);
        let cb = breaker(slow_rule(10.5, 0.0));
        cb.on_complete(T0, 11, false, None, &quiet);
        assert_eq!(cb.snapshot(T0).bad, 0);
        // An error is not slow.
        cb.on_complete(T0, 0, true, None, &quiet);
        assert_eq!(cb.snapshot(T0).bad, 0);
    }

    #[test]
    fn slow_ratio_trips_over_the_threshold_only() {
        let changes = Changes::default();
        let cb = breaker(slow_rule(100.0, 0.5));
        // 3 slow of 6 is 0.5: not over.
        for (i, rt) in [50, 50, 50, 200, 200, 200].into_iter().enumerate() {
            cb.on_complete(T0 + i as u64, rt, false, None, &changes.listener());
        }
        assert_eq!(cb.state(), Closed);
        // 4 of 7 is over.
        cb.on_complete(T0 + 10, 101, false, None, &changes.listener());
        assert_eq!(cb.state(), Open);
        assert_eq!(changes.take(), vec![(Closed, Open, Some(4.0 / 7.0))]);
    }

    #[test]
    fn slow_ratio_of_one_trips_when_every_call_is_slow() {
        let changes = Changes::default();
        let cb = breaker(slow_rule(100.0, 1.0));
        complete(&cb, T0, &[true, true, true, true, false, true, true]);
        assert_eq!(cb.state(), Closed, "6 of 7 slow is under 1.0");

        let cb = breaker(slow_rule(100.0, 1.0));
        complete(&cb, T0, &[true; 4]);
        assert_eq!(cb.state(), Closed, "under min_request_amount");
        cb.on_complete(T0, 101, false, None, &changes.listener());
        assert_eq!(cb.state(), Open);
        assert_eq!(changes.take(), vec![(Closed, Open, Some(1.0))]);
    }

    #[test]
    fn slow_ratio_of_zero_trips_at_the_first_slow_call() {
        let cb = breaker(slow_rule(100.0, 0.0));
        complete(&cb, T0, &[false; 10]);
        assert_eq!(cb.state(), Closed, "a ratio of 0 is not over 0");
        complete(&cb, T0, &[true]);
        assert_eq!(cb.state(), Open);
    }

    #[test]
    fn error_ratio_trips_over_count_only() {
        let changes = Changes::default();
        let cb = breaker(DegradeRule::new("res", DegradeGrade::ErrorRatio, 0.5));
        complete(&cb, T0, &[true, false, true, false]);
        assert_eq!(cb.state(), Closed, "under min_request_amount");
        complete(&cb, T0, &[false, true]);
        assert_eq!(cb.state(), Closed, "3 of 6 is not over 0.5");
        cb.on_complete(T0, 0, true, None, &changes.listener());
        assert_eq!(cb.state(), Open);
        assert_eq!(changes.take(), vec![(Closed, Open, Some(4.0 / 7.0))]);
        // Slowness does not count.
        let cb = breaker(DegradeRule::new("res", DegradeGrade::ErrorRatio, 0.0));
        for _ in 0..10 {
            cb.on_complete(T0, 1_000_000, false, None, &quiet);
        }
        assert_eq!(cb.state(), Closed);
    }

    #[test]
    fn error_count_trips_over_count_only() {
        let changes = Changes::default();
        let rule = DegradeRule {
            min_request_amount: 3,
            ..DegradeRule::new("res", DegradeGrade::ErrorCount, 2.0)
        };
        let cb = breaker(rule);
        complete(&cb, T0, &[true, true]);
        assert_eq!(cb.state(), Closed, "2 errors, under min_request_amount");
        complete(&cb, T0, &[false, false, false]);
        assert_eq!(cb.state(), Closed, "2 errors is not over 2");
        cb.on_complete(T0, 0, true, None, &changes.listener());
        assert_eq!(cb.state(), Open);
        assert_eq!(changes.take(), vec![(Closed, Open, Some(3.0))]);
    }

    #[test]
    fn min_request_amount_is_respected() {
        let rule = DegradeRule {
            min_request_amount: 20,
            ..DegradeRule::new("res", DegradeGrade::ErrorRatio, 0.1)
        };
        let cb = breaker(rule);
        complete(&cb, T0, &[true; 19]);
        assert_eq!(cb.state(), Closed);
        complete(&cb, T0, &[false]);
        assert_eq!(cb.state(), Open);
    }

    #[test]
    fn a_new_window_starts_the_count_again() {
        let cb = breaker(DegradeRule::new("res", DegradeGrade::ErrorCount, 4.0));
        // 4 errors late in one window, 4 early in the next: never 5 in one.
        complete(&cb, T0 + 900, &[true; 4]);
        complete(&cb, T0 + 1_000, &[true; 4]);
        assert_eq!(cb.state(), Closed);
        assert_eq!(
            (cb.snapshot(T0 + 1_000).total, cb.snapshot(T0 + 1_000).bad),
            (4, 4)
        );
        assert_eq!(cb.snapshot(T0 + 2_000).total, 0);
        complete(&cb, T0 + 1_999, &[true]);
        assert_eq!(cb.state(), Open);
    }

    #[test]
    fn the_stat_interval_sets_the_window() {
        let rule = DegradeRule {
            stat_interval_ms: 10_000,
            ..DegradeRule::new("res", DegradeGrade::ErrorCount, 4.0)
        };
        let cb = breaker(rule);
        for i in 0..5 {
            complete(&cb, T0 + i * 1_500, &[true]);
        }
        assert_eq!(cb.state(), Open);
    }

    #[test]
    fn open_blocks_until_the_retry_time_then_a_good_probe_closes() {
        let changes = Changes::default();
        let cb = breaker(slow_rule(100.0, 0.5));
        complete(&cb, T0, &[true; 5]);
        assert_eq!(cb.snapshot(T0).next_retry_ms, Some(T0 + 10_000));
        // Completions of calls let through before the trip are counted but
        // change nothing.
        complete(&cb, T0 + 1, &[false; 20]);
        assert_eq!(cb.state(), Open);
        assert_eq!(cb.snapshot(T0 + 1).total, 25);

        assert_eq!(
            cb.try_pass(T0 + 9_999, &changes.listener()),
            Admission::Block
        );
        assert!(changes.take().is_empty());
        let p = match cb.try_pass(T0 + 10_000, &changes.listener()) {
            Admission::Probe(p) => p,
            other => panic!("{other:?}"),
        };
        assert_eq!(changes.take(), vec![(Open, HalfOpen, None)]);
        assert_eq!(cb.try_pass(T0 + 10_001, &quiet), Admission::Block);
        let snap = cb.snapshot(T0 + 10_001);
        assert_eq!(
            (snap.state, snap.probes_admitted, snap.probes_passed),
            (HalfOpen, 1, 0)
        );
        assert_eq!(snap.next_retry_ms, None);

        cb.on_complete(T0 + 10_050, 100, false, Some(p), &changes.listener());
        assert_eq!(changes.take(), vec![(HalfOpen, Closed, None)]);
        assert_eq!(cb.try_pass(T0 + 10_051, &quiet), Admission::Pass);
        // The window was emptied on closing: the same interval's figures
        // start from the probe's successors.
        assert_eq!(cb.snapshot(T0 + 10_050).total, 0);
        complete(&cb, T0 + 10_060, &[true; 4]);
        assert_eq!(cb.state(), Closed, "4 calls are under min_request_amount");
    }

    #[test]
    fn a_bad_probe_opens_again_for_a_whole_window() {
        let changes = Changes::default();
        let cb = breaker(DegradeRule::new("res", DegradeGrade::ErrorRatio, 0.5));
        trip(&cb, T0);
        let p = probe(&cb, T0 + 10_000);
        cb.on_complete(T0 + 10_300, 5, true, Some(p), &changes.listener());
        assert_eq!(changes.take(), vec![(HalfOpen, Open, Some(1.0))]);
        assert_eq!(cb.snapshot(T0 + 10_300).next_retry_ms, Some(T0 + 20_300));
        assert_eq!(cb.try_pass(T0 + 20_299, &quiet), Admission::Block);
        let p = probe(&cb, T0 + 20_300);
        cb.on_complete(T0 + 20_301, 5, false, Some(p), &quiet);
        assert_eq!(cb.state(), Closed);
    }

    #[test]
    fn a_slow_probe_opens_again() {
        let cb = breaker(slow_rule(100.0, 0.5));
        trip(&cb, T0);
        let p = probe(&cb, T0 + 10_000);
        // An error is not what this grade judges; slowness is.
        cb.on_complete(T0 + 10_001, 100, true, Some(p), &quiet);
        assert_eq!(cb.state(), Closed);
        trip(&cb, T0 + 20_000);
        let p = probe(&cb, T0 + 30_000);
        cb.on_complete(T0 + 30_200, 101, false, Some(p), &quiet);
        assert_eq!(cb.state(), Open);
    }

    #[test]
    fn calls_other_than_probes_do_not_decide_half_open() {
        let cb = breaker(DegradeRule::new("res", DegradeGrade::ErrorCount, 1.0));
        trip(&cb, T0);
        let p = probe(&cb, T0 + 10_000);
        // Calls let through before the trip, completing now.
        complete(&cb, T0 + 10_001, &[true, false, true]);
        assert_eq!(cb.state(), HalfOpen);
        assert_eq!(cb.snapshot(T0 + 10_001).total, 3);
        cb.on_complete(T0 + 10_002, 0, false, Some(p), &quiet);
        assert_eq!(cb.state(), Closed);
    }

    #[test]
    fn three_probes_close_only_when_all_complete_well() {
        let changes = Changes::default();
        let rule = DegradeRule {
            probe_num: 3,
            ..DegradeRule::new("res", DegradeGrade::ErrorRatio, 0.5)
        };
        let cb = breaker(rule);
        trip(&cb, T0);
        let probes = [
            probe(&cb, T0 + 10_000),
            probe(&cb, T0 + 10_000),
            probe(&cb, T0 + 10_001),
        ];
        assert_eq!(cb.try_pass(T0 + 10_001, &quiet), Admission::Block);
        cb.on_complete(T0 + 10_002, 1, false, Some(probes[0]), &quiet);
        cb.on_complete(T0 + 10_003, 1, false, Some(probes[1]), &quiet);
        let snap = cb.snapshot(T0 + 10_003);
        assert_eq!(
            (snap.state, snap.probes_admitted, snap.probes_passed),
            (HalfOpen, 3, 2)
        );
        assert_eq!(cb.try_pass(T0 + 10_003, &quiet), Admission::Block);
        changes.take();
        cb.on_complete(T0 + 10_004, 1, false, Some(probes[2]), &changes.listener());
        assert_eq!(changes.take(), vec![(HalfOpen, Closed, None)]);
    }

    #[test]
    fn one_bad_probe_of_three_reopens_and_late_ones_decide_nothing() {
        let rule = DegradeRule {
            probe_num: 3,
            ..DegradeRule::new("res", DegradeGrade::ErrorRatio, 0.5)
        };
        let cb = breaker(rule);
        trip(&cb, T0);
        let first = [
            probe(&cb, T0 + 10_000),
            probe(&cb, T0 + 10_000),
            probe(&cb, T0 + 10_000),
        ];
        cb.on_complete(T0 + 10_001, 1, false, Some(first[0]), &quiet);
        cb.on_complete(T0 + 10_002, 1, true, Some(first[1]), &quiet);
        assert_eq!(cb.state(), Open);
        // The third probe of that period completes well while open, then
        // during the next half-open period: neither closes the breaker.
        cb.on_complete(T0 + 10_003, 1, false, Some(first[2]), &quiet);
        assert_eq!(cb.state(), Open);
        let second = probe(&cb, T0 + 20_002);
        cb.on_complete(T0 + 20_003, 1, false, Some(first[2]), &quiet);
        cb.on_abandon(T0 + 20_003, first[2], &quiet);
        let snap = cb.snapshot(T0 + 20_003);
        assert_eq!(
            (snap.state, snap.probes_admitted, snap.probes_passed),
            (HalfOpen, 1, 0)
        );
        cb.on_complete(T0 + 20_004, 1, false, Some(second), &quiet);
        assert_eq!(cb.state(), HalfOpen, "1 of 3 probes of this period");
    }

    /// Sentinel issue 1638: the probe is blocked by a later rule, so it never
    /// completes.
    #[test]
    fn an_abandoned_probe_does_not_leave_the_breaker_half_open() {
        let changes = Changes::default();
        let cb = breaker(slow_rule(50.0, 0.5));
        trip(&cb, T0);
        let p = probe(&cb, T0 + 10_000);
        cb.on_abandon(T0 + 10_000, p, &changes.listener());
        assert_eq!(changes.take(), vec![(HalfOpen, Open, None)]);
        assert_eq!(cb.snapshot(T0 + 10_000).next_retry_ms, Some(T0 + 20_000));
        assert_eq!(cb.try_pass(T0 + 19_999, &quiet), Admission::Block);
        // After another time window it probes again.
        let Admission::Probe(p) = cb.try_pass(T0 + 20_000, &changes.listener()) else {
            panic!("no probe after the second open time");
        };
        assert_eq!(cb.try_pass(T0 + 20_000, &quiet), Admission::Block);
        cb.on_complete(T0 + 20_010, 10, false, Some(p), &changes.listener());
        assert_eq!(
            changes.take(),
            vec![(Open, HalfOpen, None), (HalfOpen, Closed, None)]
        );
        // Abandoning it late changes nothing.
        cb.on_abandon(T0 + 20_011, p, &changes.listener());
        assert_eq!(cb.state(), Closed);
        assert!(changes.take().is_empty());
    }

    #[test]
    fn a_late_clock_reading_never_corrupts_state() {
        let cb = breaker(DegradeRule::new("res", DegradeGrade::ErrorCount, 0.0));
        complete(&cb, T0, &[false; 4]);
        // A completion read the clock before the window began.
        complete(&cb, T0 - 5_000, &[true]);
        assert_eq!(cb.state(), Open);
        assert_eq!(cb.snapshot(T0).total, 5);
        assert_eq!(cb.try_pass(0, &quiet), Admission::Block);
        assert_eq!(
            cb.try_pass(u64::MAX, &quiet),
            Admission::Probe(Probe { generation: 1 })
        );
    }

    /// Threads released at once ask a half-open breaker for probes, over
    /// several half-open periods: exactly `probe_num` get one each period.
    fn exactly_probe_num_under_threads(probe_num: u32) {
        const THREADS: usize = 8;
        const PERIODS: u64 = 20;
        let rule = DegradeRule {
            probe_num,
            ..DegradeRule::new("res", DegradeGrade::ErrorCount, 0.0)
        };
        let cb = breaker(rule);
        let opened = AtomicUsize::new(0);
        let on_change = |c: &StateChange<'_>| {
            if c.next == HalfOpen {
                opened.fetch_add(1, Ordering::Relaxed);
            }
        };
        cb.on_complete(T0, 0, true, None, &quiet);
        complete(&cb, T0, &[false; 4]);
        assert_eq!(cb.state(), Open);
        let barrier = Barrier::new(THREADS);
        let mut now = T0;
        for period in 1..=PERIODS {
            now += 10_000;
            let probes: Vec<Vec<Probe>> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..THREADS)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            (0..200)
                                .filter_map(|_| match cb.try_pass(now, &on_change) {
                                    Admission::Probe(p) => Some(p),
                                    Admission::Block => None,
                                    Admission::Pass => panic!("passed while not closed"),
                                })
                                .collect()
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            let probes: Vec<Probe> = probes.into_iter().flatten().collect();
            assert_eq!(probes.len(), probe_num as usize, "period {period}");
            assert_eq!(opened.load(Ordering::Relaxed), period as usize);
            // The last probe completes badly: open again for the next period.
            for (i, &p) in probes.iter().enumerate() {
                let bad = i + 1 == probes.len();
                cb.on_complete(now, 0, bad, Some(p), &quiet);
            }
            assert_eq!(cb.state(), Open, "period {period}");
        }
    }

    #[test]
    fn exactly_one_probe_under_eight_threads() {
        exactly_probe_num_under_threads(1);
    }

    #[test]
    fn exactly_three_probes_under_eight_threads() {
        exactly_probe_num_under_threads(3);
    }

    #[test]
    fn states_display_in_lowercase() {
        assert_eq!(Closed.to_string(), "closed");
        assert_eq!(Open.to_string(), "open");
        assert_eq!(HalfOpen.to_string(), "half_open");
    }
}
