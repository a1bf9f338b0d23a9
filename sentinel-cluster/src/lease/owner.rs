//! Thread tokens: which thread owns a lease's sub-lease slot.
//!
//! **Invariant.** A thread's [`token`] is unique among live threads and
//! never equal to the token of a thread that has exited, and [`is_live`]
//! tells whether its thread still holds it: a slot changes hands only once
//! its owner has exited, so a slot has one owner at a time, and the thread
//! that takes it over sees every write the exited owner made (the exit
//! stores 0 with release, [`is_live`] loads with acquire).
//!
//! Tokens live in a table of [`TABLE`] slots; a slot reused gets a new
//! generation, so an old token never matches again. A thread past the
//! table's size, or in its thread-local teardown, gets [`NO_OWNER`] and
//! spends from the lease's shared word.

use std::cell::Cell;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Release;

use parking_lot::Mutex;

/// How many threads can hold a token at once.
const TABLE: usize = 1024;
/// Bits of a token that name its table slot (the generation is above).
const SLOT_BITS: u32 = 10;

/// The token of a thread that owns nothing: never a live thread's.
pub(crate) const NO_OWNER: u64 = u64::MAX;

/// The token of each live thread that has one, by table slot; 0 when free.
static LIVE: [AtomicU64; TABLE] = [const { AtomicU64::new(0) }; TABLE];

struct Alloc {
    free: Vec<usize>,
    next_slot: usize,
    generation: u64,
}

static ALLOC: Mutex<Alloc> = Mutex::new(Alloc {
    free: Vec::new(),
    next_slot: 0,
    generation: 0,
});

/// Frees the thread's token when the thread exits.
struct TokenReturn;

impl Drop for TokenReturn {
    fn drop(&mut self) {
        let token = TOKEN.with(|t| t.replace(NO_OWNER));
        if token != 0 && token != NO_OWNER {
            let slot = slot_of(token);
            LIVE[slot].store(0, Release);
            ALLOC.lock().free.push(slot);
        }
    }
}

thread_local! {
    /// The thread's token; 0 before its first use.
    static TOKEN: Cell<u64> = const { Cell::new(0) };
    static RETURN: TokenReturn = const { TokenReturn };
}

fn slot_of(token: u64) -> usize {
    (token & ((1 << SLOT_BITS) - 1)) as usize
}

/// The calling thread's token ([`NO_OWNER`] past the table's size or in
/// the thread's teardown).
#[inline]
pub(crate) fn token() -> u64 {
    match TOKEN.with(Cell::get) {
        0 => new_token(),
        token => token,
    }
}

#[cold]
#[inline(never)]
fn new_token() -> u64 {
    // Registers the return first: a thread in its teardown gets none.
    if RETURN.try_with(|_| ()).is_err() {
        TOKEN.with(|t| t.set(NO_OWNER));
        return NO_OWNER;
    }
    let token = {
        let mut alloc = ALLOC.lock();
        let slot = match alloc.free.pop() {
            Some(slot) => Some(slot),
            None if alloc.next_slot < TABLE => {
                alloc.next_slot += 1;
                Some(alloc.next_slot - 1)
            }
            None => None,
        };
        slot.map(|slot| {
            alloc.generation += 1;
            let token = (alloc.generation << SLOT_BITS) | slot as u64;
            LIVE[slot].store(token, Release);
            token
        })
    };
    let token = token.unwrap_or(NO_OWNER);
    TOKEN.with(|t| t.set(token));
    token
}

/// Whether the thread that took `token` still holds it.
#[cfg(not(sentinel_loom))]
#[inline]
pub(crate) fn is_live(token: u64) -> bool {
    token != NO_OWNER && LIVE[slot_of(token)].load(std::sync::atomic::Ordering::Acquire) == token
}

/// Under loom the models name their threads' tokens and no thread exits
/// while it owns a slot.
#[cfg(sentinel_loom)]
#[inline]
pub(crate) fn is_live(token: u64) -> bool {
    token != 0 && token != NO_OWNER
}

#[cfg(all(test, not(sentinel_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_thread_s_token_is_live_until_it_exits_and_never_reused() {
        let mine = token();
        assert_eq!(token(), mine, "stable within a thread");
        assert!(is_live(mine));
        let theirs = std::thread::spawn(|| {
            let t = token();
            assert!(is_live(t));
            t
        })
        .join()
        .unwrap();
        assert_ne!(theirs, mine);
        assert!(!is_live(theirs), "returned at the thread's exit");
        let next = std::thread::spawn(token).join().unwrap();
        assert_ne!(next, theirs, "a reused slot gets a new generation");
        assert!(!is_live(NO_OWNER));
    }
}
