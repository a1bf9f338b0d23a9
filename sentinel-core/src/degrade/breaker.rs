//! The circuit breaker of one degrade rule: its window of statistics and its
//! state machine.
//!
//! ```text
//!             the window's ratio or count over the threshold
//!   Closed -------------------------------------------------> Open
//!     ^                                                        |  ^
//!     |                               time_window_sec is over, |  | a probe completes badly,
//!     |                               a call probes            v  | panics or is abandoned
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

use super::rule::{DegradeGrade, DegradeRule, MAX_PROBE_NUM};
use super::window::Window;
use crate::sync::atomic::{AtomicU64, Ordering};

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

    /// A probe whose call panicked: whatever the grade, a call that unwound
    /// did not complete well, so if its half-open period is still on the
    /// breaker opens again for another `time_window_sec` (reported as a
    /// probe that completed badly). Its completion is counted in the window
    /// by [`on_complete`](Self::on_complete) without the probe.
    pub(crate) fn on_probe_panicked(
        &self,
        now_ms: u64,
        probe: Probe,
        notify: &dyn Fn(&StateChange<'_>),
    ) {
        let word = Word(self.state.load(Ordering::Acquire));
        self.settle_probe(word, probe, true, now_ms, notify);
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
#[path = "breaker_tests.rs"]
mod tests;

/// Model checks of the probe protocol (`--cfg loom`; see `crate::sync`).
#[cfg(all(test, loom))]
#[path = "breaker_loom.rs"]
mod loom_tests;
