//! What a response holds until its body ends (the inner body and the
//! request's entries), kept in a block of a per-thread pool instead of in
//! the response itself.
//!
//! A response of up to 128 bytes moves in registers; one byte more and
//! every move (through the layer's future, tower's `Oneshot`, hyper's
//! dispatcher) is a `memcpy` call. `http::Response` is 112 bytes before
//! its body, so a body that carried the entries inline (more than 100
//! bytes) made each response about 230 bytes and each of its moves a
//! call; the gateway's body is one pointer to its block.
//!
//! A block freed on a thread is kept for that thread's next response:
//! a thread whose responses end on it, and which serves no more of them
//! at once than it has before, takes no memory from the allocator. A
//! response whose body ends on another thread (a work-stealing runtime)
//! leaves its block there; a thread that keeps none allocates one.
//! Bounds: a block is 256 bytes, and a thread keeps at most [`KEPT`] free
//! blocks (64 KiB), freed with the thread. A value that does not fit a
//! block (a body type larger than about 140 bytes) is boxed instead.
//!
//! The only `unsafe` code of the crate is here.
#![allow(unsafe_code)]

use std::alloc::{self, Layout};
use std::cell::Cell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::ptr::{self, NonNull};

/// A block: room for the gateway's body state with an axum body (about
/// 120 bytes) and for most other body types.
const BLOCK: Layout = match Layout::from_size_align(256, 16) {
    Ok(layout) => layout,
    Err(_) => panic!("a valid layout"),
};

/// The free blocks a thread keeps at most.
pub(crate) const KEPT: usize = 256;

/// A free block, linked to the next free one.
struct Free {
    next: *mut Free,
}

/// A thread's free blocks: a list threaded through the blocks.
struct Pool {
    head: Cell<*mut Free>,
    len: Cell<usize>,
}

impl Pool {
    fn take(&self) -> Option<NonNull<u8>> {
        let head = NonNull::new(self.head.get())?;
        // SAFETY: a block on the list is a live `BLOCK` allocation that
        // only the list refers to, with a `Free` written at its start
        // (`give`).
        self.head.set(unsafe { head.as_ref().next });
        self.len.set(self.len.get() - 1);
        Some(head.cast())
    }

    /// Keeps `block` (a `BLOCK` allocation no one refers to any more);
    /// `false` when the pool is full.
    fn give(&self, block: NonNull<u8>) -> bool {
        if self.len.get() >= KEPT {
            return false;
        }
        let free = block.cast::<Free>();
        // SAFETY: `block` is a `BLOCK` allocation (256 bytes, aligned to
        // 16) that nothing else refers to: room for a `Free`.
        unsafe {
            free.as_ptr().write(Free {
                next: self.head.get(),
            })
        };
        self.head.set(free.as_ptr());
        self.len.set(self.len.get() + 1);
        true
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        while let Some(block) = self.take() {
            // SAFETY: a block taken from the list is a `BLOCK` allocation
            // that nothing refers to.
            unsafe { alloc::dealloc(block.as_ptr(), BLOCK) };
        }
    }
}

thread_local! {
    static POOL: Pool = const {
        Pool {
            head: Cell::new(ptr::null_mut()),
            len: Cell::new(0),
        }
    };
}

/// A free block: the thread's, else a new one.
#[inline]
fn take_block() -> NonNull<u8> {
    match POOL.try_with(Pool::take) {
        Ok(Some(block)) => block,
        // No free block, or the thread's pool is already gone (a value
        // made while the thread's locals are destroyed).
        _ => new_block(),
    }
}

#[cold]
fn new_block() -> NonNull<u8> {
    // SAFETY: `BLOCK` has a non-zero size.
    let block = unsafe { alloc::alloc(BLOCK) };
    NonNull::new(block).unwrap_or_else(|| alloc::handle_alloc_error(BLOCK))
}

/// Gives `block` back to the thread's pool, or to the allocator when the
/// pool is full or gone.
#[inline]
fn give_block(block: NonNull<u8>) {
    if !POOL.try_with(|pool| pool.give(block)).unwrap_or(false) {
        // SAFETY: `block` is a `BLOCK` allocation nothing refers to.
        unsafe { alloc::dealloc(block.as_ptr(), BLOCK) };
    }
}

