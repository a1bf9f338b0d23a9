//! The atomics, locks and thread-locals of the lock-free protocols, from
//! `std`/`parking_lot` in normal builds and from `loom` under `--cfg loom`,
//! so that the same code is model-checked
//! (`RUSTFLAGS="--cfg loom" cargo test -p sentinel-flow-core --lib --release loom`).
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

/// `loom::thread_local!`, taking the `const { ... }` initializers that
/// normal builds give `std::thread_local!`.
#[cfg(loom)]
macro_rules! loom_thread_local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = const { $init:expr }; $($rest:tt)*) => {
        loom::thread_local!($(#[$attr])* $vis static $name: $t = $init;);
        $crate::sync::loom_thread_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = const { $init:expr }) => {
        loom::thread_local!($(#[$attr])* $vis static $name: $t = $init;);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr; $($rest:tt)*) => {
        loom::thread_local!($(#[$attr])* $vis static $name: $t = $init;);
        $crate::sync::loom_thread_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr) => {
        loom::thread_local!($(#[$attr])* $vis static $name: $t = $init;);
    };
}

#[cfg(loom)]
pub(crate) use loom_thread_local;
#[cfg(loom)]
pub(crate) use loom_thread_local as thread_local;

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

#[cfg(not(loom))]
pub(crate) use once_cell::race::OnceBox;

/// `once_cell::race::OnceBox` with its publication told to loom: the value
/// is published by a loom atomic (release, as `OnceBox`'s own swap is) and
/// read after an acquire load, so that loom sees the readers' happens-before
/// edge to the value's construction.
#[cfg(loom)]
#[derive(Debug)]
pub(crate) struct OnceBox<T> {
    inner: once_cell::race::OnceBox<T>,
    ready: atomic::AtomicBool,
}

#[cfg(loom)]
impl<T> Default for OnceBox<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(loom)]
impl<T> OnceBox<T> {
    pub(crate) fn new() -> Self {
        OnceBox {
            inner: once_cell::race::OnceBox::new(),
            ready: atomic::AtomicBool::new(false),
        }
    }

    pub(crate) fn get(&self) -> Option<&T> {
        if self.ready.load(atomic::Ordering::Acquire) {
            self.inner.get()
        } else {
            None
        }
    }

    pub(crate) fn get_or_init(&self, make: impl FnOnce() -> Box<T>) -> &T {
        if let Some(value) = self.get() {
            return value;
        }
        match self.inner.set(make()) {
            Ok(()) => self.ready.store(true, atomic::Ordering::Release),
            // Another thread's box won: wait for its publication.
            Err(_lost) => {
                while !self.ready.load(atomic::Ordering::Acquire) {
                    loom::thread::yield_now();
                }
            }
        }
        self.inner.get().expect("set above or by the winner")
    }
}

/// Runs `model` under loom with at most `preemptions` preemptions per
/// execution (unless `LOOM_MAX_PREEMPTIONS` says otherwise).
#[cfg(all(test, loom))]
pub(crate) fn check(preemptions: usize, model: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_none() {
        builder.preemption_bound = Some(preemptions);
    }
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&runs);
    builder.check(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        model();
    });
    eprintln!(
        "loom: {} executions",
        runs.load(std::sync::atomic::Ordering::Relaxed)
    );
}
