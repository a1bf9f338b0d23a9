//! The most memory a rule may take once loaded: what the instance's rule
//! memory budget ([`SentinelBuilder::rule_memory_budget`](crate::SentinelBuilder::rule_memory_budget))
//! adds up before a load is applied.
//!
//! Each kind states its rule's figure (`footprint()` on its rule): the rule
//! as the set keeps it (the list as loaded and the compiled rule's copy),
//! its compiled form, the set's bookkeeping, the names it repeats, and what
//! it allocates or may allocate later: a flow rule's own window with every
//! bucket contended, a hot-parameter rule's table at full capacity, the
//! lists. The figures are upper estimates, not measurements: they are
//! meant to be at or above what the rule takes at worst.

use std::mem::size_of;

/// The most a rule may take, and the field most of it comes from (named
/// when the rule is the one that takes a load past the budget).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Footprint {
    /// Bytes, at most.
    pub(crate) bytes: u64,
    /// The field responsible for most of them: `rule` when none is.
    pub(crate) field: &'static str,
}

impl Footprint {
    /// The figure of a rule of type `R` compiled as `C`, with nothing else:
    /// the list's copy and the compiled rule's shared copy of `R`, the
    /// compiled rule in its `Arc`, and the set's per-rule bookkeeping.
    pub(crate) fn of_rule<R, C>() -> Self {
        Footprint {
            bytes: (2 * size_of::<R>() + size_of::<C>() + 2 * ARC_HEADER) as u64 + PER_RULE,
            field: "rule",
        }
    }

    /// Adds the bytes of a name that the set keeps four times (the list's
    /// rule, the compiled rule's copy, the per-resource map's key, the
    /// set's index).
    pub(crate) fn name(mut self, name: &str) -> Self {
        self.bytes = self.bytes.saturating_add(4 * name.len() as u64);
        self
    }

    /// Adds `bytes` due to `field`, which is named if it is now the larger
    /// part.
    pub(crate) fn part(mut self, field: &'static str, bytes: u64) -> Self {
        if bytes > self.bytes {
            self.field = field;
        }
        self.bytes = self.bytes.saturating_add(bytes);
        self
    }
}

/// An `Arc`'s two counts.
const ARC_HEADER: usize = 2 * size_of::<usize>();

/// The set's bookkeeping per rule, generously: the entries of the
/// per-resource map and the per-resource slices of the set in force (a
/// pointer each, the map's and the index's slots and headers), and the
/// allocator's rounding of the rule's allocations.
const PER_RULE: u64 = 256;

/// The bytes of a `String` a rule keeps once: its header and its text.
pub(crate) fn string_bytes(text: &str) -> u64 {
    (size_of::<String>() + text.len()) as u64
}
