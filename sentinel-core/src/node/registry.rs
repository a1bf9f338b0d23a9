//! Where an instance keeps its nodes: an append-only arena (so a node, once
//! made, has a stable address for as long as the instance lives and entries
//! can borrow it without touching a reference count) and a name index read
//! without a lock.
//!
//! The index is an open-addressing table of atomic words, each holding the
//! high half of a name's hash and its arena index: a lookup hashes the name,
//! loads words until it finds the name or an empty word, and compares the
//! name only when the hash halves agree. No lock, no reference count, no
//! read-modify-write. A new name takes the registry's mutex, checks again,
//! appends the node and then publishes its word. When the table is half
//! full the next one, twice as large, is filled and published; older tables
//! stay allocated (their total is less than the newest), so a reader still
//! probing one is never left with freed memory. A reader that misses a name
//! published meanwhile falls to the mutex path, which finds it.

use std::fmt;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use once_cell::race::OnceBox;
use parking_lot::Mutex;

use super::overflow::{Budget, Overflow};

/// The hasher for name lookups: fast on short strings and keyed per process,
/// so names chosen by a caller (origins, contexts) cannot be crafted to
/// collide.
pub(crate) type NameHasher = foldhash::fast::RandomState;

/// Slots in the first chunk; chunk `k` holds `FIRST << k`.
const FIRST: usize = 64;
/// Enough chunks for every `u32` index.
const CHUNKS: usize = 27;

/// An append-only list of `T` with stable addresses and lock-free reads.
pub(crate) struct Arena<T> {
    chunks: [OnceBox<Box<[OnceBox<T>]>>; CHUNKS],
    len: AtomicUsize,
}

impl<T> Default for Arena<T> {
    fn default() -> Self {
        Arena {
            chunks: std::array::from_fn(|_| OnceBox::new()),
            len: AtomicUsize::new(0),
        }
    }
}

/// The chunk and the offset in it of index `i`.
#[inline]
fn locate(i: usize) -> (usize, usize) {
    let chunk = (i / FIRST + 1).ilog2() as usize;
    (chunk, i - FIRST * ((1 << chunk) - 1))
}

impl<T> Arena<T> {
    /// Appends `value` and returns its index. Callers serialise pushes.
    pub(crate) fn push(&self, value: T) -> u32 {
        let index = self.len.load(Ordering::Relaxed);
        let (chunk, offset) = locate(index);
        let slots = self.chunks[chunk]
            .get_or_init(|| Box::new((0..FIRST << chunk).map(|_| OnceBox::new()).collect()));
        if slots[offset].set(Box::new(value)).is_err() {
            unreachable!("arena slot {index} written twice: pushes must be serialised");
        }
        self.len.store(index + 1, Ordering::Release);
        u32::try_from(index).expect("arena indices fit in u32")
    }

    /// The value at `index`, if it was pushed.
    #[inline]
    pub(crate) fn get(&self, index: u32) -> Option<&T> {
        let (chunk, offset) = locate(index as usize);
        self.chunks.get(chunk)?.get()?.get(offset)?.get()
    }

    /// How many values were pushed.
    pub(crate) fn len(&self) -> usize {
        self.len.load(Ordering::Acquire)
    }

    /// Every value, in push order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        (0..self.len() as u32).filter_map(|i| self.get(i))
    }
}

/// A value a [`Registry`] finds by name.
pub(crate) trait Named {
    /// The name it is registered under.
    fn name(&self) -> &str;
}

/// Words in the first index table; table `k` has `FIRST_TABLE << k`.
const FIRST_TABLE: usize = 64;
/// Enough tables for every `u32` index at half load.
const TABLES: usize = 28;

/// One index table: `hash_high << 32 | (arena index + 1)` per word, 0 empty.
struct Table {
    mask: usize,
    words: Box<[AtomicU64]>,
}

