//! What happens to names past a cap: counted, and logged once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::reserved::RuleNames;
use crate::sync::atomic as model;

/// The most of a refused name a log line shows: names past the length
/// limit may be megabytes long.
const LOGGED_NAME_BYTES: usize = 128;

/// The refusals of one registry. Registries of one kind may share the
/// warning and a total (the origin registries of an instance's resources),
/// so that one cap is logged once and counted once however many resources
/// reach it.
#[derive(Debug)]
pub(crate) struct Overflow {
    what: &'static str,
    refused: AtomicU64,
    warned: Arc<AtomicBool>,
    total: Option<Arc<AtomicU64>>,
}

impl Overflow {
    /// Refusals of `what` (`resources`, `contexts`...), warned of once.
    pub(crate) fn new(what: &'static str) -> Self {
        Overflow {
            what,
            refused: AtomicU64::new(0),
            warned: Arc::default(),
            total: None,
        }
    }

    /// As [`new`](Self::new), warning once through `warned` and adding
    /// every refusal to `total` as well.
    pub(crate) fn shared(
        what: &'static str,
        warned: &Arc<AtomicBool>,
        total: &Arc<AtomicU64>,
    ) -> Self {
        Overflow {
            what,
            refused: AtomicU64::new(0),
            warned: Arc::clone(warned),
            total: Some(Arc::clone(total)),
        }
    }

