//! Blocks counted per thread, for the block log and the per-kind block
//! counters.
//!
//! A block is counted under its *key*: instance, resource, kind, rule and
//! origin. Counting it on a shared counter would put a locked instruction
//! (and, under load, a contended line) on the block path, so each thread
//! counts in a [`Shard`] of its own with plain loads and stores: the slot
//! of a key keeps the second it counts in, that second's count, and the
//! count of earlier seconds. A harvester (the instance's log writer or a
//! scrape) reads every shard under the shard's lock once in a while and
//! takes what was added since its last visit, by second.
//!
//! A thread's shard is the one of its token slot (see
//! [`owner`](super::owner)): a thread taking the slot of one that exited
//! goes on counting in the same shard, where the exited thread's counts
//! wait for the harvester. A thread keeps [`SLOTS`] keys; a key lands in
//! one of four slots by its hash. A fifth key evicts the slot that counted
//! longest ago, after setting aside what it holds for the harvester
//! ([`Books::retired`]), so nothing is lost. A dropped instance's slots are freed by [`forget`]. A
//! thread without a token slot (past 4096 threads, or in its teardown)
//! counts in one shared shard, under its lock.
//!
//! A key names a loaded rule by its address, and its source holds the rule
//! weakly ([`BlockRule::Loaded`]): a rule replaced by a later load is freed
//! with its rule set whatever the threads counted, and only its `Arc`'s
//! allocation stays while a slot or a set-aside count names it (so that no
//! other rule takes that address meanwhile). A thread thus keeps at most
//! [`SLOTS`] sources, plus those set aside until the next harvest (every
//! rule load harvests), each a few hundred bytes whatever the rule's size.

use std::sync::{Arc, Weak};

use crate::sync::OnceBox;
#[cfg(not(loom))]
use once_cell::sync::Lazy;

use crate::sync::Mutex;
use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence};

use super::owner::{TOKEN_SLOTS, thread_index};

use crate::{BlockKind, Rule};

/// Keys a thread counts at once.
#[cfg(not(loom))]
const SLOTS: usize = 32;
/// Four (one set) under loom, to keep the models small.
#[cfg(loom)]
const SLOTS: usize = 4;
/// Counts set aside by evictions and not harvested yet, per thread, past
/// which the oldest are merged per key.
const MAX_RETIRED: usize = 1024;

/// What a block is counted under, as three words compared on the block
/// path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct BlockKey {
    /// The rule's address; for a rule-less block of a user slot, its kind
    /// name's.
    rule: usize,
    /// The instance's id (high half) and the resource's id (low half).
    place: u64,
    /// The origin node's address (or 0), with the kind's code in the low
    /// bits.
    origin: usize,
}

impl BlockKey {
    /// The key of a block by `kind` (and `rule`, if one) on resource
    /// `resource` of instance `instance`, from `origin` (a node's address,
    /// or 0).
    #[inline]
    pub(crate) fn new(
        instance: u64,
        resource: u32,
        kind: BlockKind,
        rule: Option<&Arc<dyn Rule>>,
        origin: usize,
    ) -> BlockKey {
        let rule = match (rule, kind) {
            (Some(rule), _) => Arc::as_ptr(rule).cast::<()>() as usize,
            (None, BlockKind::Custom(name)) => name.as_ptr() as usize,
            (None, _) => 0,
        };
        BlockKey {
            rule,
            place: (instance << 32) | u64::from(resource),
            origin: origin | kind_code(kind),
        }
    }

    /// The instance whose block this is.
    fn instance(&self) -> u64 {
        self.place >> 32
    }

    #[inline]
    fn slot(&self) -> usize {
        let mixed = (self.rule as u64 ^ self.place.rotate_left(17) ^ self.origin as u64)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (mixed >> 58) as usize % SLOTS
    }
}

/// A kind in the 3 low bits of an origin node's (8-aligned) address: its
/// place in the list from 0. API definitions, the last kind, never refuse
/// an entry: the custom kinds take their code.
#[inline]
fn kind_code(kind: BlockKind) -> usize {
    const {
        assert!(
            BlockKind::ApiDefinitions.code() + 1 == BlockKind::Custom("").code(),
            "API definitions are the last kind"
        );
        assert!(
            BlockKind::ApiDefinitions.code() - 1 < 8,
            "a kind code fits in 3 bits"
        )
    };
    match kind {
        BlockKind::Custom(_) => BlockKind::ApiDefinitions.code() - 1,
        other => other.code() - 1,
    }
}