impl Table {
    fn new(size: usize) -> Self {
        Table {
            mask: size - 1,
            words: (0..size).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Publishes `index` under `hash` (callers serialise inserts).
    fn insert(&self, hash: u64, index: u32) {
        let mut i = hash as usize & self.mask;
        while self.words[i].load(Ordering::Relaxed) != 0 {
            i = (i + 1) & self.mask;
        }
        self.words[i].store(hash & HIGH | (u64::from(index) + 1), Ordering::Release);
    }
}

const HIGH: u64 = 0xffff_ffff_0000_0000;

/// Named values, each created exactly once, found by name without a lock.
///
/// Entries make names on first sight. A name that the rules in force
/// mention (the `reserved` test given at creation) is made outside the cap,
/// whatever filled it, so that names made by traffic can never leave a rule
/// without its node; any other name is made only while fewer than `cap`
/// were made so (and, for a registry under a shared [`Budget`], while the
/// budget has room), and never when longer than `max_name_len` bytes: past
/// either the entry is refused a node (counted, logged once). Rule loads
/// make no node: a name they mention costs a node only once an entry uses
/// it, so loads of new names leave nothing behind.
pub(crate) struct Registry<T> {
    arena: Arena<T>,
    tables: [OnceBox<Table>; TABLES],
    /// The newest table.
    current: AtomicUsize,
    hasher: NameHasher,
    /// Serialises creation; holds how many names entries made (the ones the
    /// cap bounds).
    create: Mutex<usize>,
    /// Entries made `cap` names: a new name is refused without the mutex
    /// (unless rules mention it), so a flood of new names past the cap does
    /// not queue on it.
    full: AtomicBool,
    cap: usize,
    max_name_len: usize,
    /// How many names were made because rules mention them (outside the cap).
    reserved: AtomicUsize,
    /// A bound shared with other registries (the origins of every resource).
    budget: Option<Arc<Budget>>,
    overflow: Overflow,
}

impl<T: Named> Registry<T> {
    /// An empty registry for at most `cap` names made by entries, none
    /// longer than `max_name_len` bytes; refusals go to `overflow`.
    pub(crate) fn new(cap: usize, max_name_len: usize, overflow: Overflow) -> Self {
        let tables: [OnceBox<Table>; TABLES] = std::array::from_fn(|_| OnceBox::new());
        let _ = tables[0].set(Box::new(Table::new(FIRST_TABLE)));
        Registry {
            arena: Arena::default(),
            tables,
            current: AtomicUsize::new(0),
            hasher: NameHasher::default(),
            create: Mutex::new(0),
            full: AtomicBool::new(cap == 0),
            cap,
            max_name_len,
            reserved: AtomicUsize::new(0),
            budget: None,
            overflow,
        }
    }

    /// As [`new`](Self::new), the names made by entries also taken from
    /// `budget`, which other registries share.
    pub(crate) fn with_budget(
        cap: usize,
        max_name_len: usize,
        overflow: Overflow,
        budget: &Arc<Budget>,
    ) -> Self {
        Registry {
            budget: Some(Arc::clone(budget)),
            ..Self::new(cap, max_name_len, overflow)
        }
    }

    /// The index of `name`, if it exists.
    #[inline]
    pub(crate) fn find(&self, name: &str) -> Option<u32> {
        self.find_in(self.hasher.hash_one(name), name)
    }

    #[inline]
    fn find_in(&self, hash: u64, name: &str) -> Option<u32> {
        let table = self.tables[self.current.load(Ordering::Acquire)].get()?;
        let mut i = hash as usize & table.mask;
        loop {
            let word = table.words[i].load(Ordering::Acquire);
            if word == 0 {
                return None;
            }
            if word & HIGH == hash & HIGH {
                let index = (word as u32).wrapping_sub(1);
                if self.arena.get(index).is_some_and(|v| v.name() == name) {
                    return Some(index);
                }
            }
            i = (i + 1) & table.mask;
        }
    }

    /// The value at `index`.
    #[inline]
    pub(crate) fn get(&self, index: u32) -> Option<&T> {
        self.arena.get(index)
    }

    /// The value named `name`, made by `make(index, reserved)` if it is
    /// new. `None` when the name is new, `reserved(name)` is false, and the
    /// registry (or its budget) is full or the name too long: that is
    /// counted and logged once.
    #[inline]
    pub(crate) fn get_or_create(
        &self,
        name: &str,
        make: impl FnOnce(u32, bool) -> T,
        reserved: impl Fn(&str) -> bool,
    ) -> Option<(u32, &T)> {
        let found = self.try_get_or_create(name, make, reserved);
        if found.is_none() {
            self.refuse(name);
        }
        found
    }

    /// As [`get_or_create`](Self::get_or_create), without counting a refusal.
    #[inline]
    pub(crate) fn try_get_or_create(
        &self,
        name: &str,
        make: impl FnOnce(u32, bool) -> T,
        reserved: impl Fn(&str) -> bool,
    ) -> Option<(u32, &T)> {
        match self.find(name) {
            Some(index) => Some((index, self.arena.get(index)?)),
            None => self.create(name, make, reserved),
        }
    }

    #[cold]
    fn create(
        &self,
        name: &str,
        make: impl FnOnce(u32, bool) -> T,
        reserved: impl Fn(&str) -> bool,
    ) -> Option<(u32, &T)> {
        // Past the cap or the budget, a name that no rule mentions is
        // refused without the mutex. A name too long is never stored
        // (rule loads refuse names over the limit, so no rule mentions one).
        let budget_full = self.budget.as_ref().is_some_and(|b| b.is_full());
        if (name.len() > self.max_name_len || self.full.load(Ordering::Relaxed) || budget_full)
            && !reserved(name)
        {
            return None;
        }
        let mut made_by_entries = self.create.lock();
        // Another thread may have made it while this one waited.
        if let Some(index) = self.find(name) {
            return Some((index, self.arena.get(index)?));
        }
        // Asked again under the mutex: loads mark the nodes their rules
        // name under it too (see `locked`), so a node is made with the
        // mark of the rules in force.
        let is_reserved = reserved(name);
        if is_reserved {
            if self.arena.len() >= u32::MAX as usize {
                return None;
            }
            self.reserved.fetch_add(1, Ordering::Relaxed);
        } else {
            if name.len() > self.max_name_len || *made_by_entries >= self.cap {
                return None;
            }
            if let Some(budget) = &self.budget {
                if !budget.take() {
                    return None;
                }
            }
            *made_by_entries += 1;
            if *made_by_entries >= self.cap {
                self.full.store(true, Ordering::Relaxed);
            }
        }
        let index = self.arena.push(make(self.arena.len() as u32, is_reserved));
        let mut level = self.current.load(Ordering::Relaxed);
        let mut table = self.tables[level].get()?;
        if 2 * (index as usize + 1) > table.words.len() {
            // Half full: fill the next table with every name, then publish it.
            level += 1;
            let next = Table::new(table.words.len() * 2);
            for (i, value) in self.arena.iter().enumerate().take(index as usize) {
                next.insert(self.hasher.hash_one(value.name()), i as u32);
            }
            let _ = self.tables[level].set(Box::new(next));
            self.current.store(level, Ordering::Release);
            table = self.tables[level].get()?;
        }
        table.insert(self.hasher.hash_one(name), index);
        Some((index, self.arena.get(index)?))
    }

    /// Runs `f` with no value being made meanwhile (rule loads mark the
    /// nodes of the names they mention this way). `f` must not make one.
    pub(crate) fn locked<R>(&self, f: impl FnOnce() -> R) -> R {
        let _made = self.create.lock();
        f()
    }

    /// Records an entry refused for want of room (a handle made past the cap).
    pub(crate) fn refuse(&self, name: &str) {
        match &self.budget {
            Some(budget) if budget.is_full() => budget.refuse(&self.overflow, name),
            _ => self.overflow.record(self.cap, self.max_name_len, name),
        }
    }

    /// How many new names were refused because the registry was full.
    pub(crate) fn refused(&self) -> u64 {
        self.overflow.count()
    }

    /// Every value, in creation order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.arena.iter()
    }
}

impl<T> Registry<T> {
    /// How many names exist.
    pub(crate) fn len(&self) -> usize {
        self.arena.len()
    }

    /// How many names were made because rules mention them, outside the cap.
    pub(crate) fn reserved(&self) -> usize {
        self.reserved.load(Ordering::Relaxed)
    }

    /// The cap on names made by entries.
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }
}

impl<T: Named> fmt::Debug for Registry<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("len", &self.len())
            .field("reserved", &self.reserved())
            .field("cap", &self.cap)
            .field("refused", &self.refused())
            .finish()
    }
}

#[cfg(test)]
#[path = "registry_tests.rs"]
mod tests;
