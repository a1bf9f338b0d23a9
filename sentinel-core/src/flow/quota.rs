//! Leases of a reject QPS rule's quota, so that threads entering one
//! resource do not read each other's counts on every entry.
//!
//! Sentinel's reject rule passes an entry while the passes in the window
//! plus the entry's permits stay within the count. Read from the node, that
//! is a read of every thread's latest count per entry: with two threads on
//! one resource, a cache line crosses between cores each way per entry.
//!
//! Instead, the rule keeps `granted`: the passes in the window when the
//! bucket began, plus every permit handed out in the bucket since, less
//! those handed back. An entry passes on a permit. A thread takes permits
//! in leases (an eighth of what is left, at most [`MAX_LEASE`], at least
//! what it needs) and spends them with a compare-and-swap on a line of its
//! own, so near the count leases shrink to single permits. `granted` never
//! exceeds the count and never falls below the window's passes (every pass
//! spent a permit; permits spent in an earlier bucket are counted in the
//! base of this one), so no window holds more than the count, but for
//! entries in flight across a bucket's edge: one that spent its permit in
//! the last bucket and is counted on the node after the new bucket's base
//! was read (at most one per thread entering at that instant, as with
//! Sentinel's own check-then-count; an entry that read the clock in a
//! bucket the rule has left is refused).
//!
//! Nothing is lost to leases either: a thread that finds too few permits
//! left takes back what the other leases hold (with a compare-and-swap on
//! their words, which is why the owner spends with one too) before it
//! refuses, so an entry is refused only when the passes and its permits
//! would go over the count, as in Sentinel, but for permits in transit at
//! that instant (taken back from a lease by another thread, not yet
//! returned). A permit spent by an entry that a later check refuses, or
//! whose wait in a rate limiter's queue is cancelled, is given back.
//!
//! Two threads get lease slots per rule; others take exact permits from
//! `granted` with one compare-and-swap each.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};

use crate::node::StatisticNode;
use crate::stat::MetricEvent;
use crate::stat::owner::{self, NO_OWNER};

/// The most permits one lease takes.
const MAX_LEASE: u64 = 256;
/// Bits of `granted` in the state word; the bucket's tag has the rest.
const GRANTED_BITS: u32 = 40;
const GRANTED: u64 = (1 << GRANTED_BITS) - 1;
/// Tags wrap at this many buckets (97 days of 500 ms buckets).
const TAGS: u64 = 1 << (64 - GRANTED_BITS);
/// How many buckets behind the rule's an entry may be and still be taken
/// for late (having read the clock just before the rule's bucket began);
/// further behind, the rule's bucket is taken for one that wrapped around
/// and starts anew.
const LATE: u64 = 2;
/// The state before any bucket: `granted` all ones, which no count reaches.
const NO_STATE: u64 = GRANTED;
/// The largest count leases serve (larger ones read the node: nothing that
/// large is ever reached).
pub(crate) const MAX_COUNT: f64 = (1u64 << (GRANTED_BITS - 1)) as f64;
/// A lease that holds no bucket.
const NO_BUCKET: u64 = u64::MAX;
/// A node whose window leases cannot serve: its rate is not its passes.
const UNSERVED: u64 = u64::MAX;

/// One thread's lease, on lines of its own (its owner is named in
/// [`Quota::owners`], which other threads read on every entry).
#[repr(align(128))]
struct Lease {
    /// The start of the bucket the lease is for (owner only).
    start: AtomicU64,
    /// The bucket's tag above the permits left: spent by the owner, taken
    /// back by others, each with a compare-and-swap.
    word: AtomicU64,
}

impl Lease {
    const fn new() -> Self {
        Lease {
            start: AtomicU64::new(NO_BUCKET),
            word: AtomicU64::new(0),
        }
    }
}

#[repr(align(128))]
struct State(AtomicU64);

/// A bucket of the node's window: its start and its tag (its number,
/// wrapped to the bits above `granted`: a tag repeats after 2^24 buckets,
/// 97 days of 500 ms buckets).
#[derive(Clone, Copy)]
struct Bucket {
    start: u64,
    tag: u64,
}

impl Bucket {
    /// The bucket holding `now` (two divisions: not on the path of an
    /// entry whose lease is current).
    fn at(now: u64, bucket_len: u64) -> Bucket {
        let number = now / bucket_len;
        Bucket {
            start: number * bucket_len,
            tag: number % TAGS,
        }
    }
}