/// What a key names, made when a thread first counts the key.
#[derive(Debug)]
pub(crate) struct BlockSource {
    pub(crate) key: BlockKey,
    pub(crate) resource: Arc<str>,
    pub(crate) kind: BlockKind,
    pub(crate) rule: Option<BlockRule>,
    pub(crate) origin: Option<Arc<str>>,
}

/// The rule of a [`BlockSource`].
#[derive(Debug)]
pub(crate) enum BlockRule {
    /// A loaded rule, part of the key: held weakly, so that counting its
    /// blocks never keeps it (and what it owns) alive past its rule set.
    Loaded(Weak<dyn Rule>),
    /// A rule a user slot gave, not part of the key (its blocks are
    /// counted per kind): held, one per key.
    Given(Arc<dyn Rule>),
}

impl BlockRule {
    /// The source's rule for a block by `rule`: weak when the key names it
    /// (`by_rule`), held otherwise.
    pub(crate) fn new(rule: &Arc<dyn Rule>, by_rule: bool) -> BlockRule {
        if by_rule {
            BlockRule::Loaded(Arc::downgrade(rule))
        } else {
            BlockRule::Given(Arc::clone(rule))
        }
    }

    /// The rule, unless it was a loaded rule since freed.
    pub(crate) fn get(&self) -> Option<Arc<dyn Rule>> {
        match self {
            BlockRule::Loaded(rule) => rule.upgrade(),
            BlockRule::Given(rule) => Some(Arc::clone(rule)),
        }
    }
}

impl BlockSource {
    /// The resource's id in its instance.
    pub(crate) fn resource_id(&self) -> u32 {
        self.key.place as u32
    }
}

/// One key's counts in a thread, written by the thread alone.
#[derive(Default)]
#[repr(align(64))]
struct Slot {
    rule: AtomicUsize,
    /// 0 while the slot is free (instance ids start at 1).
    place: AtomicU64,
    origin: AtomicUsize,
    /// Odd while the thread moves the slot to a new second.
    seq: AtomicU64,
    /// The second (ms / 1000 of the instance clock) `current` counts.
    second: AtomicU64,
    current: AtomicU64,
    /// Counted in seconds before `second`, since the key took the slot.
    before: AtomicU64,
    /// The second of the last count in `before`.
    previous: AtomicU64,
}

impl Slot {
    #[inline]
    fn holds(&self, key: &BlockKey) -> bool {
        self.place.load(Ordering::Relaxed) == key.place
            && self.rule.load(Ordering::Relaxed) == key.rule
            && self.origin.load(Ordering::Relaxed) == key.origin
    }

    /// Counts `n` in `second` (owner thread).
    #[inline]
    fn add(&self, second: u64, n: u64, shard: &Shard, i: usize) {
        if self.second.load(Ordering::Relaxed) == second {
            let current = self.current.load(Ordering::Relaxed);
            self.current.store(current + n, Ordering::Relaxed);
        } else {
            self.turn(second, n, shard, i);
        }
    }

    /// Starts counting in `second` (owner thread). What the ending second
    /// counted is set aside under it for the harvester, unless a harvester
    /// holds the shard this moment (then it stays in `before`, to be taken
    /// under the second of its last count): never a wait.
    #[cold]
    fn turn(&self, second: u64, n: u64, shard: &Shard, i: usize) {
        if let Some(mut books) = shard.books.try_lock() {
            let source = books.sources[i].clone();
            if let Some(source) = source {
                let mut ended = [(0, 0); 2];
                let mut k = 0;
                shard.take(&mut books, i, |second, count| {
                    ended[k] = (second, count);
                    k += 1;
                });
                for &(second, count) in &ended[..k] {
                    books.retired.push(Retired {
                        source: Arc::clone(&source),
                        second,
                        count,
                    });
                }
                merge_if_long(&mut books);
            }
        }
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        let before = self.before.load(Ordering::Relaxed) + self.current.load(Ordering::Relaxed);
        self.before.store(before, Ordering::Relaxed);
        self.previous
            .store(self.second.load(Ordering::Relaxed), Ordering::Relaxed);
        self.second.store(second, Ordering::Relaxed);
        self.current.store(n, Ordering::Relaxed);
        self.seq.store(seq + 2, Ordering::Release);
    }

