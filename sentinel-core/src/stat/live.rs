//! The windows of a node as the hot path writes them.
//!
//! Two ideas keep an entry and its exit down to plain loads and stores on one
//! thread, where [`LeapArray`] of [`MetricBucket`]s needs an atomic
//! read-modify-write (about 7 ns on the reference machine) per event and
//! window:
//!
//! - **An owner thread.** The first thread to write a node owns it for good.
//!   Each slot of the second window has words only the owner writes, with a
//!   load and a store (no `lock` prefix), and a [`PackedLanes`] for every other
//!   thread (a compare-and-swap while uncontended, striped cells once two
//!   threads collide). A thread pool's worker that owns a node pays nothing
//!   for atomicity; a task that exits on another thread uses the shared part.
//!   The owner rotates its own words: when it writes a slot that holds an
//!   older slice, it folds the old values away and starts the new slice. No
//!   other thread ever stores to them, so no store of the owner can undo a
//!   reset. The shared part is rotated as a `LeapArray` slot is, under a
//!   try-lock, but by swapping each word with zero so that a racing add is
//!   either taken or left for the new slice, never lost.
//! - **The minute window is fed by folding.** Events are written to the
//!   second window only. When a slice of it is rotated out, its values are
//!   added to the minute bucket of its start and to the lifetime totals of
//!   every lane (one add per lane and slice, none per event). Reads of the
//!   minute window add the second-window slices not folded yet, so nothing is
//!   missing and nothing counted twice. A lifetime total is likewise the
//!   folded total plus every slice not folded yet, whatever its age.
//!   Concurrency needs no counter of its own: it is every pass ever recorded
//!   less every completion (the node corrects for batch counts above one).
//!
//! A fold moves values from one place to another; readers that sum across
//! both (minute totals, lifetime totals, concurrency) check a sequence number
//! and retry while a fold is running, like a seqlock, so they never see a
//! value twice or not at all. Second-window reads need no such check: a fold
//! only removes a slice that has already left the second window.
//!
//! Lifetime totals never go down between two reads: outside folds, every
//! place a value can be only grows, and a fold moves a slice's whole value
//! (at least what any earlier read saw of it) into the folded totals. That
//! holds only for reads that saw no fold running, so lifetime reads wait for
//! one ([`LiveWindows::lifetime_sums`]) where the other reads give up after a
//! bounded number of retries.

use crate::sync::Mutex;
use crate::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use crate::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, fence};
use std::cell::Cell;
use std::fmt;

use crate::sync::OnceBox;

use super::adder::{CachePadded, PackedLanes, packed_add};
use super::bucket::{LANE_PASS, LANE_SUCCESS, MetricBucket, NO_RT};
use super::divisor::Divisor;
use super::leap_array::LeapArray;
use super::window::WindowShape;

/// The start of a part that has never held a slice.
const UNUSED: u64 = u64::MAX;
/// The latest time told apart; later readings are taken as this.
const LAST_TIME: u64 = u64::MAX - 1;
/// Counters per bucket, and the words that pack them.
pub(crate) const LANES: usize = 6;
const WORDS: usize = LANES / 2;
/// One fold running, in the sequence word (the low bits count folds done).
const BUSY: u64 = 1 << 40;
/// How often a reader retries while folds run before it takes what it sees.
const READ_RETRIES: u32 = 256;

/// How many threads can own nodes at once; threads past this many write
/// through the shared parts.
#[cfg(not(loom))]
pub(crate) const TOKEN_SLOTS: usize = 4096;
/// Fewer under loom, where every slot is an atomic of each execution.
#[cfg(loom)]
pub(crate) const TOKEN_SLOTS: usize = 64;

/// The token of each live thread that has one, by slot; 0 when the slot is
/// free. A node whose owner's token is no longer here can be claimed by
/// another thread: the owner has exited and will never write again.
#[cfg(not(loom))]
static LIVE_TOKENS: [AtomicU64; TOKEN_SLOTS] = [const { AtomicU64::new(0) }; TOKEN_SLOTS];

/// Free token slots, the next never-used slot, and the generation counter
/// that makes a reused slot's token differ from every earlier one.
#[cfg(not(loom))]
static TOKEN_ALLOC: Mutex<TokenAlloc> = Mutex::new(TokenAlloc {
    free: Vec::new(),
    next_slot: 0,
    generation: 0,
});

// Under loom, made afresh for each execution, and shared with each
// thread's `TokenReturn`: loom may run a thread's locals' destructors after
// it has dropped the execution's statics.
#[cfg(loom)]
type LiveTokens = std::sync::Arc<[AtomicU64; TOKEN_SLOTS]>;
#[cfg(loom)]
type TokenAllocRef = std::sync::Arc<Mutex<TokenAlloc>>;
#[cfg(loom)]
crate::sync::lazy_static! {
    static ref LIVE_TOKENS: LiveTokens = std::sync::Arc::new(std::array::from_fn(|_| AtomicU64::new(0)));
    static ref TOKEN_ALLOC: TokenAllocRef = std::sync::Arc::new(Mutex::new(TokenAlloc {
        free: Vec::new(),
        next_slot: 0,
        generation: 0,
    }));
}

