//! One flow id on this instance: its lease, the rule's settings the worker
//! sends, the latest answer of Redis, and where waiting entries park.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};
use sentinel_flow_core::flow::{ClusterFlow, ClusterThresholdType};

use crate::lease::Lease;
use crate::ledger::{self, Ledger};
use crate::script::{FlowKeys, Grant};

/// The rule's settings, as the acquire script takes them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Params {
    pub(crate) count: f64,
    pub(crate) avg_local: bool,
    pub(crate) window_ms: u64,
    pub(crate) samples: u32,
}

impl Params {
    pub(crate) fn of(flow: &ClusterFlow) -> Self {
        Params {
            count: flow.count(),
            avg_local: flow.threshold_type() == ClusterThresholdType::AvgLocal,
            window_ms: flow.window_interval_ms(),
            samples: flow.sample_count(),
        }
    }
}

/// A flow id's state on this instance.
#[derive(Debug)]
pub(crate) struct Flow {
    pub(crate) id: u64,
    pub(crate) keys: FlowKeys,
    pub(crate) lease: Lease,
    pub(crate) params: Mutex<Params>,
    /// The latest answer, and the bucket start of each lease expiry seen
    /// lately (for refunds).
    pub(crate) last: Mutex<Last>,
    /// Entries waiting for the worker's answer park here.
    answered: Mutex<u64>,
    wake: Condvar,
    /// Live instances of the flow id, as Redis last counted them.
    instances: AtomicU64,
    /// The most live instances Redis counted lately, and when.
    peak: Mutex<Peak>,
    /// What this instance admitted lately: granted, and by the fallback.
    pub(crate) ledger: Mutex<Ledger>,
}

/// What the flow last heard from Redis.
#[derive(Debug, Default)]
pub(crate) struct Last {
    pub(crate) grant: Option<Grant>,
    pub(crate) buckets: Vec<(u64, u64)>,
    pub(crate) round_trips: u64,
    pub(crate) granted: u64,
    pub(crate) refunded: u64,
    /// Fallback admissions charged to the cluster's window.
    pub(crate) charged: u64,
}

impl Last {
    /// The server bucket of a lease that expires at `expiry`.
    pub(crate) fn bucket_of(&self, expiry: u64) -> Option<u64> {
        self.buckets
            .iter()
            .find(|(e, _)| *e == expiry)
            .map(|(_, start)| *start)
    }

    pub(crate) fn remember(&mut self, expiry: u64, bucket_start: u64) {
        if self.bucket_of(expiry).is_none() {
            if self.buckets.len() >= 8 {
                self.buckets.remove(0);
            }
            self.buckets.push((expiry, bucket_start));
        }
    }
}

/// The most live instances of a flow id Redis counted within a memory
/// (three instance TTLs): an instance whose registration lapsed while
/// Redis stalled still counts in the others' fallback shares.
#[derive(Debug, Default)]
struct Peak {
    instances: u64,
    at: Option<Instant>,
}

/// How a wait for the worker ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waited {
    /// The worker answered (or the state changed): look again.
    Answered,
    /// The deadline passed.
    TimedOut,
}

impl Flow {
    pub(crate) fn new(prefix: &str, flow: &ClusterFlow) -> Self {
        Flow {
            id: flow.flow_id(),
            keys: FlowKeys::new(prefix, flow.flow_id()),
            lease: Lease::new(),
            params: Mutex::new(Params::of(flow)),
            ledger: Mutex::new(Ledger::new(flow.window_interval_ms(), flow.sample_count())),
            last: Mutex::new(Last::default()),
            answered: Mutex::new(0),
            wake: Condvar::new(),
            instances: AtomicU64::new(0),
            peak: Mutex::new(Peak::default()),
        }
    }

    /// The most this instance's fallback admits in a window, grants
    /// included: its share of the cluster threshold (see
    /// [`ledger::allowance`]), among the most live instances counted
    /// lately. The threshold is the one Redis last
    /// answered (the lowest count among the live instances), never above
    /// this instance's own count; before any answer, the rule's count.
    pub(crate) fn fallback_allowance(&self) -> u64 {
        let params = *self.params.lock();
        let own = params.count.max(0.0).floor() as u64;
        let grant = self.last.lock().grant;
        let instances = self.peak.lock().instances;
        if params.avg_local {
            let answered = grant.map_or(own, |g| g.threshold / g.instances.max(1));
            return answered.min(own);
        }
        let threshold = grant.map_or(own, |g| g.threshold).min(own);
        ledger::allowance(threshold, instances)
    }

    /// Live instances of the flow id, as Redis last counted them.
    pub(crate) fn instances(&self) -> u64 {
        self.instances.load(Relaxed)
    }

    /// Redis counted `live` instances now; the fallback's share divides
    /// by the most counted within `memory`.
    pub(crate) fn note_instances(&self, live: u64, memory: std::time::Duration) {
        self.instances.store(live, Relaxed);
        let now = Instant::now();
        let mut peak = self.peak.lock();
        let lapsed = peak.at.is_none_or(|at| now.duration_since(at) > memory);
        if live >= peak.instances || lapsed {
            *peak = Peak {
                instances: live,
                at: Some(now),
            };
        }
    }

    /// Counts `permits` admitted by the fallback at `now_ms` if the
    /// instance's window keeps within its allowance with them.
    pub(crate) fn admit_fallback(&self, permits: u32, now_ms: u64) -> bool {
        let allowance = self.fallback_allowance();
        let params = *self.params.lock();
        let mut ledger = self.ledger.lock();
        ledger.reshape(params.window_ms, params.samples);
        ledger.admit_fallback(u64::from(permits), allowance, now_ms)
    }

    /// The answer count now, to wait for the next one.
    pub(crate) fn answers(&self) -> u64 {
        *self.answered.lock()
    }

    /// Waits until an answer after `seen`, or `deadline`.
    pub(crate) fn wait(&self, seen: u64, deadline: Instant) -> Waited {
        let mut answered = self.answered.lock();
        while *answered == seen {
            if self.wake.wait_until(&mut answered, deadline).timed_out() {
                return match *answered == seen {
                    true => Waited::TimedOut,
                    false => Waited::Answered,
                };
            }
        }
        Waited::Answered
    }

    /// Wakes every entry waiting for an answer.
    pub(crate) fn answer(&self) {
        *self.answered.lock() += 1;
        self.wake.notify_all();
    }
}