    /// `(previous, before, second, current)`, consistent with one another.
    fn read(&self) -> (u64, u64, u64, u64) {
        loop {
            let seq = self.seq.load(Ordering::Acquire);
            let read = (
                self.previous.load(Ordering::Relaxed),
                self.before.load(Ordering::Relaxed),
                self.second.load(Ordering::Relaxed),
                self.current.load(Ordering::Relaxed),
            );
            fence(Ordering::Acquire);
            if seq & 1 == 0 && self.seq.load(Ordering::Relaxed) == seq {
                return read;
            }
            crate::sync::spin_loop();
        }
    }

    /// Empties the slot (under the shard's lock, by the owner or, for a
    /// thread gone, a harvester).
    fn clear(&self) {
        self.place.store(0, Ordering::Relaxed);
        self.rule.store(0, Ordering::Relaxed);
        self.origin.store(0, Ordering::Relaxed);
    }
}

/// Counts taken out of a slot before it was reused.
struct Retired {
    source: Arc<BlockSource>,
    second: u64,
    count: u64,
}

/// A shard's bookkeeping, behind its lock.
struct Books {
    sources: [Option<Arc<BlockSource>>; SLOTS],
    /// Per slot, how much of `before + current` was harvested.
    taken: [u64; SLOTS],
    retired: Vec<Retired>,
    /// `retired` is merged per key past this length.
    merge_at: usize,
}

/// One thread's counts.
struct Shard {
    slots: [Slot; SLOTS],
    books: Mutex<Books>,
}

impl Shard {
    fn new() -> Shard {
        Shard {
            slots: std::array::from_fn(|_| Slot::default()),
            books: Mutex::new(Books {
                sources: std::array::from_fn(|_| None),
                taken: [0; SLOTS],
                retired: Vec::new(),
                merge_at: MAX_RETIRED,
            }),
        }
    }

    /// Takes what slot `i` counted since `books.taken[i]`, by second.
    fn take(&self, books: &mut Books, i: usize, mut f: impl FnMut(u64, u64)) {
        let (previous, before, second, current) = self.slots[i].read();
        let taken = &mut books.taken[i];
        if *taken < before {
            f(previous, before - *taken);
            *taken = before;
        }
        let total = before + current;
        if *taken < total {
            f(second, total - *taken);
            *taken = total;
        }
    }
}

/// The shard of each token slot, made on its first block.
#[cfg(not(loom))]
static SHARDS: [OnceBox<Shard>; TOKEN_SLOTS] = [const { OnceBox::new() }; TOKEN_SLOTS];
/// The shard of threads without a token slot, written under its lock.
#[cfg(not(loom))]
static SHARED: Lazy<Shard> = Lazy::new(Shard::new);

#[cfg(loom)]
crate::sync::lazy_static! {
    static ref SHARDS: [OnceBox<Shard>; TOKEN_SLOTS] = std::array::from_fn(|_| OnceBox::new());
    static ref SHARED: Shard = Shard::new();
    static ref SHARED_WRITERS: Mutex<()> = Mutex::new(());
}

/// Counts `n` blocks under `key` at `now_ms` on this thread; `source` names
/// the key when the thread first counts it.
#[inline]
pub(crate) fn count(key: &BlockKey, now_ms: u64, n: u64, source: impl FnOnce() -> BlockSource) {
    let second = now_ms / 1_000;
    let Some(index) = thread_index() else {
        return count_shared(key, second, n, source);
    };
    let shard = match SHARDS[index].get() {
        Some(shard) => shard,
        None => SHARDS[index].get_or_init(|| Box::new(Shard::new())),
    };
    count_in(shard, key, second, n, source);
}

/// Counts in `shard`, whose slots only the caller writes.
#[inline(always)]
fn count_in(
    shard: &Shard,
    key: &BlockKey,
    second: u64,
    n: u64,
    source: impl FnOnce() -> BlockSource,
) {
    let i = key.slot();
    for j in [i, i ^ 1, i ^ 2, i ^ 3] {
        let slot = &shard.slots[j];
        if slot.holds(key) {
            return slot.add(second, n, shard, j);
        }
    }
    install(shard, key, second, n, source);
}

/// Counts in the shared shard, one writer at a time.
#[cold]
fn count_shared(key: &BlockKey, second: u64, n: u64, source: impl FnOnce() -> BlockSource) {
    let _serial = SHARED_WRITERS.lock();
    count_in(&SHARED, key, second, n, source);
}

/// Serialises the writers of the shared shard (a slot has one writer at a
/// time, as a thread's own shard has).
#[cfg(not(loom))]
static SHARED_WRITERS: Mutex<()> = Mutex::new(());

