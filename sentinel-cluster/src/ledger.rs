//! One flow id's count of what this instance admitted, per bucket of the
//! cluster window on the instance's clock: the permits Redis granted it
//! (recorded by the worker when a lease is filled, taken off when refunded)
//! and the entries its fallback admitted (Redis down, or slower than the
//! budget). The fallback admits an entry only while both together, over
//! the window, stay within the instance's fallback allowance, so that in
//! any window the instance admits at most what the cluster granted it plus
//! that allowance. The fallback admissions not yet told to Redis are
//! handed to the next acquire call, which adds them to the cluster's
//! window before granting: the window Redis keeps hears of every admission.
//!
//! Behind a lock: only entries the lease could not serve (and the worker)
//! come here, never the lease's hit path.

/// One bucket of the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Bucket {
    /// Start (instance ms); `None` before first use.
    start: Option<u64>,
    granted: u64,
    fallback: u64,
    /// Of `fallback`, what an acquire call has carried to Redis.
    reported: u64,
}

/// Fallback admissions for Redis: (age of their bucket's start at the
/// call's instant, ms; admissions).
pub(crate) type Charges = Vec<(u64, u64)>;

/// The most buckets a ledger keeps: a rule with more samples is counted
/// here in fewer, longer buckets covering at least its window (64 words
/// of four at most per flow id).
const MAX_BUCKETS: u64 = 64;

/// A flow id's admissions on this instance, per bucket.
#[derive(Debug)]
pub(crate) struct Ledger {
    window_ms: u64,
    bucket_ms: u64,
    buckets: Vec<Bucket>,
    /// The latest instant (instance ms) of a fallback admission.
    latest_ms: u64,
}

impl Ledger {
    pub(crate) fn new(window_ms: u64, samples: u32) -> Self {
        let window_ms = window_ms.max(1);
        let bucket_ms = window_ms.div_ceil(u64::from(samples.max(1)).min(MAX_BUCKETS));
        let len = window_ms.div_ceil(bucket_ms);
        Ledger {
            window_ms: len * bucket_ms,
            bucket_ms,
            buckets: vec![Bucket::default(); len as usize],
            latest_ms: 0,
        }
    }

    /// Takes the window's shape, starting afresh when it changed.
    pub(crate) fn reshape(&mut self, window_ms: u64, samples: u32) {
        let fresh = Ledger::new(window_ms, samples);
        if (fresh.window_ms, fresh.bucket_ms) != (self.window_ms, self.bucket_ms) {
            *self = fresh;
        }
    }

    fn start_of(&self, at_ms: u64) -> u64 {
        at_ms - at_ms % self.bucket_ms
    }

    /// The bucket of `at_ms`, emptied if it held an older one; `None` when
    /// it holds a newer one (`at_ms` has left the window).
    fn bucket(&mut self, at_ms: u64) -> Option<&mut Bucket> {
        let start = self.start_of(at_ms);
        let index = (start / self.bucket_ms) as usize % self.buckets.len();
        let bucket = &mut self.buckets[index];
        match bucket.start {
            Some(held) if held > start => None,
            Some(held) if held == start => Some(bucket),
            _ => {
                *bucket = Bucket {
                    start: Some(start),
                    ..Bucket::default()
                };
                Some(bucket)
            }
        }
    }

    /// The buckets of the window that ends with `now_ms`'s.
    fn in_window(&self, now_ms: u64) -> impl Iterator<Item = &Bucket> {
        let current = self.start_of(now_ms);
        let oldest = current.saturating_sub(self.window_ms - self.bucket_ms);
        self.buckets
            .iter()
            .filter(move |b| b.start.is_some_and(|s| (oldest..=current).contains(&s)))
    }

    /// What the window ending at `now_ms` holds: granted and admitted by
    /// the fallback.
    pub(crate) fn admitted(&self, now_ms: u64) -> u64 {
        self.in_window(now_ms).map(|b| b.granted + b.fallback).sum()
    }

    /// Admits `permits` by the fallback at `now_ms` if the window keeps
    /// within `allowance` with them (and counts them).
    pub(crate) fn admit_fallback(&mut self, permits: u64, allowance: u64, now_ms: u64) -> bool {
        if self.admitted(now_ms) + permits > allowance {
            return false;
        }
        match self.bucket(now_ms) {
            Some(bucket) => {
                bucket.fallback += permits;
                self.latest_ms = self.latest_ms.max(now_ms);
                true
            }
            None => false,
        }
    }

    /// The latest instant of a fallback admission (instance ms; 0 before
    /// any).
    pub(crate) fn latest_ms(&self) -> u64 {
        self.latest_ms
    }

    /// Records `permits` granted for the bucket that holds `at_ms`.
    pub(crate) fn grant(&mut self, permits: u64, at_ms: u64) {
        if let Some(bucket) = self.bucket(at_ms) {
            bucket.granted += permits;
        }
    }

    /// Takes off `permits` granted for the bucket of `at_ms` and refunded.
    pub(crate) fn refund(&mut self, permits: u64, at_ms: u64) {
        let start = self.start_of(at_ms);
        let index = (start / self.bucket_ms) as usize % self.buckets.len();
        let bucket = &mut self.buckets[index];
        if bucket.start == Some(start) {
            bucket.granted = bucket.granted.saturating_sub(permits);
        }
    }

