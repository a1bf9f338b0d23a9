//! Per-thread recorders: where a thread counts the response times of one
//! resource for the second it is in.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicU32, AtomicU64};

use once_cell::race::OnceBox;

use super::buckets::BUCKETS;
use crate::stat::owner::TOKEN_SLOTS;

/// The second of a recorder, or of a place of the minute, that has never
/// held one.
pub(super) const UNUSED: u64 = u64::MAX;

/// Recorders per chunk of the table.
const CHUNK: usize = 64;

/// One thread's counts for one resource and one second. Only the thread
/// holding the token slot of the recorder writes it (plain loads and stores,
/// no read-modify-write); readers load it with the minute locked.
#[derive(Debug)]
#[repr(align(128))]
pub(super) struct ThreadRecorder {
    /// The second the counts are for ([`UNUSED`] before the first call).
    pub(super) second: AtomicU64,
    /// The sum of the times, in milliseconds.
    pub(super) sum: AtomicU64,
    /// The largest time.
    pub(super) max: AtomicU64,
    /// Calls by bucket.
    pub(super) counts: [AtomicU32; BUCKETS],
}

impl ThreadRecorder {
    fn new() -> Self {
        ThreadRecorder {
            second: AtomicU64::new(UNUSED),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
            counts: std::array::from_fn(|_| AtomicU32::new(0)),
        }
    }

    /// Counts one call that took `rt_ms` in bucket `bucket`. Called only by
    /// the owning thread, in the recorder's second.
    #[inline(always)]
    pub(super) fn add(&self, bucket: usize, rt_ms: u64) {
        let count = &self.counts[bucket];
        count.store(count.load(Relaxed).saturating_add(1), Relaxed);
        self.sum
            .store(self.sum.load(Relaxed).wrapping_add(rt_ms), Relaxed);
        if rt_ms > self.max.load(Relaxed) {
            self.max.store(rt_ms, Relaxed);
        }
    }
}

type Chunk = [OnceBox<ThreadRecorder>; CHUNK];

/// The recorders of one resource, by thread token slot, made on each
/// thread's first call: a table of chunks, so that a few threads cost a
/// few recorders and one chunk.
#[derive(Debug)]
pub(super) struct Recorders {
    chunks: [OnceBox<Chunk>; TOKEN_SLOTS / CHUNK],
}

impl Recorders {
    pub(super) fn new() -> Self {
        Recorders {
            chunks: std::array::from_fn(|_| OnceBox::new()),
        }
    }

    /// The recorder of token slot `index` (below [`TOKEN_SLOTS`]), made on
    /// first use.
    #[inline(always)]
    pub(super) fn get(&self, index: usize) -> &ThreadRecorder {
        let chunk = self.chunks[index / CHUNK]
            .get_or_init(|| Box::new(std::array::from_fn(|_| OnceBox::new())));
        chunk[index % CHUNK].get_or_init(|| Box::new(ThreadRecorder::new()))
    }

    /// Every recorder made so far.
    pub(super) fn iter(&self) -> impl Iterator<Item = &ThreadRecorder> + '_ {
        self.chunks
            .iter()
            .filter_map(OnceBox::get)
            .flat_map(|chunk| chunk.iter().filter_map(OnceBox::get))
    }
}