struct TokenAlloc {
    free: Vec<usize>,
    next_slot: usize,
    generation: u64,
}

/// The token of a thread that owns nothing (past [`TOKEN_SLOTS`], or in its
/// thread-local teardown).
pub(crate) const NO_OWNER: u64 = u64::MAX;

/// Gives the thread's token slot back when the thread exits.
struct TokenReturn {
    /// The token to give back and where: loom drops every thread-local of a
    /// thread before running any destructor (so `TOKEN` cannot be read
    /// here), and may have dropped its statics.
    #[cfg(loom)]
    token: std::cell::RefCell<Option<(u64, LiveTokens, TokenAllocRef)>>,
}

impl Drop for TokenReturn {
    fn drop(&mut self) {
        #[cfg(not(loom))]
        let (token, live_tokens, token_alloc) = (
            TOKEN.with(|t| t.replace(NO_OWNER)),
            &LIVE_TOKENS,
            &TOKEN_ALLOC,
        );
        // Under loom, nothing to give back past a failed model's panic.
        #[cfg(loom)]
        let Some((token, live_tokens, token_alloc)) = self.token.take() else {
            return;
        };
        #[cfg(loom)]
        if std::thread::panicking() {
            return;
        }
        if token != 0 && token != NO_OWNER {
            let slot = token_slot(token);
            // Every write this thread made happens before a claimer that
            // sees the slot changed (release here, acquire in `is_live`).
            live_tokens[slot].store(0, Release);
            token_alloc.lock().free.push(slot);
        }
    }
}

crate::sync::thread_local! {
    /// This thread's identity as a node owner; 0 until first needed. No
    /// destructor, so reading it is one load.
    static TOKEN: Cell<u64> = const { Cell::new(0) };
    /// Registered with the first token; its destructor frees the token.
    static TOKEN_RETURN: TokenReturn = const {
        TokenReturn {
            #[cfg(loom)]
            token: std::cell::RefCell::new(None),
        }
    };
}

#[inline]
fn token_slot(token: u64) -> usize {
    (token % TOKEN_SLOTS as u64) as usize
}

/// Whether `token` belongs to a live thread.
#[inline]
pub(crate) fn is_live(token: u64) -> bool {
    token != NO_OWNER && LIVE_TOKENS[token_slot(token)].load(Acquire) == token
}

/// The calling thread's owner token: unique among live threads, and never
/// equal to the token of a thread that has exited.
#[inline(always)]
pub(crate) fn token() -> u64 {
    // Under loom a thread's locals are gone while its destructors run.
    #[cfg(loom)]
    let Ok(token) = TOKEN.try_with(Cell::get) else {
        return NO_OWNER;
    };
    #[cfg(not(loom))]
    let token = TOKEN.with(Cell::get);
    match token {
        0 => new_token(),
        v => v,
    }
}

#[cold]
fn new_token() -> u64 {
    // Touching the guard registers its destructor; past the thread's
    // teardown it is gone and the thread owns nothing.
    let token = if TOKEN_RETURN.try_with(|_| ()).is_err() {
        NO_OWNER
    } else {
        let mut alloc = TOKEN_ALLOC.lock();
        let slot = match alloc.free.pop() {
            Some(slot) => Some(slot),
            None if alloc.next_slot < TOKEN_SLOTS => {
                alloc.next_slot += 1;
                Some(alloc.next_slot - 1)
            }
            None => None,
        };
        match slot {
            Some(slot) => {
                alloc.generation += 1;
                let token = alloc.generation * TOKEN_SLOTS as u64 + slot as u64;
                LIVE_TOKENS[slot].store(token, Release);
                // A thread taking a freed slot goes on writing what the
                // exited thread wrote per slot (its tally shard) with
                // relaxed stores. A reader that sees one of those and
                // checks with an acquire fence (the tally's seqlock) must
                // see the exited thread's writes too: the hand-off (the
                // lock above) is followed by a release fence. Found by
                // the loom model of the tally; once per thread.
                fence(Release);
                #[cfg(loom)]
                TOKEN_RETURN.with(|r| {
                    let registry = (token, LIVE_TOKENS.clone(), TOKEN_ALLOC.clone());
                    r.token.replace(Some(registry))
                });
                token
            }
            None => NO_OWNER,
        }
    };
    TOKEN.with(|t| t.set(token));
    token
}

/// The calling thread's token slot: an index below [`TOKEN_SLOTS`] that no
/// other live thread holds, and that a thread taking it after another has
/// exited gets with that thread's writes visible. `None` for a thread
/// without a token (past [`TOKEN_SLOTS`] threads, or in its teardown).
#[inline(always)]
pub(crate) fn thread_index() -> Option<usize> {
    match token() {
        NO_OWNER => None,
        token => Some(token_slot(token)),
    }
}

