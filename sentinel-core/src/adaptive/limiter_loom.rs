//! Model checks of the window's claim and fold (`--cfg loom`; see
//! `crate::sync`).
//!
//! The property: however three exits completing around a window's end
//! interleave (any of them stalled after its completion, or between its
//! claim and its fold, while the others run), every completion is folded into exactly one window (the
//! counts and RTT sums the algorithm heard, plus those still in the
//! current window, are the completions'), the windows folded follow one
//! another from the base (none folded twice, no call skipped), and each
//! window folded is the one its claimer found over, holds the claimer's
//! own call (not only calls of the window begun since), and was over on
//! its own calls: `window_ms` old with `min_samples` calls, or
//! [`MAX_WINDOW_SAMPLES`] calls.
//!
//! The limiter records its claims and folds, and steps on a stall point,
//! under `cfg(all(test, loom))` only ([`Trace`]).

use std::fmt;

use loom::thread::{self, ThreadId};

use super::*;
use crate::adaptive::AdaptiveAlgorithm;

const WINDOW_MS: u64 = 100;
const MIN_SAMPLES: u32 = 2;
/// Every call's RTT, in ms.
const RTT: u64 = 10;

/// An exit's claim of a window, as the exit saw it.
#[derive(Clone, Copy)]
struct Claim {
    by: ThreadId,
    now: u64,
    /// The window's start it swapped.
    start: u64,
    /// The window's base it read.
    base: u64,
    /// Its own completion word.
    completions: u64,
}

/// What the window protocol did, in the order it did it.
#[derive(Clone, Copy)]
enum Event {
    Claimed(Claim),
    /// The window from `base` to `end` (completion words) was handed to
    /// the algorithm.
    Folded {
        by: ThreadId,
        base: u64,
        end: u64,
    },
}

/// Completion words shown as their calls' count (every call takes
/// [`RTT`]: the sums tell nothing more).
impl fmt::Debug for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let calls = |word: u64| word & COUNT_MASK;
        match self {
            Event::Claimed(claim) => write!(
                f,
                "{:?} at {} ms claims the window begun at {} ms after call {} with call {}",
                claim.by,
                claim.now,
                claim.start,
                calls(claim.base),
                calls(claim.completions)
            ),
            Event::Folded { by, base, end } => write!(
                f,
                "{by:?} folds calls {}..={}",
                calls(*base) + 1,
                calls(*end)
            ),
        }
    }
}

/// The limiter's claims and folds, written by them and read by the model
/// once its threads are done (a plain mutex, which loom does not explore:
/// no loom operation runs while it is held, so each write is one step),
/// and the points where an exit may stall.
#[derive(Debug, Default)]
pub(super) struct Trace {
    events: std::sync::Mutex<Vec<Event>>,
    /// A ghost that every stall point steps on. Loom reorders threads
    /// around their conflicting steps only, and takes a thread's load
    /// followed by its own store as its last access: without this step,
    /// an exit that only reads the window after its completion would
    /// never be run after another exit's fold, nor a claimer's fold after
    /// another's claim. A relaxed read-modify-write, ordering nothing.
    stalls: AtomicU32,
}

impl Trace {
    /// An exit may stall here: after its completion, and between its
    /// claim and its fold.
    pub(super) fn stall(&self) {
        self.stalls.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn claimed(&self, now: u64, start: u64, base: u64, completions: u64) {
        self.push(Event::Claimed(Claim {
            by: thread::current().id(),
            now,
            start,
            base,
            completions,
        }));
        self.stall();
    }

    pub(super) fn folded(&self, base: u64, end: u64) {
        self.push(Event::Folded {
            by: thread::current().id(),
            base,
            end,
        });
    }

    fn push(&self, event: Event) {
        self.events.lock().unwrap().push(event);
    }

    fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }
}

