//! Leases of a reject QPS rule's quota, so that threads entering one
//! resource do not read each other's counts on every entry.
//!
//! Sentinel's reject rule passes an entry while the passes in the window
//! plus the entry's permits stay within the count. Read from the node, that
//! is a read of every thread's latest count per entry: with two threads on
//! one resource, a cache line crosses between cores each way per entry.
//!
//! Instead, the rule keeps `granted`: the passes of the window's earlier
//! bucket (its *base*), plus every permit handed out in the current bucket
//! since, less those handed back. An entry passes on a permit. A thread
//! takes permits in leases (an eighth of what is left, at most
//! [`MAX_LEASE`], at least what it needs) and spends them with a
//! compare-and-swap on a line of its own, so near the count leases shrink
//! to single permits. `granted` never exceeds the count.
//!
//! **Exact across a bucket's edge.** The base of a new bucket is what the
//! quota handed out in the bucket before (its `granted` less its own base),
//! not what the node has counted so far: an entry that spent its permit
//! just before the edge and is counted on the node just after it is in
//! the base all the same. Permits handed out but never spent (left in a
//! lease, or given back by an entry a later check refused) are taken back
//! out of the new bucket's base and `granted` together when they are found:
//! by the lease's owner when it renews, or by any thread before it refuses.
//! The base of each bucket is kept beside the state (written by the thread
//! that began the bucket) for that. Only a quota's first bucket reads the
//! node (passes counted before the rule was loaded); the bucket after it
//! takes the larger of the node's passes and what was handed out.
//!
//! **Late entries.** An entry that read the clock in a bucket the rule has
//! already left (another thread began the next one in between) is checked
//! against the rule's current bucket, as Sentinel checks against the
//! window at the instant of the check, and is counted there: the quota
//! tells the caller to record its pass at that bucket's start
//! ([`Acquired::PassedAt`]), so that every pass is in the bucket whose
//! permit it spent. No bucket-aligned window ever holds more than the
//! count.
//!
//! Nothing is lost to leases either: a thread that finds too few permits
//! left takes back what the other leases hold (with a compare-and-swap on
//! their words, which is why the owner spends with one too) before it
//! refuses, so an entry is refused only when the passes and its permits
//! would go over the count, as in Sentinel, but for permits in transit at
//! that instant (taken by another entry that has not been counted yet, or
//! taken back from a lease by another thread and not yet returned). A
//! permit spent by an entry that a later check refuses, or whose wait in a
//! rate limiter's queue is cancelled, is given back.
//!
//! Two threads get lease slots per rule; others take exact permits from
//! `granted` with one compare-and-swap each. Leases serve the node's
//! default window (1 s of two buckets); rules on nodes with other windows
//! read the node.

use crate::node::StatisticNode;
use crate::stat::MetricEvent;
use crate::stat::owner::{self, NO_OWNER};
use crate::sync::atomic::AtomicU64;
use crate::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release, SeqCst};

/// The most permits one lease takes.
const MAX_LEASE: u64 = 256;
/// Bits of `granted` in the state word; the bucket's tag has the rest.
const GRANTED_BITS: u32 = 40;
const GRANTED: u64 = (1 << GRANTED_BITS) - 1;
/// Tags wrap at this many buckets (97 days of 500 ms buckets).
const TAGS: u64 = 1 << (64 - GRANTED_BITS);
/// While the start of the rule's bucket is not written yet (just after it
/// began), how many buckets behind the rule's, by the tags, an entry may be
/// and still be taken for late; further behind, the rule's bucket is taken
/// for one that wrapped around and starts anew. With the start written, an
/// entry from any earlier bucket is late.
const LATE: u64 = 2;
/// The state before any bucket: `granted` all ones, which no count reaches.
const NO_STATE: u64 = GRANTED;
/// A tagged word that holds nothing yet (its count all ones).
const NONE: u64 = GRANTED;
/// The largest count leases serve (larger ones read the node: nothing that
/// large is ever reached).
pub(crate) const MAX_COUNT: f64 = (1u64 << (GRANTED_BITS - 1)) as f64;
/// A lease that holds no bucket.
const NO_BUCKET: u64 = u64::MAX;
/// A node whose window leases cannot serve: its rate is not its passes.
const UNSERVED: u64 = u64::MAX;

