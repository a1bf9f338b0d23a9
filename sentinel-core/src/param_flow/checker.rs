//! `CompiledParamFlow`: a hot-parameter rule ready for the hot path, with
//! Sentinel's `ParamFlowChecker` formulas.

use crate::sync::atomic::AtomicU64;
use crate::sync::atomic::Ordering::{AcqRel, Acquire};
use std::sync::Arc;

use super::cache::{FRESH, Flavor, HeldSlot, Lookup, Reserve, ValueTable};
use super::cluster_flow::ClusterParamFlow;
use super::rule::{ParamControlBehavior, ParamFlowGrade, ParamFlowRule};
use crate::ParamValue;

/// A token-bucket state: tokens left above the time of the last refill.
const TIME_BITS: u32 = 38;
const TIME_MASK: u64 = (1 << TIME_BITS) - 1;

/// What a hot-parameter rule decided for one entry. 16 bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ParamDecision {
    Pass,
    /// Let it through after waiting this many nanoseconds (rate limiter).
    Wait(u64),
    Block,
    /// Passed, holding concurrency counts to give back at exit with
    /// [`CompiledParamFlow::release`].
    Held(ParamHeld),
    /// A rule in cluster mode: the cluster decides
    /// ([`CompiledParamFlow::check_cluster`]).
    Cluster,
}

/// Concurrency counts an admitted entry holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum ParamHeld {
    /// One value's count: its slot, found again without the argument.
    One(HeldSlot),
    /// A count for each element of a collection argument, found again by
    /// the elements (which the shared list keeps alive).
    List(Arc<Vec<ParamValue>>),
}

/// How the rule limits a value.
#[derive(Debug)]
enum Mode {
    /// QPS, reject: Sentinel's token bucket (`passDefaultLocalCheck`).
    Tokens { burst: u64, duration_ms: u64 },
    /// QPS, rate limiter (`passThrottleLocalCheck`), on nanoseconds.
    Pacer {
        duration_sec: u64,
        max_queue_ns: u64,
    },
    /// Calls in flight per value, exact.
    Concurrency,
}

/// A value with a threshold of its own, by key.
#[derive(Debug)]
struct Item {
    key: u64,
    value: ParamValue,
    count: u64,
}

/// A hot-parameter rule with its per-value state.
#[derive(Debug)]
pub(crate) struct CompiledParamFlow {
    rule: Arc<ParamFlowRule>,
    mode: Mode,
    count: u64,
    /// Sorted by key.
    items: Box<[Item]>,
    /// The kinds of the items' values ([`kind_bit`]): a value of a kind
    /// no item has equals none, so a rule whose items are all markers, as
    /// a gateway rule's, answers a string or a number without looking.
    item_kinds: u8,
    table: ValueTable,
    /// A QPS rule in cluster mode: its values are counted by the cluster.
    cluster: Option<Box<ClusterParamFlow>>,
}

impl CompiledParamFlow {
    /// Compiles a rule (which [`ParamFlowRule::validate`] accepted; an
    /// invalid one still compiles, and never panics on the hot path).
    pub(crate) fn new(rule: ParamFlowRule) -> Self {
        let duration_sec = rule.duration_in_sec.max(1);
        let (mode, flavor) = match (rule.grade, rule.control_behavior) {
            (ParamFlowGrade::Concurrency, _) => (Mode::Concurrency, Flavor::Counters),
            (_, ParamControlBehavior::RateLimiter) => (
                Mode::Pacer {
                    duration_sec,
                    max_queue_ns: rule.max_queueing_time_ms.saturating_mul(1_000_000),
                },
                Flavor::Buckets,
            ),
            _ => (
                Mode::Tokens {
                    burst: rule.burst_count,
                    duration_ms: duration_sec.saturating_mul(1_000),
                },
                Flavor::Buckets,
            ),
        };
        let table = ValueTable::new(rule.effective_capacity(), flavor);
        let mut items: Vec<Item> = rule
            .param_flow_item_list
            .iter()
            .map(|item| Item {
                key: table.key_of(&item.value),
                value: item.value.clone(),
                count: whole(item.count),
            })
            .collect();
        items.sort_by_key(|item| item.key);
        let item_kinds = items
            .iter()
            .fold(0, |kinds, item| kinds | kind_bit(&item.value));
        CompiledParamFlow {
            item_kinds,
            mode,
            count: whole(rule.count),
            items: items.into(),
            table,
            cluster: ClusterParamFlow::of_rule(&rule).map(Box::new),
            rule: Arc::new(rule),
        }
    }

