//! The buckets response times are counted in: log-linear, as an HDR
//! histogram's, small enough that a thread's counts for one resource fit in
//! 2 KiB.
//!
//! Below [`EXACT`] every millisecond has a bucket of its own. Above it each
//! power of two is cut into 32 buckets, so a bucket is at most 1/32 (3 %) of
//! its values wide. Times at or above [`TOP`] share the last bucket.

/// Times below this are counted exactly.
pub(crate) const EXACT: u64 = 64;
/// Buckets per power of two above [`EXACT`] (`2^SUB_BITS`).
const SUB_BITS: u32 = 5;
/// `log2(EXACT)`.
const EXACT_BITS: u32 = 6;
/// `log2(TOP)`.
const TOP_BITS: u32 = 20;
/// Times at or above this (about 17 minutes) are counted in the last bucket.
pub(crate) const TOP: u64 = 1 << TOP_BITS;
/// How many buckets.
pub(crate) const BUCKETS: usize = EXACT as usize + ((TOP_BITS - EXACT_BITS) << SUB_BITS) as usize;

/// The bucket of `rt_ms`.
#[inline(always)]
pub(crate) fn index(rt_ms: u64) -> usize {
    if rt_ms < EXACT {
        return rt_ms as usize;
    }
    let rt = rt_ms.min(TOP - 1);
    let octave = 63 - rt.leading_zeros();
    let sub = (rt >> (octave - SUB_BITS)) as usize - (1 << SUB_BITS);
    EXACT as usize + (((octave - EXACT_BITS) as usize) << SUB_BITS) + sub
}

/// The highest time counted in bucket `index`: what a quantile falling in
/// the bucket is reported as (never below the true value, as HDR
/// histograms report).
pub(crate) fn highest(index: usize) -> u64 {
    if index < EXACT as usize {
        return index as u64;
    }
    let above = index - EXACT as usize;
    let octave = EXACT_BITS + (above >> SUB_BITS) as u32;
    let sub = (above & ((1 << SUB_BITS) - 1)) as u64;
    (((1 << SUB_BITS) + sub + 1) << (octave - SUB_BITS)) - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_time_falls_in_the_bucket_whose_range_holds_it() {
        assert_eq!(BUCKETS, 512);
        let mut previous_highest = None;
        for i in 0..BUCKETS {
            let high = highest(i);
            let low = previous_highest.map_or(0, |h: u64| h + 1);
            assert!(high >= low, "bucket {i}");
            assert_eq!(index(low), i, "lowest of bucket {i}");
            assert_eq!(index(high), i, "highest of bucket {i}");
            // At most 1/32 of the values wide.
            assert!(
                (high - low + 1) * 32 <= low.max(32),
                "bucket {i} is {low}..={high}"
            );
            previous_highest = Some(high);
        }
        assert_eq!(previous_highest, Some(TOP - 1));
        assert_eq!(index(TOP), BUCKETS - 1);
        assert_eq!(index(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn small_times_are_exact() {
        for rt in 0..EXACT {
            assert_eq!(highest(index(rt)), rt);
        }
        assert_eq!(highest(index(64)), 65);
        assert_eq!(highest(index(100)), 101);
        assert_eq!(highest(index(1_000)), 1_007);
    }
}
