//! A simulated service on a `ManualClock`, driven by a deterministic load
//! generator, one simulated millisecond per step.
//!
//! The service serves `capacity` calls at once in `base_ms`; past that the
//! calls share it (processor sharing), so by Little's law a call admitted
//! with `n` calls in flight takes `base_ms × n / capacity`. Its knee is at
//! `capacity` calls in flight: below, more concurrency is more throughput
//! at the same latency; above, only more latency.
//!
//! The generator offers `offered_per_ms` calls every millisecond (more than
//! the service completes, so the limit, not the demand, bounds the calls in
//! flight); each admitted call exits when its response time is over.

use std::collections::VecDeque;

use sentinel_flow_core::adaptive::AdaptiveRule;
use sentinel_flow_core::{Entry, ManualClock, Sentinel};

use crate::support::instance;

pub(crate) const RESOURCE: &str = "svc";

/// A service and its load, on an instance of its own.
pub(crate) struct Simulation {
    pub(crate) clock: ManualClock,
    pub(crate) sentinel: Sentinel,
    pub(crate) capacity: u64,
    pub(crate) base_ms: u64,
    pub(crate) offered_per_ms: u32,
    /// Elapsed simulated time, in ms.
    pub(crate) elapsed: u64,
}

/// The limit over time: (elapsed ms, limit), every 100 ms.
pub(crate) type Trace = Vec<(u64, u32)>;

impl Simulation {
    pub(crate) fn new(rule: AdaptiveRule, capacity: u64, base_ms: u64) -> Self {
        let (clock, sentinel) = instance();
        sentinel
            .adaptive_rules()
            .load(vec![rule])
            .expect("a valid rule");
        let offered_per_ms = offered_per_ms(capacity, base_ms);
        Simulation {
            clock,
            sentinel,
            capacity,
            base_ms,
            offered_per_ms,
            elapsed: 0,
        }
    }

    /// Runs each phase (its length in ms, the service's capacity in it) in
    /// turn, with the calls in flight carried from one to the next; the
    /// limit every 100 ms.
    pub(crate) fn run_phases(&mut self, phases: &[(u64, u64)]) -> Trace {
        // Calls in flight, by the time they end (each admitted at `now`
        // ends at `now + rt`; kept in admission order, ended when due).
        let sentinel = &self.sentinel;
        let mut calls: VecDeque<(u64, Entry<'_>)> = VecDeque::new();
        let mut trace = Trace::new();
        let steps = phases
            .iter()
            .flat_map(|&(ms, capacity)| std::iter::repeat_n(capacity, ms as usize));
        for capacity in steps {
            self.capacity = capacity;
            self.clock.advance_ms(1);
            self.elapsed += 1;
            let now = self.elapsed;
            // End the calls that are due (any order: `retain` keeps the rest).
            if calls.iter().any(|(end, _)| *end <= now) {
                calls.retain(|(end, _)| *end > now);
            }
            for _ in 0..self.offered_per_ms {
                let Ok(entry) = sentinel.entry(RESOURCE) else {
                    break;
                };
                let rt = response_time(self.base_ms, self.capacity, calls.len() as u64 + 1);
                calls.push_back((now + rt, entry));
            }
            if now % 100 == 0 {
                trace.push((now, limit_of(sentinel)));
            }
        }
        // The calls still in flight end (their samples, after the run).
        drop(calls);
        trace
    }
}

/// The response time of a call admitted with `in_flight` calls in flight
/// (itself included), in ms: `base_ms` up to `capacity` calls, then shared.
pub(crate) fn response_time(base_ms: u64, capacity: u64, in_flight: u64) -> u64 {
    (base_ms * in_flight).div_ceil(capacity).max(base_ms)
}

/// The offered load: three times what the service completes at its knee,
/// in calls a millisecond.
pub(crate) fn offered_per_ms(capacity: u64, base_ms: u64) -> u32 {
    (3 * capacity).div_ceil(base_ms) as u32
}

fn limit_of(sentinel: &Sentinel) -> u32 {
    sentinel.adaptive_rules().limits()[0].1.limit
}

/// The part of `trace` from `from` ms (exclusive) to `to` ms (inclusive).
pub(crate) fn between(trace: &Trace, from: u64, to: u64) -> Trace {
    trace
        .iter()
        .copied()
        .filter(|&(at, _)| at > from && at <= to)
        .collect()
}

/// When the trace enters the band `target ± 10%` for good (from its start
/// to its end), in ms from the trace's start; `None` if it does not.
pub(crate) fn settles_within(trace: &Trace, target: u64) -> Option<u64> {
    let (lo, hi) = (target as f64 * 0.9, target as f64 * 1.1);
    let start = trace.first()?.0 - 100;
    let mut entered = None;
    for &(at, limit) in trace {
        let inside = (lo..=hi).contains(&f64::from(limit));
        match (inside, entered) {
            (true, None) => entered = Some(at - start),
            (false, Some(_)) => entered = None,
            _ => {}
        }
    }
    entered
}

/// The trace's limits every second, for a report.
pub(crate) fn per_second(trace: &Trace) -> Vec<u32> {
    trace
        .iter()
        .filter(|(at, _)| at % 1_000 == 0)
        .map(|&(_, limit)| limit)
        .collect()
}