    /// The rule as loaded.
    pub(crate) fn rule(&self) -> &Arc<ParamFlowRule> {
        &self.rule
    }

    /// The rule's cluster flow, when the cluster counts its values.
    #[inline(always)]
    pub(crate) fn cluster(&self) -> Option<&ClusterParamFlow> {
        self.cluster.as_deref()
    }

    /// Decides for an entry with `args` acquiring `batch` permits at
    /// `now_ms` (`now_ns` on the same clock, read only by a rate limiter).
    ///
    /// The argument at `param_idx` (negative: from the end) is checked; a
    /// call without it passes. A collection argument passes if every
    /// element passes; on a block, the concurrency counts and tokens taken
    /// for earlier elements are given back (a rate limiter's reserved
    /// slots are not, as in Sentinel). A rule the cluster counts answers
    /// [`ParamDecision::Cluster`] at once: its check is
    /// [`check_cluster`](Self::check_cluster).
    pub(crate) fn check(
        &self,
        args: &[ParamValue],
        batch: u32,
        now_ms: u64,
        now_ns: impl FnOnce() -> u64,
    ) -> ParamDecision {
        if self.cluster.is_some() {
            return ParamDecision::Cluster;
        }
        self.check_locally(args, batch, now_ms, now_ns)
    }

    /// [`check`](Self::check) on this instance alone: the rule's local
    /// check, also a rule in cluster mode's fallback.
    #[inline]
    pub(crate) fn check_locally(
        &self,
        args: &[ParamValue],
        batch: u32,
        now_ms: u64,
        now_ns: impl FnOnce() -> u64,
    ) -> ParamDecision {
        let Some(value) = self.argument(args) else {
            return ParamDecision::Pass;
        };
        let mut now_ns = Lazy::new(now_ns);
        let acquire = u64::from(batch);
        let ParamValue::List(list) = value else {
            return match self.check_one(value, acquire, now_ms, &mut now_ns) {
                One::Pass => ParamDecision::Pass,
                One::Wait(ns) => ParamDecision::Wait(ns),
                One::Held(held) => ParamDecision::Held(ParamHeld::One(held)),
                One::Block => ParamDecision::Block,
                // A concurrency count is exact or refused: an install that
                // kept meeting others' in the value's set refuses (briefly,
                // and rarely), while a set full of busy values lets new
                // values through untracked, as Sentinel's LRU would.
                One::Untracked(Lookup::Busy) if self.is_concurrency() => ParamDecision::Block,
                // A token bucket that cannot be found decides as a first
                // request does.
                One::Untracked(_) => ParamDecision::Pass,
            };
        };
        let mut wait = 0;
        for (i, element) in list.iter().enumerate() {
            match self.check_element(element, acquire, now_ms, &mut now_ns) {
                One::Pass | One::Held(_) => {}
                One::Wait(ns) => wait = wait.max(ns),
                // An untracked element of a list is refused under the
                // concurrency grade: its count could not be found at exit.
                One::Untracked(_) if !self.is_concurrency() => {}
                One::Block | One::Untracked(_) => {
                    self.give_back(&list[..i], acquire);
                    return ParamDecision::Block;
                }
            }
        }
        if self.is_concurrency() && !list.is_empty() {
            ParamDecision::Held(ParamHeld::List(Arc::clone(list)))
        } else if wait > 0 {
            ParamDecision::Wait(wait)
        } else {
            ParamDecision::Pass
        }
    }

