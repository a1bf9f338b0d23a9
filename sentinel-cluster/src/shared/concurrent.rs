//! The cluster service's calls for cluster concurrency rules: a token
//! asked of Redis within the budget or decided by the fallback, and its
//! release, queued for the worker.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use sentinel_flow_core::flow::{ClusterFlow, ConcurrencyAnswer};

use super::Shared;
use crate::concurrency::{
    MAX_PENDING_ACQUIRES, MAX_PENDING_RELEASES, MAX_TOKEN_PERMITS, Pending, State, is_fallback,
    permits_of, token_id,
};
use crate::flow::Flow;

impl Shared {
    /// A token for an entry of `flow`: asked of Redis within the budget,
    /// or decided by the fallback.
    pub(crate) fn acquire_concurrent(
        &self,
        flow: &Arc<Flow>,
        rule: &ClusterFlow,
        permits: u32,
    ) -> ConcurrencyAnswer {
        self.keep_params(flow, rule);
        if permits > MAX_TOKEN_PERMITS {
            return ConcurrencyAnswer::Unavailable(None);
        }
        if !self.is_up() {
            return self.concurrent_fallback(flow, rule, permits);
        }
        let sequence = self.next_token.fetch_add(1, Relaxed);
        let pending = Arc::new(Pending::new(token_id(sequence, permits, false)));
        {
            let mut queue = flow.concurrent.pending.lock();
            if queue.len() >= MAX_PENDING_ACQUIRES {
                drop(queue);
                return self.concurrent_fallback(flow, rule, permits);
            }
            queue.push_back(pending.clone());
        }
        self.wake.notify_one();
        match pending.wait(Instant::now() + self.config.get_budget()) {
            Some(State::Taken) => {
                flow.concurrent.held.lock().permits += u64::from(permits);
                ConcurrencyAnswer::Granted(pending.token)
            }
            Some(State::Refused) => ConcurrencyAnswer::Refused,
            None => {
                self.counters.over_budget.fetch_add(1, Relaxed);
                self.concurrent_fallback(flow, rule, permits)
            }
            Some(State::Failed) => self.concurrent_fallback(flow, rule, permits),
        }
    }

    /// No answer: within the instance's share of the threshold, counted
    /// with the tokens it holds from Redis, a fallback token (the rule's
    /// local count runs after); past it, refused. A rule that does not
    /// fall back locally passes.
    fn concurrent_fallback(
        &self,
        flow: &Flow,
        rule: &ClusterFlow,
        permits: u32,
    ) -> ConcurrencyAnswer {
        self.counters.fallbacks.fetch_add(1, Relaxed);
        if !rule.falls_back_to_local() {
            return ConcurrencyAnswer::Unavailable(None);
        }
        let allowance = flow.fallback_allowance();
        let mut held = flow.concurrent.held.lock();
        if held.permits + u64::from(permits) > allowance {
            return ConcurrencyAnswer::Refused;
        }
        held.permits += u64::from(permits);
        held.fallback += u64::from(permits);
        let sequence = self.next_token.fetch_add(1, Relaxed);
        ConcurrencyAnswer::Unavailable(Some(token_id(sequence, permits, true)))
    }

    /// Gives back a token of `flow`: at once for the fallback's, queued
    /// for the worker for Redis'.
    pub(crate) fn release_concurrent(&self, flow: &Arc<Flow>, token: u64) {
        let permits = u64::from(permits_of(token));
        {
            let mut held = flow.concurrent.held.lock();
            held.permits = held.permits.saturating_sub(permits);
            if is_fallback(token) {
                held.fallback = held.fallback.saturating_sub(permits);
            }
        }
        if !is_fallback(token) {
            self.queue_release(flow.clone(), token);
        }
    }

    /// Queues the release of a Redis token (dropped past the bound: the
    /// token then expires in Redis).
    pub(crate) fn queue_release(&self, flow: Arc<Flow>, token: u64) {
        {
            let mut queue = self.releases.lock();
            if queue.len() >= MAX_PENDING_RELEASES {
                self.counters.dropped_releases.fetch_add(1, Relaxed);
                return;
            }
            queue.push_back((flow, token));
        }
        self.wake.notify_one();
    }
}