/// The value of `lane` in a packed word.
#[inline]
fn lane_of(word: u64, lane: usize) -> u64 {
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
struct Slot<'a> {
    head: &'a Head,
    tail: &'a Tail,
}

impl<'a> Slot<'a> {
    #[inline(always)]
    fn start(self) -> &'a AtomicU64 {
        &self.head.start
    }

    #[inline(always)]
    fn word(self, word: usize) -> &'a AtomicU64 {
        match word {
            0 => &self.head.pass_block,
            w => &self.tail.words[w - 1],
        }
    }

    #[inline(always)]
    fn min_rt(self) -> &'a AtomicU32 {
        &self.tail.min_rt
    }
}

/// One part of a slot, to read.
#[derive(Clone, Copy)]
enum Part<'a> {
    Owned(Slot<'a>),
    Shared(&'a SharedPart),
}

impl Part<'_> {
    /// The count in `lane`.
    #[inline(always)]
    fn lane(self, lane: usize) -> u64 {
        match self {
            Part::Owned(slot) => lane_of(slot.word(lane / 2).load(Relaxed), lane),
            Part::Shared(part) => part.lanes.sum(lane),
        }
    }
}

/// The part of one slot every other thread writes. Allocated on the first
/// such write, padded to its own lines so that the owner's stores and the
/// other threads' adds never share one.
struct SharedPart {
    start: AtomicU64,
    min_rt: AtomicU32,
    lanes: PackedLanes,
}

impl SharedPart {
    fn new() -> Self {
        SharedPart {
            start: AtomicU64::new(UNUSED),
            min_rt: AtomicU32::new(NO_RT),
            lanes: PackedLanes::default(),
        }
    }
}

/// The slots of the second window one thread owns: it alone writes them,
/// with plain loads and stores.
struct Owned {
    /// The owner's token; 0 until a thread claims the part.
    owner: AtomicU64,
    slots: Box<[SlotPair]>,
    /// The owner's latest slice and its slot, written by the owner only: while
    /// time stays in that slice the owner finds its slot without dividing.
    hint_start: AtomicU64,
    hint_slot: AtomicU32,
}

impl Owned {
    fn new(slot_count: usize) -> Self {
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
    fn slot(&self, index: usize) -> Slot<'_> {
        let pair = &self.slots[index / 2];
        Slot {
            head: &pair.heads[index % 2],
            tail: &pair.tails.0[index % 2],
        }
    }
}

/// The second window (written), the minute window (folded into) and the
/// lifetime totals of one node.
///
/// The first thread to write the node owns its first part; the second
/// thread owns a second part, allocated then (two threads on one hot
/// resource both write with plain stores, and read one line of the other's
/// per check); any further thread adds through the shared parts.
pub(crate) struct LiveWindows {
    interval_ms: u64,
    bucket_len: Divisor,
    sample_count: Divisor,
    first: Owned,
    second: OnceBox<Owned>,
    /// The number of slots (`sample_count`).
    slot_count: usize,
    shared: OnceBox<Box<[CachePadded<SharedPart>]>>,
    minute: LeapArray<MetricBucket>,
    /// Try-lock for rotating shared parts.
    rotating: AtomicBool,
    /// Every lane folded out of the second window, ever, plus late events.
    folded: [AtomicU64; LANES],
    /// Folds running (multiples of [`BUSY`]) and folds done (low bits).
    seq: AtomicU64,
}

impl LiveWindows {
    pub(crate) fn new(second: WindowShape, minute: WindowShape) -> Self {
        LiveWindows {
            interval_ms: second.interval_ms(),
            bucket_len: Divisor::new(second.bucket_ms()),
            sample_count: Divisor::new(u64::from(second.sample_count())),
            first: Owned::new(second.sample_count() as usize),
            second: OnceBox::new(),
            slot_count: second.sample_count() as usize,
            shared: OnceBox::new(),
            minute: LeapArray::with_shape(minute),
            rotating: AtomicBool::new(false),
            folded: std::array::from_fn(|_| AtomicU64::new(0)),
            seq: AtomicU64::new(0),
        }
    }

    /// The second window's length in milliseconds.
    pub(crate) fn interval_ms(&self) -> u64 {
        self.interval_ms
    }

    /// The length of the second window's buckets.
    pub(crate) fn bucket_len_ms(&self) -> u64 {
        self.bucket_len.get()
    }

    /// The second window's sample count.
    pub(crate) fn sample_count(&self) -> u32 {
        self.sample_count.get() as u32
    }

    /// The minute window.
    pub(crate) fn minute(&self) -> &LeapArray<MetricBucket> {
        &self.minute
    }

    // ---- writes ----