    /// Gives back the concurrency counts of a [`ParamDecision::Held`].
    pub(crate) fn release(&self, held: ParamHeld) {
        match held {
            ParamHeld::One(slot) => self.table.release(slot),
            ParamHeld::List(list) => {
                for value in list.iter() {
                    self.table.release_key(self.table.key_of(value));
                }
            }
        }
    }

    /// Values tracked now.
    pub(crate) fn values(&self) -> usize {
        self.table.occupied()
    }

    /// Bytes the value table holds now.
    pub(crate) fn table_bytes(&self) -> usize {
        self.table.bytes()
    }

    /// Values forgotten to make room for others (diagnostics).
    pub(crate) fn evictions(&self) -> u64 {
        self.table.evictions()
    }

    /// Values that passed untracked because their set of the table was full
    /// of values with calls in flight (concurrency grade).
    pub(crate) fn overflows(&self) -> u64 {
        self.table.overflows()
    }

    /// The value table (tests).
    #[cfg(test)]
    pub(super) fn table(&self) -> &ValueTable {
        &self.table
    }

    /// `(tokens, last refill ms)` of a token-bucket value, if tracked and
    /// not fresh (tests).
    #[cfg(test)]
    pub(super) fn tokens_of(&self, value: &ParamValue) -> Option<(u64, u64)> {
        let index = self.table.find(self.table.key_of(value))?;
        let state = self.table.state(index).load(Acquire);
        (state != FRESH).then(|| unpack(state))
    }

    fn is_concurrency(&self) -> bool {
        matches!(self.mode, Mode::Concurrency)
    }

    #[inline]
    pub(super) fn argument<'a>(&self, args: &'a [ParamValue]) -> Option<&'a ParamValue> {
        let idx = i64::from(self.rule.param_idx);
        let at = if idx < 0 {
            args.len() as i64 + idx
        } else {
            idx
        };
        usize::try_from(at).ok().and_then(|at| args.get(at))
    }

    /// The threshold of `value`: its item's, or the rule's.
    pub(super) fn threshold_of(&self, value: &ParamValue) -> u64 {
        self.threshold(self.table.key_of(value), value)
    }

    /// The threshold of the value with `key`: its item's, or the rule's.
    /// A rule without items (the usual case) answers inline, whichever
    /// kind's check calls it.
    /// A value of a kind no item has (a gateway rule's items are markers)
    /// answers inline too.
    #[inline(always)]
    fn threshold(&self, key: u64, value: &ParamValue) -> u64 {
        if self.items.is_empty() || self.item_kinds & kind_bit(value) == 0 {
            return self.count;
        }
        self.item_threshold(key, value)
    }

    /// [`threshold`](Self::threshold) of a rule with items, for a value
    /// that may equal one.
    #[inline]
    fn item_threshold(&self, key: u64, value: &ParamValue) -> u64 {
        let start = self.items.partition_point(|item| item.key < key);
        self.items[start..]
            .iter()
            .take_while(|item| item.key == key)
            .find(|item| item.value == *value)
            .map_or(self.count, |item| item.count)
    }

    /// [`check_one`](Self::check_one) of a collection's element, out of
    /// line: a single value (the usual argument) has it in line.
    #[inline(never)]
    fn check_element(
        &self,
        value: &ParamValue,
        acquire: u64,
        now_ms: u64,
        now_ns: &mut Lazy<impl FnOnce() -> u64>,
    ) -> One {
        self.check_one(value, acquire, now_ms, now_ns)
    }

    #[inline(always)]
    fn check_one(
        &self,
        value: &ParamValue,
        acquire: u64,
        now_ms: u64,
        now_ns: &mut Lazy<impl FnOnce() -> u64>,
    ) -> One {
        let key = self.table.key_of(value);
        let count = self.threshold(key, value);
        if count == 0 {
            return One::Block;
        }
        match self.mode {
            Mode::Concurrency => match self.table.reserve(key, now_ms, count) {
                Reserve::Held(held) => One::Held(held),
                Reserve::Refused => One::Block,
                Reserve::Untracked(lookup) => One::Untracked(lookup),
            },
            Mode::Tokens { burst, duration_ms } => {
                let max = count.saturating_add(burst);
                if acquire > max {
                    return One::Block;
                }
                self.on_state(key, now_ms, |state| {
                    take_tokens(state, count, max, acquire, duration_ms, now_ms)
                })
            }
            Mode::Pacer {
                duration_sec,
                max_queue_ns,
            } => {
                // Sentinel's cost in whole milliseconds, applied in nanoseconds.
                let cost_ms =
                    (1_000.0 * acquire as f64 * duration_sec as f64 / count as f64).round();
                let cost_ns = (cost_ms * 1e6).min(u64::MAX as f64) as u64;
                let now = now_ns.get();
                self.on_state(key, now_ms, |state| pace(state, cost_ns, max_queue_ns, now))
            }
        }
    }

    /// Runs `decide` on the state of `key`; `None` from it means the way
    /// was given to a value meanwhile (its state is fresh again), so the
    /// value is looked up again.
    #[inline]
    fn on_state(&self, key: u64, now_ms: u64, decide: impl Fn(&AtomicU64) -> Option<One>) -> One {
        loop {
            let state = match self.table.slot(key, now_ms) {
                Ok((_, state)) => state,
                Err(why) => return One::Untracked(why),
            };
            if let Some(one) = decide(state) {
                return one;
            }
        }
    }

    /// Gives back what the elements before a refused one took.
    #[cold]
    fn give_back(&self, taken: &[ParamValue], acquire: u64) {
        for value in taken {
            let key = self.table.key_of(value);
            match self.mode {
                Mode::Concurrency => self.table.release_key(key),
                Mode::Tokens { burst, .. } => {
                    let max = self.threshold(key, value).saturating_add(burst);
                    if let Some(index) = self.table.find(key) {
                        refund(self.table.state(index), acquire, max);
                    }
                }
                Mode::Pacer { .. } => {}
            }
        }
    }
}

