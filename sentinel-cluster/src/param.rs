//! Cluster hot-parameter limits on this instance (a QPS hot-parameter
//! rule in cluster mode): each entry's values are counted in the flow id's
//! window in Redis, one script call per entry (`calls.rs`), waited for no
//! longer than the budget.
//!
//! Not leased: a lease per value would hold permits of the cluster's
//! window on each instance for values that may not come back (most values
//! of a hot-parameter rule are seen once), so that with three instances
//! and a per-value threshold of 10 even a lease of 2 would hold 60% of a
//! value's window; and a table of leases per value would be one more
//! bounded table to evict from. Sentinel's clients ask the token server
//! once per entry too.
//!
//! Past the budget, while Redis is down, or for a new value once the flow
//! id tracks [`ClusterConfig::param_values_cap`](crate::ClusterConfig::param_values_cap)
//! values in its window, the fallback decides: with the rule's
//! `fallback_to_local_when_fail`, each value within this instance's share
//! of its threshold in the window (its threshold divided by the most live
//! instances counted lately, or the threshold itself for avg_local),
//! counted together with what the cluster granted this instance for the
//! value (`fallback.rs`), and the rule's local check after; without it,
//! the entry passes. An entry the fallback admitted while its call was
//! still on its way is charged to the cluster's window by that call; one
//! the fallback refused that Redis counted meanwhile stays counted (the
//! cluster errs on the side of admitting less).

pub(crate) mod calls;
mod encode;
mod fallback;

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use parking_lot::Mutex;
use sentinel_flow_core::flow::TokenAnswer;
use sentinel_flow_core::param_flow::{ClusterParamFlow, ParamClusterThresholdType};

pub(crate) use encode::field_of;

use crate::call::{Call, Late};
use crate::script::ParamKeys;
use fallback::FallbackCounts;

/// The most entries of one flow id waiting for the worker; an entry past
/// it is decided by the fallback at once.
pub(crate) const MAX_PENDING_PARAMS: usize = 1_024;

/// The most values one entry asks for (the elements of a collection
/// argument); an entry with more is left to the rule's local check (or
/// passes, as the rule's `fallback_to_local_when_fail` says).
pub(crate) const MAX_VALUES_PER_ENTRY: usize = 256;

/// The rule's settings, as the script takes them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ParamSettings {
    pub(crate) window_ms: u64,
    pub(crate) samples: u32,
    pub(crate) avg_local: bool,
    pub(crate) fallback_to_local: bool,
}

impl ParamSettings {
    pub(crate) fn of(flow: &ClusterParamFlow) -> Self {
        ParamSettings {
            window_ms: flow.window_interval_ms().max(1),
            samples: flow.sample_count().max(1),
            avg_local: flow.threshold_type() == ParamClusterThresholdType::AvgLocal,
            fallback_to_local: flow.falls_back_to_local(),
        }
    }
}

/// One value an entry asks for: its encoding, threshold and permits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Asked {
    pub(crate) field: String,
    pub(crate) threshold: u64,
    pub(crate) permits: u64,
}

/// Counters of one hot-parameter flow id, for the snapshot.
#[derive(Debug, Default)]
pub(crate) struct ParamCounters {
    pub(crate) round_trips: AtomicU64,
    pub(crate) granted: AtomicU64,
    pub(crate) refused: AtomicU64,
    /// Entries with a new value past the cap on values tracked.
    pub(crate) overflows: AtomicU64,
    /// Entries decided by the fallback.
    pub(crate) fallbacks: AtomicU64,
    /// Fallback admissions charged to the cluster's window.
    pub(crate) charged: AtomicU64,
    /// Values the flow id tracked in its window at the latest call.
    pub(crate) tracked: AtomicU64,
}

/// A hot-parameter flow id's state on this instance.
#[derive(Debug)]
pub(crate) struct ParamFlow {
    pub(crate) id: u64,
    pub(crate) keys: ParamKeys,
    pub(crate) settings: Mutex<ParamSettings>,
    /// Entries waiting for the worker.
    pub(crate) pending: Mutex<VecDeque<Arc<ParamPending>>>,
    /// Live instances of the flow id, as Redis last counted them.
    instances: AtomicU64,
    /// The most live instances counted lately, and when (client's ms).
    peak: Mutex<(u64, Option<u64>)>,
    pub(crate) fallback: Mutex<FallbackCounts>,
    pub(crate) counters: ParamCounters,
}

