//! The atomics, locks and thread-locals of the lock-free protocols, from
//! `std`/`parking_lot` in normal builds and from `loom` under `--cfg loom`,
//! so that the same code is model-checked
//! (`RUSTFLAGS="--cfg loom" cargo test -p sentinel-core --lib --release loom`).
//! Normal builds re-export `std` and `parking_lot` unchanged: no behaviour or
//! cost differs.
//!
//! Loom's atomics and locks have no `const fn new`, so a `static` of them is
//! written twice: the `const` static for normal builds, and a
//! `loom::lazy_static!` (made afresh for each explored execution) under
//! `cfg(loom)`.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic;

#[cfg(loom)]
pub(crate) use loom::sync::atomic;

/// `std::thread_local!`, or loom's (each model thread has its own values,
/// dropped when it ends).
#[cfg(not(loom))]
pub(crate) use std::thread_local;

#[cfg(loom)]
pub(crate) use loom::thread_local;

#[cfg(loom)]
pub(crate) use loom::lazy_static;

#[cfg(not(loom))]
pub(crate) use parking_lot::Mutex;

/// `parking_lot::Mutex`'s interface over loom's mutex.
#[cfg(loom)]
#[derive(Debug)]
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

#[cfg(loom)]
impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex(loom::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn try_lock(&self) -> Option<loom::sync::MutexGuard<'_, T>> {
        self.0.try_lock().ok()
    }
}

/// Lets another thread run while this one waits for it (a spin loop's
/// back-off): loom must be told, or it explores the spin forever.
#[inline]
pub(crate) fn yield_now() {
    #[cfg(not(loom))]
    std::thread::yield_now();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// `std::hint::spin_loop`; under loom a yield, for the same reason as
/// [`yield_now`].
#[inline(always)]
pub(crate) fn spin_loop() {
    #[cfg(not(loom))]
    std::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}