/// The kind of `value` as one bit: values of different kinds are never
/// equal (an `Int` and a `UInt` are both integers, which may be).
#[inline(always)]
fn kind_bit(value: &ParamValue) -> u8 {
    match value {
        ParamValue::Bool(_) => 1,
        ParamValue::Int(_) | ParamValue::UInt(_) => 2,
        ParamValue::Float(_) => 4,
        ParamValue::Str(_) | ParamValue::InlineStr(_) => 8,
        ParamValue::List(_) => 16,
    }
}

/// One value's outcome.
#[derive(Debug)]
enum One {
    Pass,
    Wait(u64),
    Block,
    Held(HeldSlot),
    /// No state could be found or made for the value.
    Untracked(Lookup),
}

/// Sentinel's `passDefaultLocalCheck` on one state word: the first request
/// of a value leaves `max - acquire` tokens; once more than a duration has
/// passed since the last refill, `elapsed * count / duration` tokens are
/// added (capped at `max`); otherwise the request takes from what is left.
/// `None`: the compare-and-swap lost, try again.
#[inline]
fn take_tokens(
    state: &AtomicU64,
    count: u64,
    max: u64,
    acquire: u64,
    duration_ms: u64,
    now_ms: u64,
) -> Option<One> {
    let mut current = state.load(Acquire);
    loop {
        let next = if current == FRESH {
            pack(max - acquire, now_ms)
        } else {
            let (rest, last) = unpack(current);
            let elapsed = elapsed_ms(last, now_ms);
            if elapsed > duration_ms {
                let to_add = elapsed.saturating_mul(count) / duration_ms;
                let refilled = rest.saturating_add(to_add);
                if refilled < acquire {
                    return Some(One::Block);
                }
                pack(refilled.min(max) - acquire, now_ms)
            } else if rest >= acquire {
                pack(rest - acquire, last)
            } else {
                return Some(One::Block);
            }
        };
        match state.compare_exchange_weak(current, next, AcqRel, Acquire) {
            Ok(_) => return Some(One::Pass),
            // Another thread moved the state: decide again on the new one,
            // unless the way now holds a fresh value (re-checked by key).
            Err(actual) if actual == FRESH => return None,
            Err(actual) => current = actual,
        }
    }
}