impl ParamFlow {
    pub(crate) fn new(prefix: &str, flow: &ClusterParamFlow) -> Self {
        ParamFlow {
            id: flow.flow_id(),
            keys: ParamKeys::new(prefix, flow.flow_id()),
            settings: Mutex::new(ParamSettings::of(flow)),
            pending: Mutex::new(VecDeque::new()),
            instances: AtomicU64::new(0),
            peak: Mutex::new((0, None)),
            fallback: Mutex::new(FallbackCounts::default()),
            counters: ParamCounters::default(),
        }
    }

    /// Live instances of the flow id, as Redis last counted them.
    pub(crate) fn instances(&self) -> u64 {
        self.instances.load(Relaxed)
    }

    /// Redis counted `live` instances at `now_ms`; the fallback's share
    /// divides by the most counted within `memory_ms`.
    pub(crate) fn note_instances(&self, live: u64, memory_ms: u64, now_ms: u64) {
        self.instances.store(live, Relaxed);
        let mut peak = self.peak.lock();
        let lapsed = peak
            .1
            .is_none_or(|at| now_ms.saturating_sub(at) > memory_ms);
        if live >= peak.0 || lapsed {
            *peak = (live, Some(now_ms));
        }
    }

    /// A value's share on this instance of `threshold`.
    pub(crate) fn share(&self, threshold: u64, avg_local: bool) -> u64 {
        if avg_local {
            return threshold;
        }
        threshold.div_ceil(self.peak.lock().0.max(1))
    }

    /// Counts what the cluster granted this instance, so that the
    /// fallback's admissions in the window are within the share with them.
    pub(crate) fn note_granted(&self, asked: &[Asked], now_ms: u64) {
        let window_ms = self.settings.lock().window_ms;
        self.fallback.lock().add(asked, window_ms, now_ms);
    }
}

/// The worker's answer to an entry's call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    Granted,
    Refused,
    /// A new value past the cap on values tracked.
    Overflow,
    /// The call failed (Redis down).
    Failed,
}

/// An entry's values queued for the worker: answered with a [`State`], or
/// given up by the entry at the budget, with whether the fallback admitted
/// it (`true`: the call charges it to the cluster's window).
#[derive(Debug)]
pub(crate) struct ParamPending {
    pub(crate) asked: Vec<Asked>,
    call: Call<State, bool>,
}

impl ParamPending {
    pub(crate) fn new(asked: Vec<Asked>) -> Self {
        ParamPending {
            asked,
            call: Call::new(),
        }
    }

    /// Whether the fallback admitted the entry, once it gave up.
    pub(crate) fn abandoned(&self) -> Option<bool> {
        self.call.abandoned()
    }

    /// The worker's answer; `Some(admitted)` when the entry had given up
    /// (the answer is not its own), else `None`.
    pub(crate) fn answer(&self, state: State) -> Option<bool> {
        match self.call.answer(state) {
            Ok(()) => None,
            Err(Late::GaveUp(admitted)) => Some(admitted),
            // One call per entry: a second answer finds the first taken,
            // and charges nothing.
            Err(Late::Answered) => Some(false),
        }
    }

    /// Waits for the answer until `deadline`; past it, `decide` (the
    /// fallback) runs with the call locked, so that a late answer sees
    /// whether the entry was admitted.
    pub(crate) fn wait(
        &self,
        deadline: Instant,
        decide: impl FnOnce() -> TokenAnswer,
    ) -> Result<State, TokenAnswer> {
        self.call.wait(deadline, || {
            let answer = decide();
            (answer != TokenAnswer::Refused, answer)
        })
    }

    /// Under loom: the entry's deadline passes.
    #[cfg(all(test, sentinel_loom))]
    pub(crate) fn expire(&self) {
        self.call.expire();
    }
}
