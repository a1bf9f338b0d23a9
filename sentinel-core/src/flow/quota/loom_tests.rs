//! Model checks of the lease protocol (`--cfg loom`; see `crate::sync`).

use super::*;
use loom::sync::Arc;

/// A node of four 500 ms buckets from 0: passes per bucket.
struct Window {
    passes: [AtomicU64; 4],
}

impl Window {
    fn new() -> Self {
        Window {
            passes: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    fn add(&self, at: u64, n: u64) {
        self.passes[(at / 500) as usize].fetch_add(n, Relaxed);
    }

    fn remove(&self, at: u64, n: u64) {
        self.passes[(at / 500) as usize].fetch_sub(n, Relaxed);
    }

    /// Passes in the two buckets from `bucket`.
    fn in_window(&self, bucket: usize) -> u64 {
        self.passes[bucket].load(Relaxed) + self.passes[bucket + 1].load(Relaxed)
    }
}

impl Passes for Window {
    fn window_ms(&self) -> (u64, u64) {
        (1_000, 500)
    }

    fn passes(&self, now: u64) -> u64 {
        let b = (now / 500) as usize;
        (b.saturating_sub(1)..=b.min(3))
            .map(|i| self.passes[i].load(Relaxed))
            .sum()
    }
}

/// An entry of `n` at `now`: counted on `window` where the quota says;
/// when it passed, when it is counted.
fn enter(quota: &Quota, window: &Window, n: u64, now: u64) -> Option<u64> {
    let at = match quota.acquire(window, n, now) {
        Acquired::Passed => now,
        Acquired::PassedAt(at) => at,
        Acquired::Refused => return None,
        Acquired::Unserved => unreachable!("one second of two buckets"),
    };
    window.add(at, n);
    Some(at)
}

/// Entries of one permit at `now` until one is refused.
fn fill(quota: &Quota, window: &Window, now: u64) {
    while enter(quota, window, 1, now).is_some() {}
}

/// Every interleaving with at most two preemptions (`LOOM_MAX_PREEMPTIONS`
/// sets another bound).
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.check(f);
}

/// Runs `f` on a model thread of its own with the quota and the window.
fn spawn<T: Send + 'static>(
    quota: &Arc<Quota>,
    window: &Arc<Window>,
    f: impl FnOnce(&Quota, &Window) -> T + Send + 'static,
) -> loom::thread::JoinHandle<T> {
    let (q, w) = (Arc::clone(quota), Arc::clone(window));
    loom::thread::spawn(move || f(&q, &w))
}

/// Two lease holders in one bucket, one spending the last permits while
/// the other's leftover is taken back: never more than the count, and
/// no permit lost (the bucket then fills to exactly the count).
#[test]
fn loom_take_spend_and_reclaim_lose_and_double_nothing() {
    model(|| {
        let quota = Arc::new(Quota::new(16.0));
        let window = Arc::new(Window::new());
        let a = spawn(&quota, &window, |q, w| {
            // A lease of two; one spent, one left in it, then spent.
            enter(q, w, 1, 10);
            enter(q, w, 1, 20);
        });
        let b = spawn(&quota, &window, |q, w| {
            // All that is left, then one more: taken from A's lease.
            enter(q, w, 14, 30);
            enter(q, w, 1, 40);
        });
        a.join().unwrap();
        b.join().unwrap();
        assert!(window.in_window(0) <= 16);
        fill(&quota, &window, 50);
        assert_eq!(window.in_window(0), 16);
    });
}

/// A bucket begins while a lease of the bucket before is held and
/// spent (an entry late for its bucket) and a permit is given back:
/// the two buckets never hold more than the count, and once settled
/// they fill to exactly the count.
#[test]
fn loom_a_bucket_change_while_a_lease_is_held_keeps_the_window_exact() {
    model(|| {
        let quota = Arc::new(Quota::new(16.0));
        let window = Arc::new(Window::new());
        let a = spawn(&quota, &window, |q, w| {
            enter(q, w, 1, 10);
            // Read the clock in bucket 0; may find bucket 1 begun.
            enter(q, w, 1, 20);
            // Refused by a later check: given back.
            if let Some(at) = enter(q, w, 1, 30) {
                q.give_back(1, at);
                w.remove(at, 1);
            }
        });
        let b = spawn(&quota, &window, |q, w| {
            enter(q, w, 1, 510);
            enter(q, w, 13, 520);
        });
        a.join().unwrap();
        b.join().unwrap();
        assert!(window.in_window(0) <= 16);
        fill(&quota, &window, 600);
        assert!(window.in_window(0) <= 16);
        assert_eq!(window.in_window(1), 16 - window.passes[0].load(Relaxed));
    });
}

/// A thread without a lease (both are held) takes exact permits while
/// a holder begins the next bucket: an entry late for its bucket passes
/// (counted in the rule's bucket) and no window holds more than the
/// count.
#[test]
fn loom_a_late_entry_without_a_lease_is_counted_in_the_rules_bucket() {
    model(|| {
        let quota = Arc::new(Quota::new(4.0));
        let window = Arc::new(Window::new());
        // This thread holds the first lease.
        assert!(enter(&quota, &window, 1, 10).is_some());
        let (q, w) = (Arc::clone(&quota), Arc::clone(&window));
        let holder = loom::thread::spawn(move || {
            // The second lease, held while the third thread runs.
            let first = enter(&q, &w, 1, 20);
            let (q3, w3) = (Arc::clone(&q), Arc::clone(&w));
            let third = loom::thread::spawn(move || enter(&q3, &w3, 1, 499));
            // Begins bucket 1, maybe before the third thread's check.
            let next = enter(&q, &w, 1, 510);
            (first, third.join().unwrap(), next)
        });
        let (first, late, next) = holder.join().unwrap();
        assert!(first.is_some() && next.is_some());
        assert!(late.is_some(), "4 permits, 4 asked");
        assert!(window.in_window(0) <= 4);
        assert!(window.in_window(1) <= 4);
    });
}