/// Gives `key` a slot of `shard` and counts `n` in it.
#[cold]
#[inline(never)]
fn install(
    shard: &Shard,
    key: &BlockKey,
    second: u64,
    n: u64,
    source: impl FnOnce() -> BlockSource,
) {
    let i = key.slot();
    let mut books = shard.books.lock();
    // A free slot of the four, else the one that counted longest ago.
    let ways = [i, i ^ 1, i ^ 2, i ^ 3];
    let free = ways
        .into_iter()
        .find(|&j| shard.slots[j].place.load(Ordering::Relaxed) == 0);
    let j = match free {
        Some(j) => j,
        None => {
            let last = |j: usize| shard.slots[j].second.load(Ordering::Relaxed);
            let j = ways.into_iter().min_by_key(|&j| last(j)).unwrap_or(i);
            retire(shard, &mut books, j);
            j
        }
    };
    let slot = &shard.slots[j];
    slot.seq.store(0, Ordering::Relaxed);
    slot.before.store(0, Ordering::Relaxed);
    slot.previous.store(second, Ordering::Relaxed);
    slot.second.store(second, Ordering::Relaxed);
    slot.current.store(n, Ordering::Relaxed);
    slot.rule.store(key.rule, Ordering::Relaxed);
    slot.origin.store(key.origin, Ordering::Relaxed);
    slot.place.store(key.place, Ordering::Relaxed);
    books.sources[j] = Some(Arc::new(source()));
    books.taken[j] = 0;
}

/// Sets aside what slot `j` holds and was not harvested, and frees it.
fn retire(shard: &Shard, books: &mut Books, j: usize) {
    let Some(source) = books.sources[j].take() else {
        return;
    };
    let mut taken = Vec::new();
    shard.take(books, j, |second, count| taken.push((second, count)));
    books
        .retired
        .extend(taken.into_iter().map(|(second, count)| Retired {
            source: Arc::clone(&source),
            second,
            count,
        }));
    merge_if_long(books);
    shard.slots[j].clear();
}

/// Merges the set-aside counts per key once they pass `books.merge_at`,
/// which then doubles past what is left (so a thread cycling through many
/// keys between harvests sorts them a logarithmic number of times).
#[inline]
fn merge_if_long(books: &mut Books) {
    if books.retired.len() > books.merge_at {
        merge_retired(&mut books.retired);
        books.merge_at = MAX_RETIRED.max(2 * books.retired.len());
    }
}

/// Merges set-aside counts per key (keeping the latest second), so that a
/// thread cycling through many keys between harvests keeps every count in
/// memory bounded by its keys; their seconds become approximate.
#[cold]
fn merge_retired(retired: &mut Vec<Retired>) {
    retired.sort_by_key(|r| (r.source.key.place, r.source.key.rule, r.source.key.origin));
    retired.dedup_by(|later, kept| {
        if later.source.key != kept.source.key {
            return false;
        }
        kept.count += later.count;
        kept.second = kept.second.max(later.second);
        true
    });
}

/// Every shard made so far.
fn shards() -> impl Iterator<Item = &'static Shard> {
    #[cfg(not(loom))]
    let shared = Lazy::get(&SHARED);
    #[cfg(loom)]
    let shared = Some(&*SHARED);
    SHARDS.iter().filter_map(OnceBox::get).chain(shared)
}

/// Takes every count of instance `instance` not taken yet, by source and
/// second.
pub(crate) fn harvest(instance: u64, mut f: impl FnMut(&Arc<BlockSource>, u64, u64)) {
    for shard in shards() {
        let mut books = shard.books.lock();
        books.retired.retain(|r| {
            if r.source.key.instance() != instance {
                return true;
            }
            f(&r.source, r.second, r.count);
            false
        });
        for i in 0..SLOTS {
            let Some(source) = books.sources[i].clone() else {
                continue;
            };
            if source.key.instance() == instance {
                shard.take(&mut books, i, |second, count| f(&source, second, count));
            }
        }
    }
}

