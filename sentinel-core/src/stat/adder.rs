//! LongAdder-like counters: one atomic while uncontended, striped over
//! cache-padded cells once two threads collide.
//!
//! [`Adder`] is one 64-bit counter. [`PackedLanes`] are the six counters of a
//! metric bucket, packed two 32-bit lanes to a word so that a bucket stays
//! small and a completion (success and RT) is one compare-and-swap. Either way
//! a failed swap means another thread wrote the same line, so the counter
//! allocates its cells (once, lazily) and from then on each thread adds to the
//! cell its probe picks. A cell holds all lanes of the counter, so a thread
//! recording pass, success and RT into one bucket touches one line of its own.
//!
//! Values wrap on overflow, so an `Adder` can carry a signed count
//! (concurrency) as two's complement.

use crate::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::cell::Cell;
use std::fmt;

use crate::sync::OnceBox;
use once_cell::sync::Lazy;

/// Aligns its content to its own pair of cache lines (x86 prefetches lines in
/// pairs, so 64 bytes would still let neighbours interfere).
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

/// Cells per striped counter: the next power of two at or above the number of
/// CPUs, at least 2 and at most 64 (past that, threads share cells and a
/// collision moves them apart).
#[cfg(not(loom))]
static CELL_COUNT: Lazy<usize> = Lazy::new(|| {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    cpus.next_power_of_two().clamp(2, 64)
});
/// Two under loom, whatever the machine, to keep the models small.
#[cfg(loom)]
static CELL_COUNT: Lazy<usize> = Lazy::new(|| 2);

#[cfg(not(loom))]
static NEXT_PROBE: AtomicU32 = AtomicU32::new(1);
#[cfg(loom)]
crate::sync::lazy_static! {
    static ref NEXT_PROBE: AtomicU32 = AtomicU32::new(1);
}

crate::sync::thread_local! {
    /// This thread's cell choice; 0 until first used.
    static PROBE: Cell<u32> = const { Cell::new(0) };
}

/// The calling thread's probe. Threads take consecutive values, so the first
/// threads to collide land on distinct cells.
#[inline]
fn probe() -> u32 {
    PROBE.with(|p| {
        let v = p.get();
        if v != 0 {
            return v;
        }
        let v = NEXT_PROBE.fetch_add(1, Relaxed).max(1);
        p.set(v);
        v
    })
}

/// Moves the calling thread to another cell after a collision (xorshift).
fn advance_probe(old: u32) -> u32 {
    let mut x = old;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    let x = x.max(1);
    PROBE.with(|p| p.set(x));
    x
}

struct Cells<const N: usize> {
    mask: usize,
    cells: Box<[CachePadded<[AtomicU64; N]>]>,
}

impl<const N: usize> Cells<N> {
    fn new() -> Self {
        let count = *CELL_COUNT;
        Cells {
            mask: count - 1,
            cells: (0..count)
                .map(|_| CachePadded(std::array::from_fn(|_| AtomicU64::new(0))))
                .collect(),
        }
    }

    #[inline]
    fn cell(&self, probe: u32) -> &[AtomicU64; N] {
        &self.cells[probe as usize & self.mask].0
    }
}

/// Where contended adds go: one cache-padded cell of `N` lanes per probe value.
struct Striped<const N: usize> {
    cells: OnceBox<Cells<N>>,
}

impl<const N: usize> Default for Striped<N> {
    fn default() -> Self {
        Striped {
            cells: OnceBox::new(),
        }
    }
}

impl<const N: usize> Striped<N> {
    #[inline]
    fn get(&self) -> Option<&Cells<N>> {
        self.cells.get()
    }

    #[cold]
    fn get_or_init(&self) -> &Cells<N> {
        self.cells.get_or_init(|| Box::new(Cells::new()))
    }

    /// Adds `x` (wrapping) to `lane` of the calling thread's cell.
    #[inline]
    fn add(cells: &Cells<N>, lane: usize, x: u64) {
        let probe = probe();
        let cell = &cells.cell(probe)[lane];
        let current = cell.load(Relaxed);
        if cell
            .compare_exchange(current, current.wrapping_add(x), Relaxed, Relaxed)
            .is_err()
        {
            // Another thread shares this cell: move on for next time, and
            // finish this add unconditionally.
            cells.cell(advance_probe(probe))[lane].fetch_add(x, Relaxed);
        }
    }

    /// The sum of `lane` over every cell (wrapping).
    #[inline]
    fn sum(&self, lane: usize) -> u64 {
        self.get().map_or(0, |cells| {
            cells.cells.iter().fold(0u64, |sum, cell| {
                sum.wrapping_add(cell.0[lane].load(Relaxed))
            })
        })
    }