/// Puts `acquire` tokens back (up to `max`), keeping the refill time.
fn refund(state: &AtomicU64, acquire: u64, max: u64) {
    let mut current = state.load(Acquire);
    while current != FRESH {
        let (rest, last) = unpack(current);
        let next = pack(rest.saturating_add(acquire).min(max), last);
        match state.compare_exchange_weak(current, next, AcqRel, Acquire) {
            Ok(_) => return,
            Err(actual) => current = actual,
        }
    }
}

/// Sentinel's `passThrottleLocalCheck` on one state word (the latest
/// reserved pass, ns): the first request passes; later ones are spaced
/// `cost_ns` apart and wait strictly less than `max_queue_ns`.
#[inline]
fn pace(state: &AtomicU64, cost_ns: u64, max_queue_ns: u64, now_ns: u64) -> Option<One> {
    let mut latest = state.load(Acquire);
    loop {
        let (next, outcome) = if latest == FRESH {
            (now_ns, One::Pass)
        } else {
            let expected = latest.saturating_add(cost_ns).min(FRESH - 1);
            if expected <= now_ns {
                (now_ns, One::Pass)
            } else if expected - now_ns < max_queue_ns {
                (expected, One::Wait(expected - now_ns))
            } else {
                return Some(One::Block);
            }
        };
        match state.compare_exchange_weak(latest, next, AcqRel, Acquire) {
            Ok(_) => return Some(outcome),
            Err(actual) if actual == FRESH => return None,
            Err(actual) => latest = actual,
        }
    }
}

#[inline]
fn pack(tokens: u64, time_ms: u64) -> u64 {
    tokens << TIME_BITS | (time_ms & TIME_MASK)
}

#[inline]
fn unpack(state: u64) -> (u64, u64) {
    (state >> TIME_BITS, state & TIME_MASK)
}

/// Milliseconds from `last` to `now` on the 38-bit wrapping clock of a
/// state word (8.7 years round). A reading up to [`STALE_MS`] behind `last`
/// gives 0, so no refill, as Sentinel's negative `passTime`: the engine's
/// time never goes back, so only a thread's reading taken before another's
/// refill is behind. Further behind, the time jumped forward by more than
/// half a round (a clock set years ahead): a full refill.
#[inline]
fn elapsed_ms(last: u64, now_ms: u64) -> u64 {
    let elapsed = now_ms.wrapping_sub(last) & TIME_MASK;
    if elapsed < 1 << (TIME_BITS - 1) {
        elapsed
    } else if (TIME_MASK + 1) - elapsed <= STALE_MS {
        0
    } else {
        TIME_MASK
    }
}

/// How far behind a state word's time a reading may be and still be a
/// late reading rather than a jump forward (about 49 days).
const STALE_MS: u64 = 1 << 32;

/// A threshold as Sentinel reads it: the whole part (`(long) count`).
fn whole(count: f64) -> u64 {
    if count.is_finite() && count > 0.0 {
        count as u64
    } else {
        0
    }
}

/// A clock read made at most once, when first needed.
struct Lazy<F> {
    read: Option<F>,
    value: u64,
}

impl<F: FnOnce() -> u64> Lazy<F> {
    fn new(read: F) -> Self {
        Lazy {
            read: Some(read),
            value: 0,
        }
    }

    #[inline]
    fn get(&mut self) -> u64 {
        if let Some(read) = self.read.take() {
            self.value = read();
        }
        self.value
    }
}