/// A `T` in a block of the thread's pool (a box when `T` does not fit
/// one): owned as a `Box<T>` is, and like it never moved by moving the
/// handle, so that it can be pinned in place ([`pin`](Self::pin)).
pub(crate) struct Held<T> {
    ptr: NonNull<T>,
    owns: PhantomData<T>,
}

// SAFETY: a `Held<T>` owns its `T` as a `Box<T>` does; the block goes back
// to the pool of whichever thread drops it, and is plain memory from the
// global allocator, which any thread may free.
unsafe impl<T: Send> Send for Held<T> {}
// SAFETY: as for `Send`: `&Held<T>` gives only `&T`.
unsafe impl<T: Sync> Sync for Held<T> {}

/// The value is never moved by moving the handle (as with `Box`).
impl<T> Unpin for Held<T> {}

impl<T> Held<T> {
    /// `T` fits a block.
    const IN_BLOCK: bool = size_of::<T>() <= BLOCK.size() && align_of::<T>() <= BLOCK.align();

    /// Holds `value`.
    #[inline]
    pub(crate) fn new(value: T) -> Self {
        let ptr = if Self::IN_BLOCK {
            let ptr = take_block().cast::<T>();
            // SAFETY: the block is free, and its size and alignment fit a `T`.
            unsafe { ptr.as_ptr().write(value) };
            ptr
        } else {
            NonNull::from(Box::leak(Box::new(value)))
        };
        Held {
            ptr,
            owns: PhantomData,
        }
    }

    /// Holds `value`, pinned: it stays where it is until it is dropped in
    /// place (as `Box::pin`).
    #[inline]
    pub(crate) fn pin(value: T) -> Pin<Self> {
        // SAFETY: `Held`'s `Deref` and `DerefMut` return a reference to
        // the value in its block or box and never move it, and `drop`
        // drops it in place; through the `Pin` only a pinned reference to
        // a value that is not `Unpin` is handed out.
        unsafe { Pin::new_unchecked(Held::new(value)) }
    }
}