/// The quota of one reject QPS rule on its resource's node.
pub(crate) struct Quota {
    /// The whole part of the count.
    limit: u64,
    /// The node window's bucket length, learnt on first use (0 until then),
    /// or [`UNSERVED`] when the node's window is not one second.
    bucket_len: AtomicU64,
    /// The token of each lease's owner (see `stat::owner`), 0 while free;
    /// read on every entry, written only when a thread claims a lease.
    owners: [AtomicU64; 2],
    /// The bucket's tag (its number, wrapped) above `granted`.
    state: State,
    leases: [Lease; 2],
}

impl Quota {
    /// The quota of a rule of `count` (at most [`MAX_COUNT`]).
    pub(crate) fn new(count: f64) -> Self {
        debug_assert!(count <= MAX_COUNT);
        Quota {
            limit: count.floor() as u64,
            bucket_len: AtomicU64::new(0),
            owners: [AtomicU64::new(0), AtomicU64::new(0)],
            state: State(AtomicU64::new(NO_STATE)),
            leases: [Lease::new(), Lease::new()],
        }
    }

    /// Takes `n` permits at `now` for an entry to `node`: whether the rule
    /// lets it pass, or `None` if the node's rate is not its passes (a
    /// window other than one second), for the caller to read the rate.
    #[inline]
    pub(crate) fn acquire(&self, node: &StatisticNode, n: u64, now: u64) -> Option<bool> {
        let bucket_len = match self.bucket_len.load(Relaxed) {
            0 => self.learn(node),
            len => len,
        };
        if bucket_len == UNSERVED {
            return None;
        }
        Some(self.acquire_in(node, bucket_len, n, now))
    }

    /// The bucket length of `node`'s window, if leases can serve it.
    #[cold]
    fn learn(&self, node: &StatisticNode) -> u64 {
        let (interval, bucket_len) = node.second_window_ms();
        let len = if interval == 1_000 {
            bucket_len
        } else {
            UNSERVED
        };
        self.bucket_len.store(len, Relaxed);
        len
    }

    #[inline]
    fn acquire_in(&self, node: &StatisticNode, bucket_len: u64, n: u64, now: u64) -> bool {
        let me = owner::token();
        for (held, lease) in self.owners.iter().zip(&self.leases) {
            if held.load(Relaxed) == me {
                let start = lease.start.load(Relaxed);
                if now >= start && now - start < bucket_len {
                    let word = lease.word.load(Relaxed);
                    if word & GRANTED >= n
                        && lease
                            .word
                            .compare_exchange(word, word - n, Relaxed, Relaxed)
                            .is_ok()
                    {
                        return true;
                    }
                }
                return self.renew(lease, node, bucket_len, n, now);
            }
        }
        self.acquire_slow(me, node, bucket_len, n, now)
    }

    /// Gives back `n` permits taken at `now` for an entry refused later.
    pub(crate) fn give_back(&self, n: u64, now: u64) {
        let bucket_len = self.bucket_len.load(Relaxed);
        if bucket_len == 0 || bucket_len == UNSERVED {
            return;
        }
        let me = owner::token();
        let tag = Bucket::at(now, bucket_len).tag;
        if let Some(lease) = self.lease_of(me)
            && lease
                .word
                .fetch_update(Relaxed, Relaxed, |word| {
                    (word >> GRANTED_BITS == tag).then_some(word + n)
                })
                .is_ok()
        {
            return;
        }
        self.ungrant(tag, n);
    }

    /// The lease `me` owns, if any.
    fn lease_of(&self, me: u64) -> Option<&Lease> {
        let i = self.owners.iter().position(|o| o.load(Relaxed) == me)?;
        Some(&self.leases[i])
    }

    /// A thread without a lease slot: claims one if one is free (or its
    /// owner has exited), else takes exactly `n` permits.
    #[cold]
    #[inline(never)]
    fn acquire_slow(
        &self,
        me: u64,
        node: &StatisticNode,
        bucket_len: u64,
        n: u64,
        now: u64,
    ) -> bool {
        if me != NO_OWNER {
            for (claim, lease) in self.owners.iter().zip(&self.leases) {
                let held = claim.load(Relaxed);
                if (held == 0 || !owner::is_live(held))
                    && claim.compare_exchange(held, me, Acquire, Relaxed).is_ok()
                {
                    return self.renew(lease, node, bucket_len, n, now);
                }
            }
        }
        self.take(node, Bucket::at(now, bucket_len), n, n, now)
            .is_some()
    }

