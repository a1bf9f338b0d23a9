//! Cluster concurrency on this instance (a concurrency-grade flow rule in
//! cluster mode): an entry takes a token of the flow id's set in Redis and
//! its exit gives it back.
//!
//! An entry queues its acquire for the worker (`calls.rs` runs the script)
//! and waits for the answer no longer than the budget; past it, or while
//! Redis is down, the fallback decides: the instance's share of the
//! threshold (as for QPS flows, the threshold divided by the most live
//! instances counted lately), charged with the tokens the instance holds
//! from Redis, so that the instance never holds more than its share from
//! the fallback and the cluster together. An answer that comes after its
//! entry gave up is given back at once.
//!
//! The exit never waits for Redis: it queues the release for the worker.
//! A release that fails (Redis down) is queued again and sent once Redis
//! is back; past [`MAX_PENDING_RELEASES`] queued, a release is dropped and
//! its token expires in Redis after the rule's `resource_timeout`.
//!
//! What this instance's fallback holds is told to Redis with each acquire
//! call, and counted there as the instance's until it is heard of no more.

pub(crate) mod calls;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::call::Call;

/// The most acquires of one flow id waiting for the worker; an entry past
/// it is decided by the fallback at once.
pub(crate) const MAX_PENDING_ACQUIRES: usize = 1_024;

/// The most releases a client keeps queued while Redis cannot take them;
/// past it a release is dropped and its token expires in Redis after the
/// rule's `resource_timeout` (counted in the snapshot's
/// `dropped_releases`).
pub(crate) const MAX_PENDING_RELEASES: usize = 4_096;

/// A token id: the fallback's flag, a sequence number, and the permits.
const FALLBACK: u64 = 1 << 63;
const PERMIT_BITS: u32 = 24;
/// The most permits one token holds; an entry asking more is decided by
/// the rule's local count.
pub(crate) const MAX_TOKEN_PERMITS: u32 = (1 << PERMIT_BITS) - 1;
const SEQUENCE: u64 = (1 << (63 - PERMIT_BITS)) - 1;

pub(crate) fn token_id(sequence: u64, permits: u32, fallback: bool) -> u64 {
    let flag = if fallback { FALLBACK } else { 0 };
    flag | ((sequence & SEQUENCE) << PERMIT_BITS) | u64::from(permits)
}

pub(crate) fn permits_of(token: u64) -> u32 {
    (token & u64::from(MAX_TOKEN_PERMITS)) as u32
}

pub(crate) fn is_fallback(token: u64) -> bool {
    token & FALLBACK != 0
}

/// The token's member in the flow's tokens set:
/// `<instance>|<sequence>|<permits>`.
pub(crate) fn member(instance: &str, token: u64) -> String {
    let sequence = (token >> PERMIT_BITS) & SEQUENCE;
    format!("{instance}|{sequence}|{}", permits_of(token))
}

/// A flow id's concurrency state on this instance.
#[derive(Debug, Default)]
pub(crate) struct Concurrent {
    pub(crate) held: Mutex<Held>,
    /// Acquires waiting for the worker.
    pub(crate) pending: Mutex<VecDeque<Arc<Pending>>>,
}

/// The permits of the tokens this instance holds.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Held {
    /// From Redis and from the fallback.
    pub(crate) permits: u64,
    /// Of them, from the fallback.
    pub(crate) fallback: u64,
}

/// The worker's answer to an acquire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Redis gave the token.
    Taken,
    Refused,
    /// The call failed (Redis down).
    Failed,
}

/// An acquire queued for the worker: answered with a [`State`], or given
/// up by its entry at the budget (a token taken for it then goes back).
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) token: u64,
    call: Call<State, ()>,
}

impl Pending {
    pub(crate) fn new(token: u64) -> Self {
        Pending {
            token,
            call: Call::new(),
        }
    }

    pub(crate) fn is_abandoned(&self) -> bool {
        self.call.abandoned().is_some()
    }

    /// The worker's answer; `true` when no entry takes it and the token
    /// taken for it must go back (once: this is the one answer).
    pub(crate) fn answer(&self, state: State) -> bool {
        self.call.answer(state).is_err() && state == State::Taken
    }

    /// Waits for the answer until `deadline`; `None`: the entry gave up
    /// past it, and an answer after that is not its own.
    pub(crate) fn wait(&self, deadline: Instant) -> Option<State> {
        self.call.wait(deadline, || ((), ())).ok()
    }

    /// Under loom: the entry's deadline passes.
    #[cfg(all(test, sentinel_loom))]
    pub(crate) fn expire(&self) {
        self.call.expire();
    }
}

#[cfg(all(test, not(sentinel_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_token_id_keeps_its_permits_and_whose_it_is() {
        let token = token_id(7, 3, false);
        assert_eq!((permits_of(token), is_fallback(token)), (3, false));
        assert_eq!(member("host-1|x", token), "host-1|x|7|3");
        let token = token_id(u64::MAX, MAX_TOKEN_PERMITS, true);
        assert_eq!(permits_of(token), MAX_TOKEN_PERMITS);
        assert!(is_fallback(token));
    }

    #[test]
    fn an_answer_after_the_entry_gave_up_sends_the_token_back() {
        let pending = Pending::new(1);
        assert_eq!(pending.wait(Instant::now()), None);
        assert!(pending.answer(State::Taken), "taken for no one: back");
        let pending = Pending::new(1);
        assert!(!pending.answer(State::Taken));
        assert_eq!(pending.wait(Instant::now()), Some(State::Taken));
        assert!(pending.answer(State::Taken), "a second answer: back");
    }
}