impl<T> Deref for Held<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: `ptr` points to the live `T` this handle owns.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T> DerefMut for Held<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`, and `&mut self` is the only way to it.
        unsafe { self.ptr.as_mut() }
    }
}

impl<T> Drop for Held<T> {
    #[inline]
    fn drop(&mut self) {
        if Self::IN_BLOCK {
            /// Gives the block back even when the value's drop panics.
            struct GiveBack(NonNull<u8>);
            impl Drop for GiveBack {
                #[inline]
                fn drop(&mut self) {
                    give_block(self.0);
                }
            }
            let _give_back = GiveBack(self.ptr.cast());
            // SAFETY: the value is live and owned by this handle, which is
            // going away; the block is given back after, by the guard.
            unsafe { ptr::drop_in_place(self.ptr.as_ptr()) };
        } else {
            // SAFETY: a `T` that does not fit a block was boxed by `new`.
            drop(unsafe { Box::from_raw(self.ptr.as_ptr()) });
        }
    }
}

/// The number of free blocks the current thread keeps.
#[cfg(test)]
fn kept() -> usize {
    POOL.with(|pool| pool.len.get())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Counts its drops; panics in its drop when asked.
    struct Dropped(Arc<AtomicUsize>, bool);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
            assert!(!self.1, "a drop that panics");
        }
    }

    #[test]
    fn a_freed_block_is_the_next_one_taken_on_its_thread() {
        let first = Held::new([7u64; 16]);
        let address = first.ptr.cast::<u8>();
        assert_eq!(*first, [7u64; 16]);
        let before = kept();
        drop(first);
        assert_eq!(kept(), before + 1);
        let second = Held::new(String::from("reused"));
        assert_eq!(second.ptr.cast::<u8>(), address);
        assert_eq!(kept(), before);
        assert_eq!(&*second, "reused");
    }

    #[test]
    fn a_thread_keeps_at_most_its_bound_of_free_blocks() {
        std::thread::spawn(|| {
            let held: Vec<Held<u64>> = (0..KEPT as u64 + 40).map(Held::new).collect();
            assert_eq!(kept(), 0);
            assert!(held.iter().enumerate().all(|(k, h)| **h == k as u64));
            drop(held);
            assert_eq!(kept(), KEPT);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn each_value_is_dropped_once_wherever_it_is_dropped() {
        let drops = Arc::new(AtomicUsize::new(0));
        let here = Held::new(Dropped(drops.clone(), false));
        let there = Held::new(Dropped(drops.clone(), false));
        std::thread::spawn(move || {
            let before = kept();
            drop(there);
            assert_eq!(kept(), before + 1, "kept by the thread that drops it");
        })
        .join()
        .unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        drop(here);
        assert_eq!(drops.load(Ordering::SeqCst), 2);
    }

    /// Threads in a ring, each making values, dropping some and passing
    /// the others on to the next thread, which drops them: against the
    /// model (every value made is dropped once, a thread never keeps more
    /// than `KEPT` free blocks), whatever the interleaving.
    #[test]
    fn values_passed_between_threads_are_dropped_once_and_each_pool_keeps_its_bound() {
        const THREADS: usize = 4;
        let (rounds, most) = if cfg!(miri) { (6, 8) } else { (200, 2 * KEPT) };
        let made = Arc::new(AtomicUsize::new(0));
        let drops = Arc::new(AtomicUsize::new(0));
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..THREADS)
            .map(|_| std::sync::mpsc::channel::<Vec<Held<Dropped>>>())
            .unzip();
        let workers: Vec<_> = receivers
            .into_iter()
            .enumerate()
            .map(|(thread, from_previous)| {
                let to_next = senders[(thread + 1) % THREADS].clone();
                let (made, drops) = (made.clone(), drops.clone());
                std::thread::spawn(move || {
                    let mut seed = thread as u64 + 1;
                    for _ in 0..rounds {
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let count = (seed >> 33) as usize % most + 1;
                        let mut batch: Vec<Held<Dropped>> = (0..count)
                            .map(|_| Held::new(Dropped(drops.clone(), false)))
                            .collect();
                        made.fetch_add(count, Ordering::SeqCst);
                        let passed = batch.split_off(count / 2);
                        drop(batch);
                        to_next.send(passed).unwrap();
                        drop(from_previous.recv().unwrap());
                        assert!(kept() <= KEPT);
                    }
                })
            })
            .collect();
        drop(senders);
        for worker in workers {
            worker.join().unwrap();
        }
        assert_eq!(drops.load(Ordering::SeqCst), made.load(Ordering::SeqCst));
    }

    #[test]
    fn a_panicking_drop_still_gives_its_block_back() {
        let drops = Arc::new(AtomicUsize::new(0));
        let held = Held::new(Dropped(drops.clone(), true));
        let before = kept();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(held)));
        assert!(result.is_err());
        assert_eq!(drops.load(Ordering::SeqCst), 1);
        assert_eq!(kept(), before + 1);
    }

    #[test]
    fn values_that_do_not_fit_a_block_are_boxed() {
        #[repr(align(64))]
        struct Aligned(u8);
        let large = Held::new([3u8; 1_000]);
        let aligned = Held::new(Aligned(5));
        let empty = Held::new(());
        let before = kept();
        const { assert!(!Held::<[u8; 1_000]>::IN_BLOCK && !Held::<Aligned>::IN_BLOCK) };
        assert_eq!(large[999], 3);
        assert_eq!(aligned.0, 5);
        assert_eq!(aligned.ptr.as_ptr() as usize % 64, 0);
        drop((large, aligned));
        assert_eq!(kept(), before, "no block taken or given");
        drop(empty);
        assert_eq!(kept(), before + 1, "a zero-sized value takes a block");
    }

    #[test]
    fn a_pinned_future_that_borrows_itself_runs_across_moves_of_its_handle() {
        use std::future::Future;
        use std::task::{Context, Poll, Waker};

        /// Pending at its first poll, ready at its second.
        struct Once(bool);
        impl Future for Once {
            type Output = ();
            fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
                if std::mem::replace(&mut self.0, true) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }
        }
        // Holds a reference to its own local across the wait: moving it
        // after the first poll would leave the reference dangling (which
        // Miri reports).
        let mut future = Held::pin(async {
            let words = [1u64, 2, 3];
            let first = &words[0];
            Once(false).await;
            *first + words[2]
        });
        let mut cx = Context::from_waker(Waker::noop());
        assert!(future.as_mut().poll(&mut cx).is_pending());
        let mut moved = vec![future];
        let mut future = moved.pop().unwrap();
        assert_eq!(future.as_mut().poll(&mut cx), Poll::Ready(4));
    }
}