    /// A new lease for the owner of `lease`, whose lease cannot pay `n`
    /// permits.
    #[cold]
    #[inline(never)]
    fn renew(
        &self,
        lease: &Lease,
        node: &StatisticNode,
        bucket_len: u64,
        n: u64,
        now: u64,
    ) -> bool {
        // The lease's word carries the tag of the lease's bucket: while that
        // bucket lasts, no division.
        let held = lease.start.load(Relaxed);
        let word = lease.word.load(Relaxed);
        let bucket = if now >= held && now - held < bucket_len {
            Bucket {
                start: held,
                tag: word >> GRANTED_BITS,
            }
        } else {
            Bucket::at(now, bucket_len)
        };
        let (start, tag) = (bucket.start, bucket.tag);
        if held == start && word & GRANTED == 0 && self.exhausted(tag, n) {
            // The block path of a rule at its count: loads only.
            return false;
        }
        if word >> GRANTED_BITS != tag {
            // A lease of an earlier bucket: what it held is of no use now
            // (nobody else changes a word of another bucket's tag).
            lease.word.store(tag << GRANTED_BITS, Relaxed);
        } else if word & GRANTED > 0 {
            // What is left (too little for this entry) goes back first, so
            // that it may serve another thread.
            let word = lease.word.swap(tag << GRANTED_BITS, Relaxed);
            if word & GRANTED > 0 {
                self.ungrant(tag, word & GRANTED);
            }
        }
        if held != start {
            lease.start.store(start, Relaxed);
        }
        match self.take(node, bucket, n, MAX_LEASE.max(n), now) {
            Some(permits) => {
                lease.word.fetch_add(permits - n, Relaxed);
                true
            }
            None => false,
        }
    }

    /// Whether fewer than `n` permits are left in the bucket tagged `tag`,
    /// counting what the leases hold (which `take` would take back).
    #[inline]
    fn exhausted(&self, tag: u64, n: u64) -> bool {
        let state = self.state.0.load(Acquire);
        state >> GRANTED_BITS == tag
            && state & GRANTED != NO_STATE
            && self.limit.saturating_sub(state & GRANTED) < n
            && self.leases.iter().all(|lease| {
                let word = lease.word.load(Relaxed);
                word >> GRANTED_BITS != tag || word & GRANTED == 0
            })
    }

    /// Takes permits, as [`grant`](Self::grant); when too few are left,
    /// takes back what the leases hold and tries once more.
    fn take(
        &self,
        node: &StatisticNode,
        bucket: Bucket,
        n: u64,
        most: u64,
        now: u64,
    ) -> Option<u64> {
        if let Some(permits) = self.grant(node, bucket, n, most, now) {
            return Some(permits);
        }
        let tag = bucket.tag;
        let mut reclaimed = 0;
        for lease in &self.leases {
            let mut word = lease.word.load(Relaxed);
            while word >> GRANTED_BITS == tag && word & GRANTED > 0 {
                match lease
                    .word
                    .compare_exchange_weak(word, tag << GRANTED_BITS, Relaxed, Relaxed)
                {
                    Ok(_) => {
                        reclaimed += word & GRANTED;
                        break;
                    }
                    Err(current) => word = current,
                }
            }
        }
        if reclaimed == 0 {
            return None;
        }
        self.ungrant(tag, reclaimed);
        self.grant(node, bucket, n, n, now)
    }

    /// Takes between `n` and `most` permits in the bucket starting at
    /// `start` (an eighth of those left, within those bounds): how many, or
    /// `None` if fewer than `n` are left.
    fn grant(
        &self,
        node: &StatisticNode,
        bucket: Bucket,
        n: u64,
        most: u64,
        now: u64,
    ) -> Option<u64> {
        let tag = bucket.tag;
        let mut state = self.state.0.load(Acquire);
        loop {
            let fresh = state & GRANTED == NO_STATE;
            let held = state >> GRANTED_BITS;
            if !fresh && held != tag && held.wrapping_sub(tag) % TAGS <= LATE {
                // A later bucket has begun since this entry read the clock:
                // too late for its own bucket's permits, whose count is
                // gone; refused, as the rare late entry at a bucket's edge.
                return None;
            }
            if fresh || held != tag {
                // The bucket's first look: start from the window's passes
                // (kept even if nothing is granted, so that the refusals
                // that follow do not read the window again).
                let base = tag << GRANTED_BITS | node.sum(now, MetricEvent::Pass).min(GRANTED);
                state = match self.state.0.compare_exchange(state, base, AcqRel, Acquire) {
                    Ok(_) => base,
                    Err(current) => current,
                };
                continue;
            }
            let granted = state & GRANTED;
            let left = self.limit.saturating_sub(granted);
            if left < n {
                return None;
            }
            let permits = (left / 8).clamp(n, most.max(n)).min(left);
            let next = tag << GRANTED_BITS | (granted + permits);
            match self
                .state
                .0
                .compare_exchange_weak(state, next, AcqRel, Acquire)
            {
                Ok(_) => return Some(permits),
                Err(current) => state = current,
            }
        }
    }

