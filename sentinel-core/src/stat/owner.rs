//! Thread tokens: which thread may own a per-thread part (of a node's
//! windows, a block tally shard, a percentile recorder, a rule quota lease).
//!
//! **Invariant.** A thread's [`token`] is unique among live threads and
//! never equal to the token of a thread that has exited, and [`is_live`]
//! tells whether its thread still holds it; a thread that takes over what
//! an exited thread owned sees every write that thread made.
//!
//! - *Who writes what.* `LIVE_TOKENS[slot]` is written by the allocator,
//!   under its lock, when a thread takes the slot (its new token), and by
//!   that thread's `TokenReturn` when it exits (0). A slot reused gets a
//!   new generation, so an old token never matches again.
//! - *What a reader sees.* The exit stores 0 with release and [`is_live`]
//!   loads with acquire: a claimer that sees the owner gone sees all the
//!   owner's writes. A thread given a freed slot takes it through the
//!   allocator's lock, followed by a release fence, so per-slot data the
//!   exited thread wrote with relaxed stores (its tally shard, its
//!   recorders) is seen with those writes by acquire-fenced readers.
//! - *Why nothing is lost or counted twice.* Two live threads never share
//!   a token or a slot, so a per-thread part has one writer at a time; a
//!   part changes hands only once its owner has exited.
//!
//! A thread past [`TOKEN_SLOTS`], or one in its thread-local teardown,
//! gets [`NO_OWNER`] and writes through the shared paths.
//!
//! Loom model: `loom_token_reuse_and_takeover_see_the_exited_owners_writes`
//! in `live/loom_tests.rs` (a token's reuse and a node part's takeover).

use crate::sync::Mutex;
use crate::sync::atomic::AtomicU64;
use crate::sync::atomic::Ordering::{Acquire, Release};
use crate::sync::atomic::fence;
use std::cell::Cell;

/// How many threads can own nodes at once; threads past this many write
/// through the shared parts.
#[cfg(not(loom))]
pub(super) const TOKEN_SLOTS: usize = 4096;
/// Fewer under loom, where every slot is an atomic of each execution.
#[cfg(loom)]
pub(super) const TOKEN_SLOTS: usize = 64;

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

/// The slot a token holds.
#[inline]
pub(super) fn token_slot(token: u64) -> usize {
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
pub(super) fn thread_index() -> Option<usize> {
    match token() {
        NO_OWNER => None,
        token => Some(token_slot(token)),
    }
}

/// How many token slots have been given back (the loom model waits for
/// its exited threads' returns: loom joins a thread before its locals drop).
#[cfg(all(test, loom))]
pub(super) fn returned_slots() -> usize {
    TOKEN_ALLOC.lock().free.len()
}
