//! LongAdder-like counters: one atomic while uncontended, striped over
//! cache-padded cells once two threads collide.
//!
//! [`Striped<N>`] keeps `N` counters (lanes) together: the uncontended path is
//! one compare-and-swap on the lane in the shared base; a failed swap means
//! another thread wrote the same line, so the counter allocates its cells (once,
//! lazily) and from then on each thread adds to the cell its probe picks. A
//! cell holds all `N` lanes, so a thread recording pass, success and RT into
//! one bucket touches one line of its own. [`Adder`] is the one-lane counter.
//!
//! Values wrap on overflow, so a lane can carry a signed count (concurrency)
//! as two's complement.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

use once_cell::race::OnceBox;
use once_cell::sync::Lazy;

/// Aligns its content to its own pair of cache lines (x86 prefetches lines in
/// pairs, so 64 bytes would still let neighbours interfere).
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

/// Cells per striped counter: the next power of two at or above the number of
/// CPUs, at least 2 and at most 64 (past that, threads share cells and a
/// collision moves them apart).
static CELL_COUNT: Lazy<usize> = Lazy::new(|| {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    cpus.next_power_of_two().clamp(2, 64)
});

static NEXT_PROBE: AtomicU32 = AtomicU32::new(1);

thread_local! {
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

/// `N` counters that add like Java's `LongAdder`.
pub(crate) struct Striped<const N: usize> {
    base: [AtomicU64; N],
    cells: OnceBox<Cells<N>>,
}

impl<const N: usize> Default for Striped<N> {
    fn default() -> Self {
        Striped {
            base: std::array::from_fn(|_| AtomicU64::new(0)),
            cells: OnceBox::new(),
        }
    }
}

impl<const N: usize> Striped<N> {
    /// Adds `x` (wrapping) to `lane`.
    #[inline]
    pub(crate) fn add(&self, lane: usize, x: u64) {
        if let Some(cells) = self.cells.get() {
            return Self::add_to_cells(cells, lane, x);
        }
        let base = &self.base[lane];
        let current = base.load(Relaxed);
        if base
            .compare_exchange(current, current.wrapping_add(x), Relaxed, Relaxed)
            .is_err()
        {
            self.add_contended(lane, x);
        }
    }

    #[cold]
    fn add_contended(&self, lane: usize, x: u64) {
        let cells = self.cells.get_or_init(|| Box::new(Cells::new()));
        Self::add_to_cells(cells, lane, x);
    }

    #[inline]
    fn add_to_cells(cells: &Cells<N>, lane: usize, x: u64) {
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

    /// The sum of `lane` over the base and every cell (wrapping).
    ///
    /// Not a snapshot: adds racing with the sum may or may not be included.
    #[inline]
    pub(crate) fn sum(&self, lane: usize) -> u64 {
        let mut sum = self.base[lane].load(Relaxed);
        if let Some(cells) = self.cells.get() {
            for cell in cells.cells.iter() {
                sum = sum.wrapping_add(cell.0[lane].load(Relaxed));
            }
        }
        sum
    }

    /// Zeroes every lane. Cells, once allocated, are kept.
    pub(crate) fn reset(&self) {
        for lane in &self.base {
            lane.store(0, Relaxed);
        }
        if let Some(cells) = self.cells.get() {
            for cell in cells.cells.iter() {
                for lane in &cell.0 {
                    lane.store(0, Relaxed);
                }
            }
        }
    }

    /// Whether contention has been seen and the cells exist.
    pub(crate) fn is_striped(&self) -> bool {
        self.cells.get().is_some()
    }
}

/// A counter for many writers and occasional readers, like Java's `LongAdder`.
///
/// Uncontended, an add is one compare-and-swap on one atomic. When two threads
/// collide, the adder allocates cache-padded cells (once) and each thread adds
/// to its own, so contention never serializes the writers. [`sum`](Self::sum)
/// adds up the cells; it is exact once writers have stopped.
///
/// ```
/// use sentinel_core::stat::Adder;
///
/// let adder = Adder::new();
/// std::thread::scope(|s| {
///     for _ in 0..4 {
///         s.spawn(|| (0..1000).for_each(|_| adder.increment()));
///     }
/// });
/// assert_eq!(adder.sum(), 4000);
/// ```
#[derive(Default)]
pub struct Adder {
    inner: Striped<1>,
}

impl Adder {
    /// A counter at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `x` (wrapping at `u64::MAX`).
    #[inline]
    pub fn add(&self, x: u64) {
        self.inner.add(0, x);
    }

    /// Adds one.
    #[inline]
    pub fn increment(&self) {
        self.add(1);
    }

    /// Subtracts one (wrapping); read with [`sum_signed`](Self::sum_signed).
    #[inline]
    pub fn decrement(&self) {
        self.add(u64::MAX);
    }

    /// The current total.
    pub fn sum(&self) -> u64 {
        self.inner.sum(0)
    }

    /// The current total read as a signed number, for counters that go down.
    pub fn sum_signed(&self) -> i64 {
        self.sum() as i64
    }

    /// Sets the counter back to zero. Adds racing with the reset may survive it.
    pub fn reset(&self) {
        self.inner.reset();
    }

    /// Whether contention has been seen and the counter is striped.
    pub fn is_striped(&self) -> bool {
        self.inner.is_striped()
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
    fn lanes_are_independent_in_base_and_cells() {
        let striped = Striped::<3>::default();
        striped.add(0, 1);
        striped.add(2, 7);
        // Force the striped path as contention would.
        striped.add_contended(1, 10);
        striped.add(0, 2);
        assert!(striped.is_striped());
        assert_eq!([striped.sum(0), striped.sum(1), striped.sum(2)], [3, 10, 7]);
        striped.reset();
        assert_eq!([striped.sum(0), striped.sum(1), striped.sum(2)], [0, 0, 0]);
    }

    #[test]
    fn probe_moves_after_collision() {
        let first = probe();
        let moved = advance_probe(first);
        assert_ne!(first, moved);
        assert_eq!(probe(), moved);
    }
}