    /// The fallback admissions of the window at `now_ms` not yet told to
    /// Redis, counted as told.
    pub(crate) fn take_unreported(&mut self, now_ms: u64) -> Charges {
        let current = self.start_of(now_ms);
        let oldest = current.saturating_sub(self.window_ms - self.bucket_ms);
        let mut charges = Charges::new();
        for bucket in &mut self.buckets {
            if let Some(start) = bucket.start
                && (oldest..=current).contains(&start)
                && bucket.fallback > bucket.reported
            {
                charges.push((now_ms - start, bucket.fallback - bucket.reported));
                bucket.reported = bucket.fallback;
            }
        }
        charges
    }

    /// Puts back charges taken at `now_ms` whose call failed: the next
    /// call carries them.
    pub(crate) fn untake(&mut self, charges: &Charges, now_ms: u64) {
        for (age, n) in charges {
            let start = now_ms.saturating_sub(*age);
            let index = (start / self.bucket_ms) as usize % self.buckets.len();
            let bucket = &mut self.buckets[index];
            if bucket.start == Some(start) {
                bucket.reported = bucket.reported.saturating_sub(*n);
            }
        }
    }
}

/// The fallback allowance of an instance: its share of the cluster
/// threshold, `threshold / live instances` rounded up (for `avg_local`
/// this is the rule's count), and the whole threshold for an instance
/// that never heard of another.
pub(crate) fn allowance(threshold: u64, instances: u64) -> u64 {
    threshold.div_ceil(instances.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fallback_admits_within_the_allowance_less_what_was_granted() {
        // A 1 s window of 10 buckets; the instance's share is 100.
        let mut ledger = Ledger::new(1_000, 10);
        ledger.grant(80, 10_050);
        assert_eq!(ledger.admitted(10_099), 80);
        let admitted = (0..50)
            .filter(|_| ledger.admit_fallback(1, 100, 10_500))
            .count();
        assert_eq!(admitted, 20, "granted 80 + 20 by the fallback");
        // The grant's bucket leaves the window at 11 000: room again.
        assert!(!ledger.admit_fallback(1, 100, 10_999));
        assert!(ledger.admit_fallback(80, 100, 11_000));
        assert_eq!(ledger.admitted(11_000), 100);
    }

    #[test]
    fn refunds_give_the_fallback_room_back() {
        let mut ledger = Ledger::new(1_000, 10);
        ledger.grant(100, 5_000);
        assert!(!ledger.admit_fallback(1, 100, 5_010));
        ledger.refund(30, 5_099);
        assert!(ledger.admit_fallback(30, 100, 5_100));
        assert!(!ledger.admit_fallback(1, 100, 5_100));
    }

    #[test]
    fn fallback_admissions_are_told_to_redis_once_with_their_age() {
        let mut ledger = Ledger::new(1_000, 10);
        assert!(ledger.admit_fallback(3, 100, 7_020));
        assert!(ledger.admit_fallback(2, 100, 7_250));
        let mut charges = ledger.take_unreported(7_260);
        charges.sort();
        assert_eq!(charges, vec![(60, 2), (260, 3)]);
        assert_eq!(ledger.take_unreported(7_270), vec![]);
        // A failed call puts them back for the next one.
        ledger.untake(&charges, 7_260);
        assert!(ledger.admit_fallback(1, 100, 7_290));
        let mut again = ledger.take_unreported(7_300);
        again.sort();
        assert_eq!(again, vec![(100, 3), (300, 3)]);
        // Admissions that have left the window are not told.
        assert!(ledger.admit_fallback(4, 100, 7_400));
        assert_eq!(ledger.take_unreported(8_450), vec![]);
    }

    #[test]
    fn a_bucket_reused_for_a_later_one_starts_empty() {
        let mut ledger = Ledger::new(1_000, 10);
        ledger.grant(50, 1_000);
        ledger.grant(7, 2_000); // same slot, one window later
        assert_eq!(ledger.admitted(2_000), 7);
        // A grant for a bucket older than the slot holds is not counted.
        ledger.grant(9, 1_050);
        assert_eq!(ledger.admitted(2_000), 7);
    }

    #[test]
    fn many_samples_are_kept_in_at_most_64_buckets_covering_the_window() {
        let ledger = Ledger::new(1_000, 1_000);
        assert_eq!((ledger.bucket_ms, ledger.buckets.len()), (16, 63));
        assert!(ledger.window_ms >= 1_000);
        let mut ledger = Ledger::new(1_000, 1_000);
        ledger.grant(5, 10_000);
        assert_eq!(ledger.admitted(10_999), 5, "still in the window");
        let ledger = Ledger::new(3_600_000, 3_600);
        assert_eq!(ledger.buckets.len(), 64);
    }

    #[test]
    fn the_allowance_is_the_instance_s_share_rounded_up() {
        assert_eq!(allowance(300, 3), 100);
        assert_eq!(allowance(300, 0), 300);
        assert_eq!(allowance(2, 3), 1);
        assert_eq!(allowance(0, 3), 0);
    }
}