    /// Returns `n` permits of the bucket tagged `tag`, if it is still the
    /// rule's bucket.
    fn ungrant(&self, tag: u64, n: u64) {
        let _ = self.state.0.fetch_update(AcqRel, Acquire, |state| {
            (state >> GRANTED_BITS == tag && state & GRANTED != NO_STATE)
                .then(|| state - n.min(state & GRANTED))
        });
    }
}

impl std::fmt::Debug for Quota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.0.load(Relaxed);
        f.debug_struct("Quota")
            .field("limit", &self.limit)
            .field("granted", &(state & GRANTED))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stat::StatConfig;

    fn node() -> StatisticNode {
        StatisticNode::new(&StatConfig::default())
    }

    /// Entries at `now` until one is refused (at most `most`): how many
    /// passed, each counted on `node` as the entry would be.
    fn fill(quota: &Quota, node: &StatisticNode, now: u64, most: u64) -> u64 {
        let mut passed = 0;
        while passed < most && quota.acquire(node, 1, now) == Some(true) {
            node.add_pass(now, 1);
            passed += 1;
        }
        passed
    }

    #[test]
    fn a_fresh_quota_serves_every_bucket_number() {
        // Tags on both sides of the half-way mark, and the last one.
        for bucket in [
            0,
            1,
            TAGS / 2 - 1,
            TAGS / 2,
            TAGS / 2 + 1,
            TAGS - 1,
            7 * TAGS + 3,
        ] {
            let now = bucket * 500 + 123;
            let (quota, node) = (Quota::new(10.0), node());
            assert_eq!(fill(&quota, &node, now, 100), 10, "bucket {bucket}");
            // The next bucket sees those 10 in its window.
            assert_eq!(fill(&quota, &node, now + 500, 100), 0, "bucket {bucket}");
            assert_eq!(fill(&quota, &node, now + 1_000, 100), 10, "bucket {bucket}");
        }
    }

    #[test]
    fn a_rule_idle_for_any_time_serves_again() {
        // All but the few buckets around each 97-day wrap of the tags,
        // where an idle rule's bucket is taken for a late or a current one
        // for a second or so.
        for idle in [
            2,
            3,
            TAGS / 2 - 1,
            TAGS / 2 + 1,
            TAGS - LATE - 1,
            TAGS + 1,
            5 * TAGS + 7,
        ] {
            let (quota, node) = (Quota::new(4.0), node());
            assert_eq!(fill(&quota, &node, 0, 100), 4);
            let later = idle * 500;
            assert_eq!(fill(&quota, &node, later, 100), 4, "idle {idle} buckets");
        }
    }

    #[test]
    fn tags_wrap_without_taking_a_later_bucket_for_an_earlier_one() {
        let (quota, node) = (Quota::new(4.0), node());
        let last = (TAGS - 1) * 500;
        assert_eq!(fill(&quota, &node, last, 100), 4);
        // The bucket after the last tag has tag 0: later, not earlier.
        assert_eq!(fill(&quota, &node, last + 500, 100), 0, "window still full");
        assert_eq!(fill(&quota, &node, last + 1_000, 100), 4);
    }

    #[test]
    fn an_entry_late_for_its_bucket_is_refused() {
        let (quota, node) = (Quota::new(100.0), node());
        let t = 1_000_000;
        assert_eq!(fill(&quota, &node, t + 500, 5), 5);
        // Another thread, which read the clock in the bucket before.
        std::thread::scope(|s| {
            s.spawn(|| assert_eq!(quota.acquire(&node, 1, t), Some(false)));
        });
        assert_eq!(fill(&quota, &node, t + 500, 200), 95);
    }

    #[test]
    fn a_window_other_than_one_second_is_left_to_the_caller() {
        let config =
            StatConfig::default().second_window(crate::stat::WindowShape::new(2_000, 4).unwrap());
        let node = StatisticNode::new(&config);
        assert_eq!(Quota::new(5.0).acquire(&node, 1, 1_000), None);
    }
}