    fn reset(&self) {
        if let Some(cells) = self.get() {
            for cell in cells.cells.iter() {
                for lane in &cell.0 {
                    lane.store(0, Relaxed);
                }
            }
        }
    }
}

/// Six 32-bit counters packed two to a word, for a metric bucket.
///
/// The uncontended path is one compare-and-swap on one word, which can add to
/// both of its lanes at once (success and RT sum together). A failed swap
/// (another thread wrote the word) or an add that would overflow a 32-bit lane
/// moves the counters to striped 64-bit cells for good, so the sums stay exact
/// and the packed base keeps a bucket small (48 bytes with its start time).
pub(crate) struct PackedLanes {
    base: [AtomicU64; PackedLanes::WORDS],
    cells: Striped<{ PackedLanes::LANES }>,
}

impl Default for PackedLanes {
    fn default() -> Self {
        PackedLanes {
            base: std::array::from_fn(|_| AtomicU64::new(0)),
            cells: Striped::default(),
        }
    }
}

impl PackedLanes {
    const WORDS: usize = 3;
    /// Lanes `2w` and `2w + 1` live in the low and high half of word `w`.
    pub(crate) const LANES: usize = 2 * Self::WORDS;

    /// Adds `low` to lane `2 * word` and `high` to lane `2 * word + 1`.
    #[inline]
    pub(crate) fn add_pair(&self, word: usize, low: u64, high: u64) {
        if let Some(cells) = self.cells.get() {
            return Self::add_pair_to_cells(cells, word, low, high);
        }
        let base = &self.base[word];
        let current = base.load(Relaxed);
        if let Some(next) = packed_add(current, low, high) {
            if base
                .compare_exchange(current, next, Relaxed, Relaxed)
                .is_ok()
            {
                return;
            }
        }
        self.add_pair_contended(word, low, high);
    }

    #[cold]
    fn add_pair_contended(&self, word: usize, low: u64, high: u64) {
        Self::add_pair_to_cells(self.cells.get_or_init(), word, low, high);
    }

    #[inline]
    fn add_pair_to_cells(cells: &Cells<{ Self::LANES }>, word: usize, low: u64, high: u64) {
        if low != 0 {
            Striped::add(cells, 2 * word, low);
        }
        if high != 0 {
            Striped::add(cells, 2 * word + 1, high);
        }
    }

    /// Adds `x` to `lane`.
    #[inline]
    pub(crate) fn add(&self, lane: usize, x: u64) {
        if lane % 2 == 0 {
            self.add_pair(lane / 2, x, 0);
        } else {
            self.add_pair(lane / 2, 0, x);
        }
    }

    /// The total of `lane` over the base and every cell.
    #[inline]
    pub(crate) fn sum(&self, lane: usize) -> u64 {
        let word = self.base[lane / 2].load(Relaxed);
        let base = if lane % 2 == 0 {
            word as u32
        } else {
            (word >> 32) as u32
        };
        u64::from(base).wrapping_add(self.cells.sum(lane))
    }

    /// Empties every lane and returns what it held. Each word and cell is
    /// swapped with zero, so an add racing with the take is either in the
    /// result or left in the lanes: never lost, never counted twice.
    pub(crate) fn take(&self) -> [u64; Self::LANES] {
        let mut out = [0u64; Self::LANES];
        for (w, word) in self.base.iter().enumerate() {
            let v = word.swap(0, Relaxed);
            out[2 * w] = u64::from(v as u32);
            out[2 * w + 1] = v >> 32;
        }
        if let Some(cells) = self.cells.get() {
            for cell in cells.cells.iter() {
                for (lane, value) in cell.0.iter().enumerate() {
                    if value.load(Relaxed) != 0 {
                        out[lane] = out[lane].wrapping_add(value.swap(0, Relaxed));
                    }
                }
            }
        }
        out
    }

    /// Zeroes every lane. Cells, once allocated, are kept.
    pub(crate) fn reset(&self) {
        for word in &self.base {
            word.store(0, Relaxed);
        }
        self.cells.reset();
    }

    /// Whether the lanes have moved to striped cells.
    #[cfg(test)]
    pub(crate) fn is_striped(&self) -> bool {
        self.cells.get().is_some()
    }
}

/// `word` with `low` and `high` added to its halves, or `None` if either half
/// would overflow.
#[inline]
pub(crate) fn packed_add(word: u64, low: u64, high: u64) -> Option<u64> {
    let low = (word as u32).checked_add(u32::try_from(low).ok()?)?;
    let high = ((word >> 32) as u32).checked_add(u32::try_from(high).ok()?)?;
    Some(u64::from(low) | u64::from(high) << 32)
}

