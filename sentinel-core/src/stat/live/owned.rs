//! The owner's parts: slots of the second window that one thread writes
//! with plain loads and stores.
//!
//! **Invariant.** Only a part's owner stores to its words, starts, minimum
//! RTs and hint, so the owner's adds need no atomic read-modify-write and
//! no store of the owner can undo another thread's.
//!
//! - *Who writes what.* A thread becomes the owner by
//!   [`claim`](LiveWindows::claim): a compare-and-swap from no owner, or
//!   from an owner whose token is no longer live (acquire, against the
//!   exited thread's release in [`owner`](crate::stat::owner)), so the new
//!   owner starts from everything the old one wrote. The owner adds with a
//!   load and a store ([`write_owned`](LiveWindows::write_owned)); an add
//!   that would carry a lane past 32 bits is refused, and the caller makes
//!   it through the shared part instead.
//! - *What a reader may see.* The owner rotates its slot itself
//!   ([`rotate_owned`](LiveWindows::rotate_owned)): inside a fold, it reads
//!   and zeroes the words, then publishes the new start with release. A
//!   reader that loads the new start (acquire) sees none of the old
//!   slice's values; one that loads the old start may see old values or
//!   zeros, which the fold's sequence check (`fold.rs`) settles for every
//!   read that sums across folds. Second-window reads need no check: the
//!   slice folded has already left the second window.
//! - *Why nothing is lost or counted twice.* The words are zeroed by the
//!   only thread that adds to them, right after it read what it folds: no
//!   add can land in between.
//!
//! The layout keeps owners of different nodes off each other's lines, and
//! a check on another core (which reads the heads) off the line the
//! owner's exits write (the tails).
//!
//! Loom models: `loom_owner_rotation_*` and
//! `loom_token_reuse_and_takeover_see_the_exited_owners_writes` in
//! `live/loom_tests.rs`.

use crate::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use crate::sync::atomic::{AtomicU32, AtomicU64};

use super::{LANES, LiveWindows, UNUSED, WORDS};
use crate::stat::adder::packed_add;
use crate::stat::bucket::{LANE_PASS, NO_RT};
use crate::stat::owner::is_live;

/// The value of `lane` in a packed word.
#[inline]
pub(super) fn lane_of(word: u64, lane: usize) -> u64 {
    if lane % 2 == 0 {
        u64::from(word as u32)
    } else {
        word >> 32
    }
}

/// What a QPS check reads of an owner's slot: the start of the slice it
/// holds and the pass and block lanes (word 0).
struct Head {
    start: AtomicU64,
    pass_block: AtomicU64,
}

const _: () = assert!(LANE_PASS / 2 == 0, "the pass lane is in the head");

/// What only exits write: the other words and the minimum RT.
struct Tail {
    words: [AtomicU64; WORDS - 1],
    min_rt: AtomicU32,
}

/// Two slots on a pair of lines of their own (x86 fetches lines in pairs), so
/// that the owners of two nodes never write the same pair. The heads share
/// one line and the tails the other: a check on another core reads the
/// heads, so the owner's exits write a line that no reader pulls away.
#[repr(align(128))]
struct SlotPair {
    heads: [Head; 2],
    tails: Aligned<[Tail; 2]>,
}

#[repr(align(64))]
struct Aligned<T>(T);

impl SlotPair {
    fn new() -> Self {
        let head = || Head {
            start: AtomicU64::new(UNUSED),
            pass_block: AtomicU64::new(0),
        };
        let tail = || Tail {
            words: std::array::from_fn(|_| AtomicU64::new(0)),
            min_rt: AtomicU32::new(NO_RT),
        };
        SlotPair {
            heads: [head(), head()],
            tails: Aligned([tail(), tail()]),
        }
    }
}

/// The owner's part of one slot of the second window.
#[derive(Clone, Copy)]
pub(super) struct Slot<'a> {
    head: &'a Head,
    tail: &'a Tail,
}

impl<'a> Slot<'a> {
    #[inline(always)]
    pub(super) fn start(self) -> &'a AtomicU64 {
        &self.head.start
    }

    #[inline(always)]
    pub(super) fn word(self, word: usize) -> &'a AtomicU64 {
        match word {
            0 => &self.head.pass_block,
            w => &self.tail.words[w - 1],
        }
    }

    #[inline(always)]
    pub(super) fn min_rt(self) -> &'a AtomicU32 {
        &self.tail.min_rt
    }
}

/// The slots of the second window one thread owns: it alone writes them,
/// with plain loads and stores.
pub(super) struct Owned {
    /// The owner's token; 0 until a thread claims the part.
    pub(super) owner: AtomicU64,
    slots: Box<[SlotPair]>,
    /// The owner's latest slice and its slot, written by the owner only: while
    /// time stays in that slice the owner finds its slot without dividing.
    pub(super) hint_start: AtomicU64,
    pub(super) hint_slot: AtomicU32,
}

impl Owned {
    pub(super) fn new(slot_count: usize) -> Self {
        Owned {
            owner: AtomicU64::new(0),
            slots: (0..slot_count.div_ceil(2))
                .map(|_| SlotPair::new())
                .collect(),
            hint_start: AtomicU64::new(UNUSED),
            hint_slot: AtomicU32::new(0),
        }
    }

    #[inline]
    pub(super) fn slot(&self, index: usize) -> Slot<'_> {
        let pair = &self.slots[index / 2];
        Slot {
            head: &pair.heads[index % 2],
            tail: &pair.tails.0[index % 2],
        }
    }
}

/// The owner's side of the protocol.
impl LiveWindows {
    /// Whether `me` owns `part`, taking it over if it has no owner or its
    /// owner has exited.
    #[inline]
    pub(super) fn claim(part: &Owned, me: u64) -> bool {
        let owner = part.owner.load(Relaxed);
        owner == me
            || ((owner == 0 || !is_live(owner))
                && part
                    .owner
                    .compare_exchange(owner, me, Acquire, Relaxed)
                    .is_ok())
    }

    /// The owner's add to its part of `slot`, which holds the right slice: a
    /// load and a store. `false` when a lane would overflow 32 bits (the
    /// shared part takes the add instead).
    #[inline(always)]
    pub(super) fn write_owned(
        slot: Slot<'_>,
        word: usize,
        low: u64,
        high: u64,
        rt: Option<u32>,
    ) -> bool {
        let cell = slot.word(word);
        let Some(next) = packed_add(cell.load(Relaxed), low, high) else {
            return false;
        };
        cell.store(next, Relaxed);
        if let Some(rt) = rt
            && rt < slot.min_rt().load(Relaxed)
        {
            slot.min_rt().store(rt, Relaxed);
        }
        true
    }

    /// Moves the owner's part of `slot` from slice `held` to `start`.
    #[cold]
    pub(super) fn rotate_owned(&self, slot: Slot<'_>, held: u64, start: u64) {
        if held == UNUSED {
            slot.start().store(start, Release);
            return;
        }
        self.begin_fold();
        let mut lanes = [0u64; LANES];
        for (w, cell) in (0..WORDS).map(|w| (w, slot.word(w))) {
            let v = cell.load(Relaxed);
            lanes[2 * w] = lane_of(v, 2 * w);
            lanes[2 * w + 1] = lane_of(v, 2 * w + 1);
            cell.store(0, Relaxed);
        }
        let min_rt = slot.min_rt().load(Relaxed);
        slot.min_rt().store(NO_RT, Relaxed);
        self.fold(held, &lanes, min_rt);
        // Zeroed before the new start is published: a reader that sees the
        // new start sees no old value.
        slot.start().store(start, Release);
        self.end_fold();
    }
}
