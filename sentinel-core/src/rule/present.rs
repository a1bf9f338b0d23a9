//! `Kinds`: a set of rule kinds, a bit each at the kind's position in
//! the list of kinds (`crate::kinds`). A resource's compiled rules mark
//! the kinds it has rules of; an entry's outcome, the kinds whose exit
//! hook hears its exit. Read once per entry, the set spares the chain a
//! look at each kind the entry has nothing to do with.

/// A set of rule kinds, a bit each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Kinds(u8);

impl Kinds {
    /// No kind.
    pub(crate) const NONE: Kinds = Kinds(0);

    /// The most kinds a set holds.
    pub(crate) const CAPACITY: usize = u8::BITS as usize;

    /// The kind at `position` in the list alone.
    pub(crate) const fn at(position: u32) -> Kinds {
        assert!(
            position < Self::CAPACITY as u32,
            "a set of kinds has a bit for each kind"
        );
        Kinds(1 << position)
    }

    /// Whether every kind of `other` is in the set.
    #[inline(always)]
    pub(crate) fn contains(self, other: Kinds) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether the set has no kind after `kind` (in the list's order).
    #[inline(always)]
    pub(crate) fn none_after(self, kind: Kinds) -> bool {
        self.0 & !(kind.0 | kind.0.wrapping_sub(1)) == 0
    }

    /// Whether the set is empty.
    #[inline(always)]
    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The kinds of both sets.
    #[inline(always)]
    pub(crate) const fn with(self, other: Kinds) -> Kinds {
        Kinds(self.0 | other.0)
    }

    /// The set if `keep`, else no kind.
    #[inline(always)]
    pub(crate) const fn when(self, keep: bool) -> Kinds {
        Kinds(self.0 & (keep as u8).wrapping_neg())
    }

    /// The set's bits, a kind's at its position.
    #[inline(always)]
    pub(crate) const fn bits(self) -> u8 {
        self.0
    }
}

/// A kind's bit among [`Kinds`]: its position in the list of kinds, given
/// to every kind of the list where the list is made into code
/// (`rules/list.rs`), so that a kind's slot names its own bit without
/// knowing the list.
pub(crate) trait KindBit {
    /// The kind alone.
    const KIND: Kinds;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_holds_the_kinds_put_in_it_and_no_other() {
        let set = Kinds::at(0).with(Kinds::at(4));
        assert!(set.contains(Kinds::at(0)) && set.contains(Kinds::at(4)));
        assert!(!set.contains(Kinds::at(1)) && !set.contains(Kinds::at(5)));
        assert_eq!(set.when(true), set);
        assert!(set.when(false).is_empty());
        assert!(Kinds::NONE.is_empty() && !set.is_empty());
    }

    #[test]
    fn none_after_a_kind_looks_at_the_later_kinds_only() {
        let set = Kinds::at(0).with(Kinds::at(4));
        assert!(!set.none_after(Kinds::at(0)));
        assert!(!set.none_after(Kinds::at(3)));
        assert!(set.none_after(Kinds::at(4)));
        assert!(set.none_after(Kinds::at(6)));
        let last = Kinds::at(Kinds::CAPACITY as u32 - 1);
        assert!(last.none_after(last));
        assert!(!last.none_after(Kinds::at(0)));
    }
}