/// A limiter whose window began at completion word 0 and holds `calls`
/// calls of [`RTT`] completed already, none in flight.
fn limiter(calls: u64) -> AdaptiveLimiter {
    let mut limiter = AdaptiveLimiter::new(Arc::new(AdaptiveRule {
        window_ms: WINDOW_MS,
        min_samples: MIN_SAMPLES,
        ..AdaptiveRule::new("r", AdaptiveAlgorithm::aimd())
    }));
    let done = ((calls * RTT) << COUNT_BITS) | calls;
    limiter.gate = Gate::with_completions(limiter.rule.initial_limit, done);
    limiter
}

/// Checks the property (see the module's docs) of a limiter whose window
/// began at completion word 0 and which completed `calls` calls since.
fn check_windows(limiter: &AdaptiveLimiter, calls: u64) {
    let events = limiter.trace.events();
    let mut base = 0;
    let (mut folded, mut folded_sum) = (0, 0);
    for (at, event) in events.iter().enumerate() {
        let Event::Folded {
            by,
            base: from,
            end,
        } = *event
        else {
            continue;
        };
        let claim = events[..at]
            .iter()
            .rev()
            .find_map(|event| match event {
                Event::Claimed(claim) if claim.by == by => Some(*claim),
                _ => None,
            })
            .expect("a window folded by an exit that claimed none");
        assert_eq!(
            from, base,
            "the window folded does not follow the last one on: {events:#?}"
        );
        let (count, sum) = completed_between(from, end);
        assert!(count > 0, "an empty window folded: {events:#?}");
        assert_eq!(
            claim.base, from,
            "a window folded that its claimer did not find over: {events:#?}"
        );
        let (own, _) = completed_between(from, claim.completions);
        assert!(
            0 < own && own <= count,
            "a window folded without the call of the exit that claimed it: {events:#?}"
        );
        assert!(
            (claim.now.saturating_sub(claim.start) >= WINDOW_MS && count >= u64::from(MIN_SAMPLES))
                || count >= MAX_WINDOW_SAMPLES,
            "a window folded before it was over: {count} calls: {events:#?}"
        );
        folded += count;
        folded_sum += sum;
        base = end;
    }
    assert_eq!(limiter.window_base.load(Ordering::Relaxed), base);
    let (left, left_sum) = completed_between(base, limiter.gate.completions());
    assert_eq!(
        (folded + left, folded_sum + left_sum),
        (calls, calls * RTT),
        "a completion folded twice or lost: {events:#?}"
    );
}

/// A window of `calls` calls completed already, opened by an exit at
/// `opened_at`, then three exits at `times`, each on a thread of its own.
fn exits_around_a_window_end(calls: u64, opened_at: u64, times: [u64; 3]) {
    let limiter = limiter(calls);
    for _ in 0..4 {
        assert!(limiter.try_acquire());
    }
    limiter.complete(opened_at, RTT, false);
    let limiter = loom::sync::Arc::new(limiter);
    let exits: Vec<_> = times
        .iter()
        .map(|&now| {
            let limiter = loom::sync::Arc::clone(&limiter);
            thread::spawn(move || limiter.complete(now, RTT, false))
        })
        .collect();
    for exit in exits {
        exit.join().unwrap();
    }
    check_windows(&limiter, calls + 4);
}

/// A window over by its age: an exit before its end (which finds it not
/// over unless it reads the window after a fold took its call), one at
/// its end, and one a window later (which may claim it again from the
/// start the one at its end set, before that one folded it).
#[test]
fn loom_adaptive_a_window_over_by_age_is_folded_once() {
    crate::sync::check(2, || {
        exits_around_a_window_end(0, 100, [150, 200, 300]);
    });
}

/// A window over by its count ([`MAX_WINDOW_SAMPLES`] calls, whatever
/// its age): three exits at the time it opened, one call short of the
/// bound, at it, and past it.
#[test]
fn loom_adaptive_a_window_over_by_count_is_folded_once() {
    crate::sync::check(2, || {
        exits_around_a_window_end(MAX_WINDOW_SAMPLES - 3, 1, [1, 1, 1]);
    });
}
