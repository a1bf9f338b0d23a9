//! One flow id on this instance: its lease, the rule's settings the worker
//! sends, the latest answer of Redis, and where waiting entries park.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};
use sentinel_flow_core::flow::{ClusterFlow, ClusterThresholdType};

use crate::concurrency::Concurrent;
use crate::lease::Lease;
use crate::ledger::{self, Ledger};
use crate::script::{FlowKeys, Grant};

/// The rule's settings, as the acquire scripts take them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Params {
    pub(crate) count: f64,
    pub(crate) avg_local: bool,
    pub(crate) window_ms: u64,
    pub(crate) samples: u32,
    /// Cluster concurrency: tokens, not permits of a window.
    pub(crate) concurrency: bool,
    /// Cluster concurrency: how long a token lives in Redis, ms.
    pub(crate) hold_ms: u64,
    /// Cluster concurrency: the rule's `client_offline_time` (clamped), ms.
    pub(crate) offline_ms: u64,
}

impl Params {
    pub(crate) fn of(flow: &ClusterFlow) -> Self {
        let timeout = flow.resource_timeout_ms().clamp(1, MAX_TOKEN_TIME_MS);
        Params {
            count: flow.count(),
            avg_local: flow.threshold_type() == ClusterThresholdType::AvgLocal,
            window_ms: flow.window_interval_ms(),
            samples: flow.sample_count(),
            concurrency: flow.is_concurrency(),
            // Sentinel: strategy 1, the client gives the token back at the
            // timeout; otherwise the server sweeps it once held twice that.
            hold_ms: match flow.resource_timeout_strategy() {
                1 => timeout,
                _ => timeout * 2,
            },
            offline_ms: flow.client_offline_ms().clamp(1, MAX_TOKEN_TIME_MS),
        }
    }
}

/// The longest `resource_timeout` and `client_offline_time` a cluster
/// concurrency rule is held to (one day; longer values are taken as this).
pub(crate) const MAX_TOKEN_TIME_MS: u64 = 86_400_000;

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
    /// Cluster concurrency: the tokens held, and the acquires waiting.
    pub(crate) concurrent: Concurrent,
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
    /// When Redis counted them (the client's clock, ms).
    at_ms: Option<u64>,
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
            concurrent: Concurrent::default(),
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

    /// Takes the rule's settings for the flow's next calls. A change of a
    /// QPS rule (a reloaded count, window or threshold type) asks for a refill at
    /// `now_ms` that first takes back what the lease and its sub-leases
    /// hold, so no permit granted under the old settings is spent after
    /// it; true when the worker is to be woken for it.
    pub(crate) fn set_params(&self, params: Params, now_ms: u64) -> bool {
        {
            let mut held = self.params.lock();
            if *held == params {
                return false;
            }
            *held = params;
        }
        if params.concurrency {
            // Tokens, not a lease: nothing to take back.
            return false;
        }
        self.lease.asked_at_ms.store(now_ms, Relaxed);
        self.lease.handshake.ask_retake()
    }

    /// Live instances of the flow id, as Redis last counted them.
    pub(crate) fn instances(&self) -> u64 {
        self.instances.load(Relaxed)
    }

    /// Redis counted `live` instances at `now_ms` (the client's clock);
    /// the fallback's share divides by the most counted within
    /// `memory_ms`.
    pub(crate) fn note_instances(&self, live: u64, memory_ms: u64, now_ms: u64) {
        self.instances.store(live, Relaxed);
        let mut peak = self.peak.lock();
        let lapsed = peak
            .at_ms
            .is_none_or(|at| now_ms.saturating_sub(at) > memory_ms);
        if live >= peak.instances || lapsed {
            *peak = Peak {
                instances: live,
                at_ms: Some(now_ms),
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

#[cfg(test)]
mod tests {
    use sentinel_flow_core::ManualClock;
    use sentinel_flow_core::flow::{ClusterFlow, ClusterFlowConfig, FlowRule};

    use crate::config::ClusterConfig;
    use crate::shared::Shared;

    fn rule(count: f64) -> ClusterFlow {
        ClusterFlow::of_rule(&FlowRule {
            cluster_mode: true,
            cluster_config: ClusterFlowConfig {
                flow_id: Some(1),
                ..ClusterFlowConfig::default()
            },
            ..FlowRule::new("r", count)
        })
        .expect("a cluster rule")
    }

    #[test]
    fn the_live_instance_memory_lapses_on_the_client_s_clock() {
        let clock = ManualClock::new(1_000_000);
        let config = ClusterConfig::new("redis://127.0.0.1:1/").clock(clock.clone());
        let shared = Shared::new(config, "a".into());
        let flow = shared.flow(&rule(300.0));
        let note =
            |live| flow.note_instances(live, shared.peak_memory_ms(), shared.config.now_ms());
        note(3);
        assert_eq!(flow.fallback_allowance(), 100);
        // Fewer instances within the memory (three 3 s TTLs): still 3.
        clock.advance_ms(8_000);
        note(1);
        assert_eq!(flow.fallback_allowance(), 100);
        // Past the memory of the clock the client was given, the peak is
        // the count Redis gives now, with no real time having passed.
        clock.advance_ms(9_001);
        note(1);
        assert_eq!(flow.fallback_allowance(), 300);
    }
}