/// Frees every count of instance `instance` (dropped: nothing enters it
/// any more).
pub(crate) fn forget(instance: u64) {
    for shard in shards() {
        let mut books = shard.books.lock();
        books
            .retired
            .retain(|r| r.source.key.instance() != instance);
        for i in 0..SLOTS {
            if books.sources[i]
                .as_ref()
                .is_some_and(|s| s.key.instance() == instance)
            {
                books.sources[i] = None;
                shard.slots[i].clear();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::FlowRule;
    use std::collections::BTreeMap;

    /// Instance ids far from those of real instances in other tests.
    fn instance(n: u64) -> u64 {
        0xF000_0000 + n
    }

    fn source(key: BlockKey, resource: &str) -> impl FnOnce() -> BlockSource {
        let resource: Arc<str> = resource.into();
        move || BlockSource {
            key,
            resource,
            kind: BlockKind::Flow,
            rule: None,
            origin: None,
        }
    }

    fn collect(instance: u64) -> BTreeMap<(String, u64), u64> {
        let mut seen = BTreeMap::new();
        harvest(instance, |source, second, count| {
            *seen
                .entry((source.resource.to_string(), second))
                .or_default() += count;
        });
        seen
    }

    #[test]
    fn counts_are_taken_once_by_second() {
        let id = instance(1);
        let rule: Arc<dyn Rule> = Arc::new(FlowRule::new("a", 1.0));
        let key = BlockKey::new(id, 7, BlockKind::Flow, Some(&rule), 0);
        for _ in 0..3 {
            count(&key, 10_100, 1, source(key, "a"));
        }
        count(&key, 10_900, 2, source(key, "a"));
        assert_eq!(
            collect(id),
            BTreeMap::from([(("a".into(), 10), 5)]),
            "the second so far"
        );
        count(&key, 11_000, 1, source(key, "a"));
        count(&key, 13_500, 4, source(key, "a"));
        assert_eq!(
            collect(id),
            BTreeMap::from([(("a".into(), 11), 1), (("a".into(), 13), 4)])
        );
        assert!(collect(id).is_empty(), "nothing taken twice");
        forget(id);
    }

    #[test]
    fn an_evicted_key_keeps_its_counts_and_a_gone_thread_is_harvested_then_forgotten() {
        let id = instance(2);
        // More keys than slots, on a thread that then exits.
        std::thread::spawn(move || {
            for resource in 0..(3 * SLOTS as u32) {
                let key = BlockKey::new(id, resource, BlockKind::System, None, 0);
                for _ in 0..=resource {
                    count(&key, 5_000, 1, source(key, &format!("r{resource}")));
                }
            }
        })
        .join()
        .unwrap();
        let seen = collect(id);
        assert_eq!(seen.len(), 3 * SLOTS);
        for resource in 0..(3 * SLOTS as u64) {
            assert_eq!(seen[&(format!("r{resource}"), 5)], resource + 1);
        }
        assert!(collect(id).is_empty());
        forget(id);
        let ours = shards().any(|shard| {
            let books = shard.books.lock();
            books
                .sources
                .iter()
                .flatten()
                .any(|s| s.key.instance() == id)
                || books.retired.iter().any(|r| r.source.key.instance() == id)
        });
        assert!(!ours, "a dropped instance's slots are freed");
    }

    #[test]
    fn threads_count_apart_and_every_block_is_taken() {
        let id = instance(3);
        let key = BlockKey::new(id, 1, BlockKind::Degrade, None, 0);
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    for i in 0..10_000u64 {
                        count(&key, 20_000 + i / 10, 1, source(key, "d"));
                    }
                })
            })
            .collect();
        // Harvest while they count: nothing lost or taken twice.
        let mut total = 0;
        while threads.iter().any(|t| !t.is_finished()) {
            total += collect(id).values().sum::<u64>();
        }
        for t in threads {
            t.join().unwrap();
        }
        total += collect(id).values().sum::<u64>();
        assert_eq!(total, 40_000);
    }

    #[test]
    fn keys_differ_by_every_part() {
        let rule: Arc<dyn Rule> = Arc::new(FlowRule::new("a", 1.0));
        let base = BlockKey::new(1, 1, BlockKind::Flow, Some(&rule), 0);
        assert_ne!(base, BlockKey::new(2, 1, BlockKind::Flow, Some(&rule), 0));
        assert_ne!(base, BlockKey::new(1, 2, BlockKind::Flow, Some(&rule), 0));
        assert_ne!(base, BlockKey::new(1, 1, BlockKind::System, Some(&rule), 0));
        assert_ne!(base, BlockKey::new(1, 1, BlockKind::Flow, None, 0));
        assert_ne!(base, BlockKey::new(1, 1, BlockKind::Flow, Some(&rule), 64));
        assert_ne!(
            BlockKey::new(1, 1, BlockKind::Custom("x"), None, 0),
            BlockKey::new(1, 1, BlockKind::Custom("yy"), None, 0)
        );
    }
}

#[cfg(all(test, loom))]
mod loom_tests;