    /// Adds `low` and `high` to the two lanes of `word` in the slice holding
    /// `now`, and `rt` as a candidate minimum response time.
    #[inline(always)]
    pub(crate) fn add(&self, now: u64, word: usize, low: u64, high: u64, rt: Option<u32>) {
        let me = token();
        let part = if self.first.owner.load(Relaxed) == me {
            Some(&self.first)
        } else {
            self.second
                .get()
                .filter(|part| part.owner.load(Relaxed) == me)
        };
        if let Some(part) = part {
            // An owner, still in its latest slice: one load and one store.
            let hint = part.hint_start.load(Relaxed);
            if now >= hint && now - hint < self.bucket_len.get() {
                let index = part.hint_slot.load(Relaxed) as usize;
                if Self::write_owned(part.slot(index), word, low, high, rt) {
                    return;
                }
                return self.add_shared(index, hint, word, low, high, rt);
            }
        }
        self.add_slow(now, me, word, low, high, rt);
    }

    /// Any add but an owner's within its latest slice.
    #[inline(never)]
    fn add_slow(&self, now: u64, me: u64, word: usize, low: u64, high: u64, rt: Option<u32>) {
        let number = self.bucket_len.div(now.min(LAST_TIME));
        let start = number * self.bucket_len.get();
        let index = self.sample_count.rem(number) as usize;
        if let Some(part) = self.owned_by(me) {
            let slot = part.slot(index);
            let held = slot.start().load(Relaxed);
            if held != start {
                if held != UNUSED && held > start {
                    // Older than the slot's slice: out of every window.
                    return self.late(word, low, high);
                }
                self.rotate_owned(slot, held, start);
            }
            let hint = part.hint_start.load(Relaxed);
            if hint == UNUSED || start > hint {
                part.hint_slot.store(index as u32, Relaxed);
                part.hint_start.store(start, Relaxed);
            }
            if Self::write_owned(slot, word, low, high, rt) {
                return;
            }
        }
        self.add_shared(index, start, word, low, high, rt);
    }

    /// The part `me` owns, claimed if free: the second part first when `me`
    /// holds it (so one thread never takes both), then the first, then the
    /// second, allocated on the first claim.
    fn owned_by(&self, me: u64) -> Option<&Owned> {
        if me == NO_OWNER {
            return None;
        }
        if let Some(second) = self.second.get()
            && second.owner.load(Relaxed) == me
        {
            return Some(second);
        }
        if Self::claim(&self.first, me) {
            return Some(&self.first);
        }
        let second = self
            .second
            .get_or_init(|| Box::new(Owned::new(self.slot_count)));
        Self::claim(second, me).then_some(second)
    }