/// A counter for many writers and occasional readers, like Java's `LongAdder`.
///
/// Uncontended, an add is one compare-and-swap on one atomic. When two threads
/// collide, the adder allocates cache-padded cells (once) and each thread adds
/// to its own, so contention never serializes the writers. [`sum`](Self::sum)
/// adds up the cells; it is exact once writers have stopped
/// (`stat/threads_tests.rs`).
#[derive(Default)]
pub(crate) struct Adder {
    base: AtomicU64,
    cells: Striped<1>,
}

impl Adder {
    /// A counter at zero.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Adds `x` (wrapping at `u64::MAX`).
    #[inline]
    pub(crate) fn add(&self, x: u64) {
        if let Some(cells) = self.cells.get() {
            return Striped::add(cells, 0, x);
        }
        let current = self.base.load(Relaxed);
        if self
            .base
            .compare_exchange(current, current.wrapping_add(x), Relaxed, Relaxed)
            .is_err()
        {
            self.add_contended(x);
        }
    }

    #[cold]
    fn add_contended(&self, x: u64) {
        Striped::add(self.cells.get_or_init(), 0, x);
    }

    #[cfg(test)]
    /// Adds one.
    #[inline]
    pub(crate) fn increment(&self) {
        self.add(1);
    }

    #[cfg(test)]
    /// Subtracts one (wrapping); read with [`sum_signed`](Self::sum_signed).
    #[inline]
    pub(crate) fn decrement(&self) {
        self.add(u64::MAX);
    }

    /// The current total.
    pub(crate) fn sum(&self) -> u64 {
        self.base.load(Relaxed).wrapping_add(self.cells.sum(0))
    }

    /// The current total read as a signed number, for counters that go down.
    pub(crate) fn sum_signed(&self) -> i64 {
        self.sum() as i64
    }

    /// Sets the counter back to zero. Adds racing with the reset may survive it.
    #[cfg(test)]
    pub(crate) fn reset(&self) {
        self.base.store(0, Relaxed);
        self.cells.reset();
    }

    /// Whether contention has been seen and the counter is striped.
    pub(crate) fn is_striped(&self) -> bool {
        self.cells.get().is_some()
    }
}

impl fmt::Debug for Adder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Adder")
            .field("sum", &self.sum())
            .field("striped", &self.is_striped())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    #[test]
    fn uncontended_adds_stay_in_the_base() {
        let adder = Adder::new();
        for _ in 0..1_000 {
            adder.increment();
        }
        adder.add(5);
        assert_eq!(adder.sum(), 1_005);
        assert!(!adder.is_striped());
        adder.reset();
        assert_eq!(adder.sum(), 0);
    }

    #[test]
    fn decrements_wrap_to_signed() {
        let adder = Adder::new();
        adder.decrement();
        adder.decrement();
        adder.increment();
        assert_eq!(adder.sum_signed(), -1);
    }

    #[test]
    fn contended_adds_are_exact_and_reset_clears_cells() {
        let adder = Adder::new();
        let threads = 4;
        let per_thread = 200_000;
        let barrier = Barrier::new(threads);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    barrier.wait();
                    for _ in 0..per_thread {
                        adder.increment();
                    }
                });
            }
        });
        assert_eq!(adder.sum(), (threads * per_thread) as u64);
        adder.reset();
        assert_eq!(adder.sum(), 0);
    }

    #[test]
    fn packed_lanes_are_independent_in_base_and_cells() {
        let lanes = PackedLanes::default();
        lanes.add(0, 1);
        lanes.add(5, 7);
        lanes.add_pair(1, 3, 4);
        assert!(!lanes.is_striped());
        // Force the striped path as contention would.
        lanes.add_pair_contended(0, 0, 10);
        lanes.add(0, 2);
        assert!(lanes.is_striped());
        let sums: Vec<u64> = (0..PackedLanes::LANES).map(|l| lanes.sum(l)).collect();
        assert_eq!(sums, [3, 10, 3, 4, 0, 7]);
        lanes.reset();
        assert!((0..PackedLanes::LANES).all(|l| lanes.sum(l) == 0));
    }

    #[test]
    fn packed_lane_overflow_spills_to_cells_exactly() {
        let lanes = PackedLanes::default();
        lanes.add(2, u64::from(u32::MAX) - 1);
        assert!(!lanes.is_striped());
        lanes.add(2, 5);
        assert!(lanes.is_striped());
        lanes.add(3, 1 << 40);
        assert_eq!(lanes.sum(2), u64::from(u32::MAX) + 4);
        assert_eq!(lanes.sum(3), 1 << 40);
    }

    #[test]
    fn probe_moves_after_collision() {
        let first = probe();
        let moved = advance_probe(first);
        assert_ne!(first, moved);
        assert_eq!(probe(), moved);
    }
}