/// What a quota decided for an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acquired {
    /// The node's window is not one leases serve: the caller reads it.
    Unserved,
    /// Too few permits are left.
    Refused,
    /// Passed on a permit of the bucket holding the entry's time.
    Passed,
    /// Passed on a permit of the rule's current bucket, which began after
    /// the entry read the clock: the pass is to be counted at its start.
    PassedAt(u64),
}

/// What a quota reads of its node: the second window's shape and passes.
pub(crate) trait Passes {
    /// The second window's interval and bucket length, in milliseconds.
    fn window_ms(&self) -> (u64, u64);
    /// The passes in the second window at `now`.
    fn passes(&self, now: u64) -> u64;
}

impl Passes for StatisticNode {
    #[inline]
    fn window_ms(&self) -> (u64, u64) {
        self.second_window_ms()
    }

    #[inline]
    fn passes(&self, now: u64) -> u64 {
        self.sum(now, MetricEvent::Pass)
    }
}

/// Bytes set between two groups of a quota's fields that different
/// threads write, so that no 128-byte block (a pair of cache lines, which
/// prefetchers fetch together) holds bytes of both: two bytes 128 apart
/// are never in one block, wherever the quota is placed. Gaps instead of
/// `#[repr(align(128))]` leave the allocator no alignment to meet: an
/// allocation aligned to 128 bytes costs several plain ones, and a load
/// allocates a quota per rule.
#[derive(Clone, Copy)]
struct Gap(#[allow(dead_code)] [u8; 128]);

const GAP: Gap = Gap([0; 128]);

/// One thread's lease, on lines of its own (its owner is named in
/// [`Quota::owners`], which other threads read on every entry); the gap
/// keeps it off the lines of what comes before it.
#[repr(C)]
struct Lease {
    _gap: Gap,
    /// The start of the bucket the lease is for (owner only).
    start: AtomicU64,
    /// The bucket's tag above the permits left: spent by the owner, taken
    /// back by others, each with a compare-and-swap.
    word: AtomicU64,
}

impl Lease {
    fn new() -> Self {
        Lease {
            _gap: GAP,
            start: AtomicU64::new(NO_BUCKET),
            word: AtomicU64::new(0),
        }
    }
}

/// The rule's bucket and what it has granted, with what the next bucket
/// needs of it. Each word is a tag above a count. The gap keeps it off
/// the lines of what comes before it.
#[repr(C)]
struct State {
    _gap: Gap,
    /// The rule's bucket above `granted`: its base and every permit handed
    /// out in it since, less those handed back.
    word: AtomicU64,
    /// The base of the bucket tagged: written by the thread that began it,
    /// read by the one that begins the next (to tell what the bucket handed
    /// out) and lowered by permits of the bucket before found unspent.
    base: AtomicU64,
    /// Permits of the bucket before the tagged one found unspent, to take
    /// out of the tagged bucket's base once it is written.
    pending: AtomicU64,
    /// The quota's first bucket, above the passes the node had counted in
    /// it before the quota began (read by the thread that begins the next).
    before: AtomicU64,
    /// The start of the rule's bucket, written by the thread that began
    /// it: tells a bucket from one a whole wrap of the tags away.
    start: AtomicU64,
}

/// A bucket of the node's window: its start and its tag (its number,
/// wrapped to the bits above `granted`: a tag repeats after 2^24 buckets,
/// 97 days of 500 ms buckets).
#[derive(Clone, Copy, Debug)]
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

/// Permits granted, and the start of the bucket they are of.
#[derive(Clone, Copy, Debug)]
struct Grant {
    permits: u64,
    start: u64,
}

/// The tag after `tag`.
#[inline]
fn next_tag(tag: u64) -> u64 {
    (tag + 1) % TAGS
}

/// The count in a tagged word whose tag is `tag` and that holds one.
#[inline]
fn tagged(word: u64, tag: u64) -> Option<u64> {
    (word >> GRANTED_BITS == tag && word & GRANTED != NONE).then_some(word & GRANTED)
}

/// The quota of one reject QPS rule on its resource's node. In the order
/// written (`repr(C)`): what every entry reads, then the state and each
/// lease, each after a gap, then a gap that keeps what follows the quota
/// off the last lease's lines.
#[repr(C)]
pub(crate) struct Quota {
    /// The whole part of the count.
    limit: u64,
    /// The node window's bucket length, learnt on first use (0 until then),
    /// or [`UNSERVED`] when the node's window is not one leases serve.
    bucket_len: AtomicU64,
    /// The token of each lease's owner (see `stat::owner`), 0 while free;
    /// read on every entry, written only when a thread claims a lease.
    owners: [AtomicU64; 2],
    state: State,
    leases: [Lease; 2],
    _gap: Gap,
}

impl Quota {
    /// The quota of a rule of `count` (at most [`MAX_COUNT`]).
    pub(crate) fn new(count: f64) -> Self {
        debug_assert!(count <= MAX_COUNT);
        Quota {
            limit: count.floor() as u64,
            bucket_len: AtomicU64::new(0),
            owners: [AtomicU64::new(0), AtomicU64::new(0)],
            state: State {
                _gap: GAP,
                word: AtomicU64::new(NO_STATE),
                base: AtomicU64::new(NONE),
                pending: AtomicU64::new(0),
                before: AtomicU64::new(NONE),
                start: AtomicU64::new(NO_BUCKET),
            },
            leases: [Lease::new(), Lease::new()],
            _gap: GAP,
        }
    }

    /// Takes `n` permits at `now` for an entry to `node`.
    #[inline]
    pub(crate) fn acquire(&self, node: &impl Passes, n: u64, now: u64) -> Acquired {
        let bucket_len = match self.bucket_len.load(Relaxed) {
            0 => self.learn(node),
            len => len,
        };
        if bucket_len == UNSERVED {
            return Acquired::Unserved;
        }
        self.acquire_in(node, bucket_len, n, now)
    }

    /// The bucket length of `node`'s window, if leases can serve it: one
    /// second of two buckets, whose base is the bucket before.
    #[cold]
    fn learn(&self, node: &impl Passes) -> u64 {
        let (interval, bucket_len) = node.window_ms();
        let len = if interval == 1_000 && bucket_len * 2 == interval {
            bucket_len
        } else {
            UNSERVED
        };
        self.bucket_len.store(len, Relaxed);
        len
    }

    #[inline]
    fn acquire_in(&self, node: &impl Passes, bucket_len: u64, n: u64, now: u64) -> Acquired {
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
                        return Acquired::Passed;
                    }
                }
                return self.renew(lease, node, bucket_len, n, now);
            }
        }
        self.acquire_slow(me, node, bucket_len, n, now)
    }

    /// Gives back `n` permits of an entry refused later, which passed on
    /// them at `at` (when its pass was to be counted).
    pub(crate) fn give_back(&self, n: u64, at: u64) {
        let bucket_len = self.bucket_len.load(Relaxed);
        if bucket_len == 0 || bucket_len == UNSERVED {
            return;
        }
        let me = owner::token();
        let tag = Bucket::at(at, bucket_len).tag;
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
        self.unspend(tag, n);
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
        node: &impl Passes,
        bucket_len: u64,
        n: u64,
        now: u64,
    ) -> Acquired {
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
        let bucket = Bucket::at(now, bucket_len);
        match self.take(node, bucket, bucket_len, n, n, now) {
            Some(grant) => Self::passed(grant, bucket),
            None => Acquired::Refused,
        }
    }

    /// The verdict for an entry of `bucket` granted `grant`.
    #[inline]
    fn passed(grant: Grant, bucket: Bucket) -> Acquired {
        if grant.start == bucket.start {
            Acquired::Passed
        } else {
            Acquired::PassedAt(grant.start)
        }
    }

    /// A new lease for the owner of `lease`, whose lease cannot pay `n`
    /// permits.
    #[cold]
    #[inline(never)]
    fn renew(
        &self,
        lease: &Lease,
        node: &impl Passes,
        bucket_len: u64,
        n: u64,
        now: u64,
    ) -> Acquired {
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
            return Acquired::Refused;
        }
        if word >> GRANTED_BITS != tag || word & GRANTED > 0 {
            // What the lease holds (of an earlier bucket, or too little for
            // this entry) goes back first: to serve another thread, or,
            // spent in no bucket, out of the next bucket's base.
            let word = lease.word.swap(tag << GRANTED_BITS, Relaxed);
            if word & GRANTED > 0 {
                self.unspend(word >> GRANTED_BITS, word & GRANTED);
            }
        }
        if held != start {
            lease.start.store(start, Relaxed);
        }
        match self.take(node, bucket, bucket_len, n, MAX_LEASE.max(n), now) {
            Some(grant) => {
                if grant.permits > n {
                    // Only a grant in the lease's own bucket is larger than
                    // the entry needs.
                    lease.word.fetch_add(grant.permits - n, Relaxed);
                }
                Self::passed(grant, bucket)
            }
            None => Acquired::Refused,
        }
    }

    /// Whether fewer than `n` permits are left in the bucket tagged `tag`,
    /// counting what the leases hold of it and of the bucket before (which
    /// `take` would take back).
    #[inline]
    fn exhausted(&self, tag: u64, n: u64) -> bool {
        let state = self.state.word.load(Acquire);
        state >> GRANTED_BITS == tag
            && state & GRANTED != NO_STATE
            && self.limit.saturating_sub(state & GRANTED) < n
            && self.leases.iter().all(|lease| {
                let word = lease.word.load(Relaxed);
                word & GRANTED == 0 || !Self::counts_in(word >> GRANTED_BITS, tag)
            })
    }

    /// Whether permits of the bucket tagged `held` count in the bucket
    /// tagged `tag`: its own, or the one before (in its base).
    #[inline]
    fn counts_in(held: u64, tag: u64) -> bool {
        held == tag || next_tag(held) == tag
    }

    /// Takes permits, as [`grant`](Self::grant); when too few are left,
    /// takes back what the leases hold and tries once more.
    fn take(
        &self,
        node: &impl Passes,
        bucket: Bucket,
        bucket_len: u64,
        n: u64,
        most: u64,
        now: u64,
    ) -> Option<Grant> {
        let tag = match self.grant(node, bucket, bucket_len, n, most, now) {
            Ok(grant) => return Some(grant),
            Err(tag) => tag,
        };
        let mut reclaimed = false;
        for lease in &self.leases {
            if let Some((held, permits)) = Self::reclaim(lease, |held| Self::counts_in(held, tag)) {
                self.unspend(held, permits);
                reclaimed = true;
            }
        }
        if !reclaimed {
            return None;
        }
        self.grant(node, bucket, bucket_len, n, n, now).ok()
    }

    /// Takes every permit `lease` holds, if it holds any of a bucket that
    /// `wanted` accepts: that bucket's tag and the permits.
    fn reclaim(lease: &Lease, wanted: impl Fn(u64) -> bool) -> Option<(u64, u64)> {
        let mut word = lease.word.load(Relaxed);
        while word & GRANTED > 0 && wanted(word >> GRANTED_BITS) {
            let held = word >> GRANTED_BITS;
            match lease
                .word
                .compare_exchange_weak(word, held << GRANTED_BITS, Relaxed, Relaxed)
            {
                Ok(_) => return Some((held, word & GRANTED)),
                Err(current) => word = current,
            }
        }
        None
    }

    /// Takes between `n` and `most` permits (an eighth of those left,
    /// within those bounds) for an entry of `bucket`: of that bucket, or of
    /// the rule's if it has begun a later one since the entry read the
    /// clock (then exactly `n`). `Err` with the tag of the bucket whose
    /// permits ran out.
    fn grant(
        &self,
        node: &impl Passes,
        bucket: Bucket,
        bucket_len: u64,
        n: u64,
        most: u64,
        now: u64,
    ) -> Result<Grant, u64> {
        let mut state = self.state.word.load(Acquire);
        loop {
            let held = state >> GRANTED_BITS;
            // The start of the rule's bucket; by the tags if not written yet.
            let rule_start = self.rule_start(held, bucket_len);
            let (into, most) = if state & GRANTED != NO_STATE
                && held == bucket.tag
                && rule_start.is_none_or(|start| start == bucket.start)
            {
                (bucket, most)
            } else {
                // Whether the rule's bucket is later than the entry's: by
                // its start (however late the entry), or, while that is not
                // written yet, by the tags (at most `LATE` buckets, past
                // which a tag is taken for one that wrapped around).
                let behind = held.wrapping_sub(bucket.tag) % TAGS;
                let (start, later) = match rule_start {
                    Some(start) => (start, start > bucket.start),
                    None => (
                        bucket.start + behind * bucket_len,
                        behind != 0 && behind <= LATE,
                    ),
                };
                if state & GRANTED == NO_STATE || !later {
                    state = self.begin(node, state, bucket, bucket_len, now);
                    continue;
                }
                // A later bucket has begun since this entry read the clock:
                // the entry is checked and counted there. (Never the other
                // way: the rule's bucket never moves back, or its count
                // would start anew in a window that has passes.)
                (Bucket { start, tag: held }, n)
            };
            let granted = state & GRANTED;
            let left = self.limit.saturating_sub(granted);
            if left < n {
                return Err(into.tag);
            }
            let permits = (left / 8).clamp(n, most.max(n)).min(left);
            let next = into.tag << GRANTED_BITS | (granted + permits);
            match self
                .state
                .word
                .compare_exchange_weak(state, next, AcqRel, Acquire)
            {
                Ok(_) => {
                    return Ok(Grant {
                        permits,
                        start: into.start,
                    });
                }
                Err(current) => state = current,
            }
        }
    }

    /// Begins `bucket` (later than the rule's, as of `state`): its base is
    /// what the bucket before handed out, or, for the quota's first, the
    /// passes the node has counted in the window. The rule's state after.
    #[cold]
    #[inline(never)]
    fn begin(
        &self,
        node: &impl Passes,
        state: u64,
        bucket: Bucket,
        bucket_len: u64,
        now: u64,
    ) -> u64 {
        let held = state >> GRANTED_BITS;
        let first = state & GRANTED == NO_STATE;
        // The bucket right after the rule's (by its start if written, else
        // by the tags), not one a wrap of the tags later.
        let follows = !first
            && bucket.tag == next_tag(held)
            && self
                .rule_start(held, bucket_len)
                .is_none_or(|start| start + bucket_len == bucket.start);
        let (base, before) = if first {
            // Passes counted before the quota began: in the window, and in
            // this bucket (a window read one bucket on holds only it).
            let before = node.passes(bucket.start + bucket_len);
            (node.passes(now).max(before), Some(before))
        } else if follows {
            // What the bucket before handed out (all it granted, if its
            // base was never written: a thread stopped in `begin` for a
            // whole bucket), and what the node had counted in it before
            // the quota began, if it was the quota's first.
            let handed = (state & GRANTED)
                .saturating_sub(tagged(self.state.base.load(Acquire), held).unwrap_or(0));
            let counted_before = tagged(self.state.before.load(Acquire), held).unwrap_or(0);
            (handed + counted_before, None)
        } else {
            // The rule was idle for a whole bucket or more.
            (0, None)
        };
        let next = bucket.tag << GRANTED_BITS | base.min(GRANTED - 1);
        if let Err(current) = self
            .state
            .word
            .compare_exchange(state, next, AcqRel, Acquire)
        {
            return current;
        }
        self.state.start.store(bucket.start, Release);
        if let Some(before) = before {
            self.state.before.store(
                bucket.tag << GRANTED_BITS | before.min(GRANTED - 1),
                Release,
            );
        }
        // Published before the leftovers below are taken out of it, and
        // before a thread that hands back permits of the bucket before
        // could look for it (`unspend`): one of the two takes them out.
        self.state.base.store(next, SeqCst);
        if follows {
            // Permits the leases hold of the bucket before were handed out
            // and never spent.
            for lease in &self.leases {
                if let Some((tag, permits)) = Self::reclaim(lease, |tag| tag == held) {
                    self.unspend(tag, permits);
                }
            }
        }
        self.settle(bucket.tag);
        self.state.word.load(Acquire)
    }

    /// The start of the rule's bucket, tagged `held`, if written yet.
    #[inline]
    fn rule_start(&self, held: u64, bucket_len: u64) -> Option<u64> {
        let start = self.state.start.load(Acquire);
        (start != NO_BUCKET && start / bucket_len % TAGS == held).then_some(start)
    }

    /// Returns `n` permits handed out in the bucket tagged `tag` and never
    /// spent: to that bucket while it is the rule's, or out of the base of
    /// the next (which counted them as spent) while that one is.
    fn unspend(&self, tag: u64, n: u64) {
        let into_own = self.state.word.fetch_update(AcqRel, Acquire, |state| {
            (state >> GRANTED_BITS == tag && state & GRANTED != NO_STATE)
                .then(|| state - n.min(state & GRANTED))
        });
        let state = match into_own {
            Ok(_) => return,
            Err(state) => state,
        };
        let next = next_tag(tag);
        if state >> GRANTED_BITS != next || state & GRANTED == NO_STATE {
            // A later bucket: its base does not hold them.
            return;
        }
        // Left for the next bucket's base, then taken out of it if it is
        // written; the thread writing it looks for them after it has.
        let _ = self.state.pending.fetch_update(SeqCst, SeqCst, |pending| {
            let held = tagged(pending, next).unwrap_or(0);
            Some(next << GRANTED_BITS | (held + n).min(GRANTED - 1))
        });
        if tagged(self.state.base.load(SeqCst), next).is_some() {
            self.settle(next);
        }
    }

    /// Takes the permits left pending for the bucket tagged `tag` out of
    /// its base and its `granted`, in that order (a thread beginning the
    /// bucket after, in between, takes the bucket to have handed out more
    /// than it did: never fewer).
    fn settle(&self, tag: u64) {
        let mut pending = self.state.pending.load(SeqCst);
        let n = loop {
            match tagged(pending, tag) {
                Some(n) if n > 0 => {}
                _ => return,
            }
            match self
                .state
                .pending
                .compare_exchange(pending, tag << GRANTED_BITS, SeqCst, SeqCst)
            {
                Ok(_) => break pending & GRANTED,
                Err(current) => pending = current,
            }
        };
        let Ok(base) = self.state.base.fetch_update(AcqRel, Acquire, |base| {
            tagged(base, tag).map(|b| base - n.min(b))
        }) else {
            return;
        };
        let taken = n.min(base & GRANTED);
        let _ = self.state.word.fetch_update(AcqRel, Acquire, |state| {
            (state >> GRANTED_BITS == tag && state & GRANTED != NO_STATE)
                .then(|| state - taken.min(state & GRANTED))
        });
    }
}

impl std::fmt::Debug for Quota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.state.word.load(Relaxed);
        f.debug_struct("Quota")
            .field("limit", &self.limit)
            .field("granted", &(state & GRANTED))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;

/// Model checks of the lease protocol (`--cfg loom`; see `crate::sync`).
#[cfg(all(test, loom))]
mod loom_tests;