    /// Whether `me` owns `part`, taking it over if it has no owner or its
    /// owner has exited.
    #[inline]
    fn claim(part: &Owned, me: u64) -> bool {
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
    fn write_owned(slot: Slot<'_>, word: usize, low: u64, high: u64, rt: Option<u32>) -> bool {
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
    fn rotate_owned(&self, slot: Slot<'_>, held: u64, start: u64) {
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

    /// Any thread's add, through the shared part of slot `index`.
    #[inline(never)]
    fn add_shared(
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

    /// An event older than its slot's slice: no window counts it, but the
    /// lifetime totals must, or concurrency would drift and counters miss it.
    #[cold]
    fn late(&self, word: usize, low: u64, high: u64) {
        self.folded[2 * word].fetch_add(low, Relaxed);
        self.folded[2 * word + 1].fetch_add(high, Relaxed);
    }

    /// Adds a slice's values to its minute bucket and the lifetime totals.
    fn fold(&self, start: u64, lanes: &[u64; LANES], min_rt: u32) {
        if lanes.iter().any(|&v| v != 0) || min_rt != NO_RT {
            // A slice older than the minute window goes to a bucket nobody reads.
            let bucket = self.minute.current(start);
            for (lane, &v) in lanes.iter().enumerate() {
                if v != 0 {
                    bucket.add_lane(lane, v);
                }
            }
            bucket.record_min_rt_raw(min_rt);
        }
        for (total, &v) in self.folded.iter().zip(lanes) {
            if v != 0 {
                total.fetch_add(v, Relaxed);
            }
        }
    }

    fn begin_fold(&self) {
        self.seq.fetch_add(BUSY, Acquire);
        fence(Release);
    }

    fn end_fold(&self) {
        self.seq.fetch_add(1u64.wrapping_sub(BUSY), Release);
    }

    /// `read()` as of an instant no fold was running, retried while folds
    /// run (a bounded number of times: a fold descheduled halfway must not
    /// stall readers).
    fn consistent<T>(&self, read: impl Fn() -> T) -> T {
        for _ in 0..READ_RETRIES {
            let before = self.seq.load(Acquire);
            if before < BUSY {
                let value = read();
                fence(Acquire);
                if self.seq.load(Relaxed) == before {
                    return value;
                }
            }
            crate::sync::spin_loop();
        }
        read()
    }

    /// `read()` as of an instant no fold was running, retried for as long
    /// as it takes: for reads that must never see a value missing halfway
    /// through a fold (lifetime totals, which must not go down). Past the
    /// spinning retries it yields, so a fold whose thread was descheduled
    /// runs. A fold always ends: it adds and stores, at most waiting for
    /// another thread's reset of a minute bucket, never for a reader, and
    /// nothing in it panics. Never on the entry path.
    fn settled<T>(&self, read: impl Fn() -> T) -> T {
        let mut tries = 0u32;
        loop {
            let before = self.seq.load(Acquire);
            if before < BUSY {
                let value = read();
                fence(Acquire);
                if self.seq.load(Relaxed) == before {
                    return value;
                }
            }
            tries += 1;
            if tries < READ_RETRIES {
                crate::sync::spin_loop();
            } else {
                crate::sync::yield_now();
            }
        }
    }

    // ---- reads of the second window ----

    /// Calls `f(start, part, min_rt)` for each part of slot `index` that
    /// holds a slice.
    #[inline(always)]
    fn parts(&self, index: usize, mut f: impl FnMut(u64, Part<'_>, u32)) {
        for part in std::iter::once(&self.first).chain(self.second.get()) {
            let slot = part.slot(index);
            let start = slot.start().load(Acquire);
            if start != UNUSED {
                f(start, Part::Owned(slot), slot.min_rt().load(Relaxed));
            }
        }
        if let Some(parts) = self.shared.get() {
            let part = &parts[index].0;
            let start = part.start.load(Acquire);
            if start != UNUSED {
                f(start, Part::Shared(part), part.min_rt.load(Relaxed));
            }
        }
    }

    /// The start of the slice holding `now`.
    #[inline]
    fn slice_start(&self, now: u64) -> u64 {
        let now = now.min(LAST_TIME);
        now - self.bucket_len.rem(now)
    }

    /// Calls `f(slot, lanes, min_rt)` for every part in the second window at
    /// `now`: the parts of one slot hold the same slice when both count.
    #[inline(always)]
    fn second_parts(&self, now: u64, mut f: impl FnMut(usize, Part<'_>, u32)) {
        let current = self.slice_start(now);
        for i in 0..self.slot_count {
            self.parts(i, |start, lanes, min_rt| {
                if start <= current && current - start < self.interval_ms {
                    f(i, lanes, min_rt);
                }
            });
        }
    }

    /// The count of `lane` over the second window at `now`.
    #[inline]
    pub(crate) fn second_sum(&self, now: u64, lane: usize) -> u64 {
        let mut sum = 0u64;
        self.second_parts(now, |_, lanes, _| sum = sum.wrapping_add(lanes.lane(lane)));
        sum
    }

    /// Every lane over the second window at `now`.
    pub(crate) fn second_sums(&self, now: u64) -> [u64; LANES] {
        let mut sums = [0u64; LANES];
        self.second_parts(now, |_, lanes, _| {
            for (lane, sum) in sums.iter_mut().enumerate() {
                *sum = sum.wrapping_add(lanes.lane(lane));
            }
        });
        sums
    }

    /// The largest count of `lane` in one slice of the second window.
    pub(crate) fn second_max(&self, now: u64, lane: usize) -> u64 {
        let mut per_slot = [0u64; 64];
        let mut max = 0;
        self.second_parts(now, |slot, lanes, _| {
            let v = lanes.lane(lane);
            match per_slot.get_mut(slot) {
                Some(sum) => {
                    *sum = sum.wrapping_add(v);
                    max = max.max(*sum);
                }
                // Past 64 samples, the parts are compared apart.
                None => max = max.max(v),
            }
        });
        max
    }

    /// The smallest response time over the second window, if any.
    pub(crate) fn second_min_rt(&self, now: u64) -> Option<u64> {
        let mut min = NO_RT;
        self.second_parts(now, |_, _, rt| min = min.min(rt));
        (min != NO_RT).then_some(u64::from(min))
    }

    // ---- reads of the minute window ----

    /// Whether a second-window part starting at `start` belongs to a minute
    /// bucket in the minute window at `now`.
    fn in_minute(&self, start: u64, now: u64) -> bool {
        let current = self.minute.bucket_start(now);
        let bucket = self.minute.bucket_start(start);
        bucket <= current && current - bucket < self.minute.interval_ms()
    }

    /// Every lane over the minute window at `now`, folded or not.
    pub(crate) fn minute_sums(&self, now: u64) -> [u64; LANES] {
        self.consistent(|| {
            let mut sums = [0u64; LANES];
            for (_, bucket) in self.minute.values(now) {
                for (lane, sum) in sums.iter_mut().enumerate() {
                    *sum = sum.wrapping_add(bucket.lane(lane));
                }
            }
            for i in 0..self.slot_count {
                self.parts(i, |start, lanes, _| {
                    if self.in_minute(start, now) {
                        for (lane, sum) in sums.iter_mut().enumerate() {
                            *sum = sum.wrapping_add(lanes.lane(lane));
                        }
                    }
                });
            }
            sums
        })
    }

    /// The lanes and minimum RT of the minute bucket starting at `start`,
    /// folded or not; `None` if nothing holds that slice.
    pub(crate) fn minute_slice(&self, start: u64) -> Option<([u64; LANES], u32)> {
        self.consistent(|| {
            let mut found = false;
            let mut sums = [0u64; LANES];
            let mut min = NO_RT;
            if let Some(bucket) = self.minute.bucket_at(start) {
                found = true;
                for (lane, sum) in sums.iter_mut().enumerate() {
                    *sum = bucket.lane(lane);
                }
                min = bucket.min_rt_raw();
            }
            for i in 0..self.slot_count {
                self.parts(i, |part, lanes, rt| {
                    if self.minute.bucket_start(part) == start {
                        found = true;
                        for (lane, sum) in sums.iter_mut().enumerate() {
                            *sum = sum.wrapping_add(lanes.lane(lane));
                        }
                        min = min.min(rt);
                    }
                });
            }
            found.then_some((sums, min))
        })
    }

    // ---- lifetime totals ----

    /// Every lane ever recorded (wrapping): the folded totals plus every
    /// part's slice not folded yet, in or out of the windows. Waits while a
    /// fold runs (see [`settled`](Self::settled)), so two reads in turn
    /// never go down.
    pub(crate) fn lifetime_sums(&self) -> [u64; LANES] {
        self.settled(|| {
            let mut sums: [u64; LANES] = std::array::from_fn(|l| self.folded[l].load(Relaxed));
            for i in 0..self.slot_count {
                self.parts(i, |_, lanes, _| {
                    for (lane, sum) in sums.iter_mut().enumerate() {
                        *sum = sum.wrapping_add(lanes.lane(lane));
                    }
                });
            }
            sums
        })
    }

    /// Every pass ever recorded less every completion (wrapping; the node
    /// corrects for batches).
    pub(crate) fn pass_less_success(&self) -> i64 {
        self.consistent(|| {
            let mut diff = self.folded[LANE_PASS]
                .load(Relaxed)
                .wrapping_sub(self.folded[LANE_SUCCESS].load(Relaxed));
            for i in 0..self.slot_count {
                self.parts(i, |_, lanes, _| {
                    diff = diff
                        .wrapping_add(lanes.lane(LANE_PASS))
                        .wrapping_sub(lanes.lane(LANE_SUCCESS));
                });
            }
            diff as i64
        })
    }
}

impl fmt::Debug for LiveWindows {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveWindows")
            .field("interval_ms", &self.interval_ms)
            .field("sample_count", &self.sample_count.get())
            .field("minute", &self.minute)
            .field("owned", &(self.first.owner.load(Relaxed) != 0))
            .field("owned_twice", &self.second.get().is_some())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: u64 = 1_700_000_000_000;

    fn windows() -> LiveWindows {
        LiveWindows::new(WindowShape::SECOND, WindowShape::MINUTE)
    }

    fn pass(w: &LiveWindows, now: u64, n: u64) {
        w.add(now, LANE_PASS / 2, n, 0, None);
    }

    #[test]
    fn a_node_whose_owner_exited_is_taken_over() {
        let w = std::sync::Arc::new(windows());
        let theirs = std::sync::Arc::clone(&w);
        // `join` waits for the OS thread, so its thread-locals are gone (a
        // scoped thread's end is signalled before they are).
        std::thread::spawn(move || pass(&theirs, T0, 2))
            .join()
            .unwrap();
        let first = w.first.owner.load(Relaxed);
        assert_ne!(first, 0);
        assert!(!is_live(first), "the thread has exited");
        pass(&w, T0 + 1, 3);
        assert_eq!(w.first.owner.load(Relaxed), token());
        assert_ne!(
            w.first.owner.load(Relaxed),
            first,
            "tokens are never reused"
        );
        assert_eq!(w.second_sum(T0 + 1, LANE_PASS), 5);
    }

    #[test]
    fn owner_and_other_threads_add_up() {
        let w = windows();
        pass(&w, T0, 2);
        std::thread::scope(|s| {
            s.spawn(|| pass(&w, T0 + 1, 5));
        });
        assert_ne!(w.first.owner.load(Relaxed), 0);
        assert_eq!(w.second_sum(T0 + 2, LANE_PASS), 7);
        assert_eq!(w.minute_sums(T0 + 2)[LANE_PASS], 7);
        assert_eq!(w.pass_less_success(), 7);
    }

    #[test]
    fn a_second_thread_owns_the_second_part_and_a_third_shares() {
        let w = windows();
        pass(&w, T0, 1);
        let barrier = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            s.spawn(|| {
                pass(&w, T0 + 1, 2);
                let second = w.second.get().expect("allocated by the second writer");
                assert_eq!(second.owner.load(Relaxed), token());
                // A third thread, while both owners live, shares.
                std::thread::scope(|s| {
                    s.spawn(|| {
                        pass(&w, T0 + 2, 4);
                        barrier.wait();
                    });
                    barrier.wait();
                });
                pass(&w, T0 + 3, 8);
            });
        });
        assert_eq!(w.first.owner.load(Relaxed), token());
        assert!(w.shared.get().is_some(), "the third thread wrote shared");
        assert_eq!(w.second_sum(T0 + 3, LANE_PASS), 15);
        assert_eq!(w.minute_sums(T0 + 3)[LANE_PASS], 15);
        assert_eq!(w.pass_less_success(), 15);
        // Each part rotates on its own and folds exactly once.
        pass(&w, T0 + 1_000, 1);
        assert_eq!(w.second_sum(T0 + 1_000, LANE_PASS), 1, "a new second");
        assert_eq!(w.minute_sums(T0 + 1_000)[LANE_PASS], 16);
    }

    #[test]
    fn rotation_folds_into_the_minute_and_keeps_lifetime_totals() {
        let w = std::sync::Arc::new(windows());
        // In a thread joined to its end (thread-locals gone, unlike a scoped
        // thread's), so that the next thread can take its part over.
        let in_thread = |now, n| {
            let w = std::sync::Arc::clone(&w);
            std::thread::spawn(move || pass(&w, now, n)).join().unwrap();
        };
        pass(&w, T0, 3);
        in_thread(T0 + 10, 4);
        // Both parts of the slot rotate one second later.
        pass(&w, T0 + 1_000, 1);
        in_thread(T0 + 1_010, 1);
        assert!(w.shared.get().is_none(), "two owned parts, no shared one");
        assert_eq!(w.second_sum(T0 + 1_010, LANE_PASS), 2);
        let bucket = w.minute().bucket_at(T0).expect("folded");
        assert_eq!(bucket.lane(LANE_PASS), 7);
        assert_eq!(w.minute_sums(T0 + 1_010)[LANE_PASS], 9);
        assert_eq!(w.minute_slice(T0).map(|(l, _)| l[LANE_PASS]), Some(7));
        assert_eq!(
            w.minute_slice(T0 + 1_000).map(|(l, _)| l[LANE_PASS]),
            Some(2)
        );
        assert_eq!(w.pass_less_success(), 9);
        assert_eq!(w.folded[LANE_PASS].load(Relaxed), 7, "folded once");
        assert_eq!(w.lifetime_sums()[LANE_PASS], 9);
        // Two minutes on, the minute window has forgotten; lifetime has not.
        pass(&w, T0 + 121_000, 1);
        assert_eq!(w.minute_sums(T0 + 121_000)[LANE_PASS], 1);
        assert_eq!(w.lifetime_sums()[LANE_PASS], 10);
    }

    #[test]
    fn lifetime_totals_fold_every_lane_once() {
        let w = windows();
        let mut expected = [0u64; LANES];
        // Each slice of both slots, for three minutes, rotated by the owner.
        for i in 0..360u64 {
            let now = T0 + i * 500 + i % 7;
            pass(&w, now, 1);
            w.add(now, LANE_PASS / 2, 0, 2, None); // block
            w.add(now, 1, i % 3, 1, None); // exception, occupied pass
            w.add(now, LANE_SUCCESS / 2, 1, i % 11, Some(1));
            for (lane, v) in [1, 2, i % 3, 1, 1, i % 11].into_iter().enumerate() {
                expected[lane] += v;
            }
            assert_eq!(w.lifetime_sums(), expected, "at slice {i}");
        }
        let folded: Vec<u64> = w.folded.iter().map(|f| f.load(Relaxed)).collect();
        assert!(folded.iter().zip(expected).all(|(&f, e)| f < e && f > 0));
    }

    #[test]
    fn late_events_count_only_in_lifetime_totals() {
        let w = windows();
        pass(&w, T0 + 1_000, 1);
        // Same slot, one second earlier: older than the slot's slice.
        pass(&w, T0, 5);
        w.add(T0, LANE_PASS / 2, 0, 3, None); // blocks
        w.add(T0 + 1, LANE_SUCCESS / 2, 2, 40, Some(20));
        assert_eq!(w.second_sum(T0 + 1_000, LANE_PASS), 1);
        assert_eq!(w.minute_sums(T0 + 1_000)[LANE_PASS], 1);
        assert_eq!(w.pass_less_success(), 4);
        assert_eq!(w.lifetime_sums(), [6, 3, 0, 0, 2, 40]);
        // The same through the shared part (another thread).
        std::thread::scope(|s| {
            s.spawn(|| {
                pass(&w, T0 + 1_001, 1);
                w.add(T0 + 2, LANE_PASS / 2, 4, 5, None);
            });
        });
        assert_eq!(w.lifetime_sums(), [11, 8, 0, 0, 2, 40]);
    }

    #[test]
    fn overflowing_owner_lane_moves_to_the_shared_part() {
        let w = windows();
        pass(&w, T0, u64::from(u32::MAX));
        pass(&w, T0, 10);
        assert_eq!(w.second_sum(T0, LANE_PASS), u64::from(u32::MAX) + 10);
    }

    #[test]
    fn four_threads_in_one_slice_lose_nothing() {
        let w = windows();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let w = &w;
                s.spawn(move || {
                    for i in 0..20_000u64 {
                        let now = T0 + (i + t) % 400;
                        pass(w, now, 1);
                        w.add(now, LANE_SUCCESS / 2, 1, 3, Some(3));
                    }
                });
            }
        });
        assert_eq!(w.pass_less_success(), 0);
        let sums = w.minute_sums(T0 + 999);
        assert_eq!(sums[LANE_PASS], 80_000);
        assert_eq!(sums[LANE_SUCCESS], 80_000);
        assert_eq!(sums[LANE_SUCCESS + 1], 240_000);
        assert_eq!(w.second_min_rt(T0 + 999), Some(3));
    }

    #[test]
    fn four_threads_across_rotations_keep_concurrency_exact() {
        // Threads read a shared clock that moves 1 ms every 20 events, so
        // slices rotate under them (both parts, by owner and by others) while
        // a reader sums across folds; every pass is matched by a completion,
        // so concurrency must end at exactly 0.
        let w = windows();
        let clock = AtomicU64::new(T0);
        let done = AtomicBool::new(false);
        // The reader is running before any writer starts (on a busy machine
        // it could otherwise be scheduled only after they end).
        let start = std::sync::Barrier::new(5);
        std::thread::scope(|s| {
            let reader = s.spawn(|| {
                start.wait();
                while !done.load(Relaxed) {
                    std::hint::black_box(w.pass_less_success());
                    std::hint::black_box(w.minute_sums(clock.load(Relaxed)));
                }
            });
            let writers: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        for i in 0..20_000u64 {
                            let now = if i % 20 == 0 {
                                clock.fetch_add(1, Relaxed) + 1
                            } else {
                                clock.load(Relaxed)
                            };
                            pass(&w, now, 1);
                            w.add(clock.load(Relaxed), LANE_SUCCESS / 2, 1, 3, Some(3));
                        }
                    })
                })
                .collect();
            for writer in writers {
                writer.join().unwrap();
            }
            done.store(true, Relaxed);
            reader.join().unwrap();
        });
        assert_eq!(w.pass_less_success(), 0);
    }

    #[test]
    fn four_threads_across_rotations_keep_lifetime_totals_exact_and_monotonic() {
        // As above, with the clock moving 20 ms every 20 events (80 s in all,
        // 160 slices, past the minute window) and one event in seven
        // stamped a second early (late once its slot has rotated). Readers
        // race the folds: no lane may ever go down between two reads, and
        // the end totals are exact.
        const PER_THREAD: u64 = 20_000;
        let w = windows();
        let clock = AtomicU64::new(T0 + 1_000);
        let done = AtomicBool::new(false);
        let start = std::sync::Barrier::new(6);
        let check_monotonic = || {
            start.wait();
            let mut last = [0u64; LANES];
            while !done.load(Relaxed) {
                let sums = w.lifetime_sums();
                for lane in 0..LANES {
                    assert!(
                        sums[lane] >= last[lane],
                        "lane {lane} went down: {} -> {}",
                        last[lane],
                        sums[lane]
                    );
                }
                last = sums;
            }
        };
        std::thread::scope(|s| {
            let readers: Vec<_> = (0..2).map(|_| s.spawn(check_monotonic)).collect();
            let writers: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        for i in 0..PER_THREAD {
                            let mut now = if i % 20 == 0 {
                                clock.fetch_add(20, Relaxed) + 20
                            } else {
                                clock.load(Relaxed)
                            };
                            if i % 7 == 0 {
                                now -= 1_000;
                            }
                            pass(&w, now, 1);
                            w.add(now, LANE_PASS / 2, 0, 2, None);
                            w.add(clock.load(Relaxed), LANE_SUCCESS / 2, 1, 3, Some(3));
                        }
                    })
                })
                .collect();
            for writer in writers {
                writer.join().unwrap();
            }
            done.store(true, Relaxed);
            for reader in readers {
                reader.join().unwrap();
            }
        });
        let n = 4 * PER_THREAD;
        assert_eq!(w.lifetime_sums(), [n, 2 * n, 0, 0, n, 3 * n]);
        assert_eq!(w.pass_less_success(), 0);
    }
}

#[cfg(all(test, loom))]
mod loom_tests;
