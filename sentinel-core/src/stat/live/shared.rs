//! The shared parts: one per slot of the second window, for every thread
//! that owns no part of the node (and for an owner's add that would
//! overflow its 32-bit lane).
//!
//! **Invariant.** An add to a shared part is an atomic read-modify-write
//! on the slice the part holds, and a rotation takes each word by swapping
//! it with zero, so every add is counted exactly once: in the old slice
//! (taken by the swap and folded), in the new one (landed after the swap),
//! or as late (its slice older than the part's).
//!
//! - *Who writes what.* Any thread adds ([`add_shared`](LiveWindows::add_shared))
//!   after checking the part's start (acquire). A part that has never held
//!   a slice is started by a compare-and-swap. An older part is rotated by
//!   the one thread that wins the node's `rotating` try-lock (others yield
//!   and retry): inside a fold it swaps the lanes and minimum RT with their
//!   empty values, folds them under the old start, then publishes the new
//!   start (release).
//! - *What a reader may see.* An add that checked the old start just
//!   before the swap lands after it, in the words of the new slice: it is
//!   counted there, once. Reads that sum across folds check the fold
//!   sequence (`fold.rs`).
//! - *Why nothing is lost or counted twice.* The swap is atomic: an add is
//!   either before it (folded) or after it (left for the new slice).
//!
//! Loom models: `loom_shared_rotation_*` in `live/loom_tests.rs`.

use crate::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use crate::sync::atomic::{AtomicU32, AtomicU64};

use super::{LiveWindows, UNUSED};
use crate::stat::adder::{CachePadded, PackedLanes};
use crate::stat::bucket::NO_RT;

/// The part of one slot every other thread writes. Allocated on the first
/// such write, padded to its own lines so that the owner's stores and the
/// other threads' adds never share one.
pub(super) struct SharedPart {
    pub(super) start: AtomicU64,
    pub(super) min_rt: AtomicU32,
    pub(super) lanes: PackedLanes,
}

impl SharedPart {
    pub(super) fn new() -> Self {
        SharedPart {
            start: AtomicU64::new(UNUSED),
            min_rt: AtomicU32::new(NO_RT),
            lanes: PackedLanes::default(),
        }
    }
}

/// Every other thread's side of the protocol.
impl LiveWindows {
    /// Any thread's add, through the shared part of slot `index`.
    #[inline(never)]
    pub(super) fn add_shared(
        &self,
        index: usize,
        start: u64,
        word: usize,
        low: u64,
        high: u64,
        rt: Option<u32>,
    ) {
        let parts = self.shared.get_or_init(|| {
            (0..self.slot_count)
                .map(|_| CachePadded(SharedPart::new()))
                .collect::<Vec<_>>()
                .into_boxed_slice()
                .into()
        });
        let part = &parts[index].0;
        loop {
            let held = part.start.load(Acquire);
            if held == start {
                part.lanes.add_pair(word, low, high);
                if let Some(rt) = rt
                    && rt < part.min_rt.load(Relaxed)
                {
                    part.min_rt.fetch_min(rt, Relaxed);
                }
                return;
            }
            if held == UNUSED {
                let _ = part.start.compare_exchange(UNUSED, start, AcqRel, Acquire);
                continue;
            }
            if held > start {
                self.late(word, low, high);
                return;
            }
            self.rotate_shared(part, start);
        }
    }

    /// Moves `part` to slice `start` if this thread gets the lock; otherwise
    /// yields to the thread that has it. The caller retries.
    #[cold]
    fn rotate_shared(&self, part: &SharedPart, start: u64) {
        if self
            .rotating
            .compare_exchange(false, true, Acquire, Relaxed)
            .is_err()
        {
            crate::sync::yield_now();
            return;
        }
        let held = part.start.load(Acquire);
        if held < start {
            self.begin_fold();
            let lanes = part.lanes.take();
            let min_rt = part.min_rt.swap(NO_RT, Relaxed);
            self.fold(held, &lanes, min_rt);
            part.start.store(start, Release);
            self.end_fold();
        }
        self.rotating.store(false, Release);
    }
}