    #[cold]
    pub(crate) fn record(&self, cap: usize, max_name_len: usize, name: &str) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        if let Some(total) = &self.total {
            total.fetch_add(1, Ordering::Relaxed);
        }
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                cap,
                max_name_len,
                name = shortened(name),
                name_len = name.len(),
                "{}",
                self.cap_message(cap, max_name_len)
            );
        }
    }

    /// The warning logged once when the cap is first reached.
    fn cap_message(&self, cap: usize, max_name_len: usize) -> String {
        format!(
            "sentinel: more than {cap} {} (or a name over {max_name_len} bytes); \
             an entry under a new name that no rule mentions gets no node of its own \
             (see the refused counts); names that rules mention always get one",
            self.what
        )
    }

    /// Counts a refusal that something else warns of (a shared budget).
    #[cold]
    pub(crate) fn count_only(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        if let Some(total) = &self.total {
            total.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Refusals recorded here.
    pub(crate) fn count(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// A bound on names made by entries, shared by several registries (the
/// origins of every resource of an instance).
///
/// **Invariant.** `used` never exceeds `max`: a name is made only after
/// [`take`](Self::take) raised `used` from below `max`, in one
/// compare-and-swap, however many registries take at once. Loom model:
/// `loom_a_shared_budget_is_never_overdrawn` below.
#[derive(Debug)]
pub(crate) struct Budget {
    what: &'static str,
    max: usize,
    used: model::AtomicUsize,
    refused: model::AtomicU64,
    warned: model::AtomicBool,
}

impl Budget {
    /// A budget of `max` names of `what`.
    pub(crate) fn new(what: &'static str, max: usize) -> Self {
        Budget {
            what,
            max,
            used: model::AtomicUsize::new(0),
            refused: model::AtomicU64::new(0),
            warned: model::AtomicBool::new(false),
        }
    }

    /// Takes one name from the budget; `false` when none is left.
    pub(crate) fn take(&self) -> bool {
        let max = self.max;
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok()
    }

    /// Whether every name of the budget was taken.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.used.load(Ordering::Relaxed) >= self.max
    }

    /// Counts an entry refused because the budget was spent, in `overflow`
    /// (the registry's counts) and here, and warns once.
    #[cold]
    pub(crate) fn refuse(&self, overflow: &Overflow, name: &str) {
        overflow.count_only();
        self.refused.fetch_add(1, Ordering::Relaxed);
        if !self.warned.swap(true, Ordering::Relaxed) {
            let (what, max) = (self.what, self.max);
            tracing::warn!(
                max,
                name = shortened(name),
                "sentinel: {max} {what} made by entries in all; entries for new {what} \
                 that no rule names are counted on their resource's shared node \
                 (see the refused counts)"
            );
        }
    }

    /// The budget.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Names taken.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Entries refused because the budget was spent.
    pub(crate) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// The origin cap of an instance, shared by its resources: each resource
/// holds at most `max` origins made by entries, all resources together at
/// most the budget's, and every refusal adds to one total, warned of once.
#[derive(Debug)]
pub(crate) struct OriginCap {
    pub(crate) max: usize,
    pub(crate) max_name_len: usize,
    pub(crate) budget: Arc<Budget>,
    /// The names the rules in force mention (origins, and every other
    /// kind, which the instance reads here too).
    pub(crate) names: RuleNames,
    warned: Arc<AtomicBool>,
    total: Arc<AtomicU64>,
}

impl OriginCap {
    pub(crate) fn new(
        max: usize,
        max_total: usize,
        max_name_len: usize,
        names: &RuleNames,
    ) -> Self {
        OriginCap {
            max,
            max_name_len,
            budget: Arc::new(Budget::new("origins", max_total)),
            names: Arc::clone(names),
            warned: Arc::default(),
            total: Arc::default(),
        }
    }

    /// The overflow of one resource's origins.
    pub(crate) fn overflow(&self) -> Overflow {
        Overflow::shared("origins of a resource", &self.warned, &self.total)
    }

    /// Origins refused over every resource.
    pub(crate) fn refused(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}

/// At most the first [`LOGGED_NAME_BYTES`] of `name`, cut on a character
/// boundary.
fn shortened(name: &str) -> &str {
    if name.len() <= LOGGED_NAME_BYTES {
        return name;
    }
    let mut end = LOGGED_NAME_BYTES;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_names_are_cut_on_a_character_boundary() {
        assert_eq!(shortened("abc"), "abc");
        let long = "é".repeat(100);
        let cut = shortened(&long);
        assert!(cut.len() <= LOGGED_NAME_BYTES && cut.len() >= LOGGED_NAME_BYTES - 1);
        assert!(long.starts_with(cut));
    }

    #[test]
    fn cap_warning_ends_in_a_whole_sentence() {
        let message = Overflow::new("resources").cap_message(6000, 1024);
        assert_eq!(
            message,
            "sentinel: more than 6000 resources (or a name over 1024 bytes); an entry under \
             a new name that no rule mentions gets no node of its own (see the refused \
             counts); names that rules mention always get one"
        );
    }

    #[test]
    fn shared_refusals_add_to_the_total() {
        let warned = Arc::default();
        let total = Arc::default();
        let a = Overflow::shared("origins", &warned, &total);
        let b = Overflow::shared("origins", &warned, &total);
        a.record(1, 8, "x");
        b.record(1, 8, "y");
        b.record(1, 8, "z");
        assert_eq!((a.count(), b.count()), (1, 2));
        assert_eq!(total.load(Ordering::Relaxed), 3);
        assert!(warned.load(Ordering::Relaxed));
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::Budget;
    use loom::sync::Arc;
    use loom::thread;

    /// Three registries take from a budget of two at once: exactly two
    /// names are made, and the budget reads full after.
    #[test]
    fn loom_a_shared_budget_is_never_overdrawn() {
        loom::model(|| {
            let budget = Arc::new(Budget::new("origins", 2));
            let takers: Vec<_> = (0..3)
                .map(|_| {
                    let budget = Arc::clone(&budget);
                    thread::spawn(move || budget.take())
                })
                .collect();
            let taken = takers
                .into_iter()
                .map(|t| t.join().expect("no panic"))
                .filter(|&took| took)
                .count();
            assert_eq!(taken, 2);
            assert_eq!(budget.used(), 2);
            assert!(budget.is_full());
        });
    }
}
