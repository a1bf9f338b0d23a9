//! `Outcome`: what the checks decided for an entry that passes them.

use crate::rule::present::Kinds;

/// What the checks decided for an entry that may pass, in one word so
/// that it travels in a register: the wait in nanoseconds above fourteen
/// flag bits (the nodes whose exact concurrency is reserved,
/// [`ADMISSION`](Self::ADMISSION), [`EXIT`](Self::EXIT),
/// [`LEASED`](Self::LEASED), and the kinds whose exit hook hears the
/// entry's exit, a bit each from [`EXITS`](Self::EXITS)). It is the
/// outcome of every check.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome(u64);

impl Outcome {
    const FLAGS: u32 = Self::EXITS + Kinds::CAPACITY as u32;
    const RESERVED: u64 = 0b00_0111;
    /// A check asks to hear of the entry's admission (a rule counting it in
    /// a window of its own once admitted).
    const ADMISSION: u64 = 0b00_1000;
    /// A check of some kind asks to hear of the entry's exit (a breaker
    /// fed with its response time): its kind's bit says which.
    const EXIT: u64 = 0b01_0000;
    /// The entry spent permits that a check gives back if a later check
    /// refuses it, or its wait is cancelled.
    const LEASED: u64 = 0b10_0000;
    /// Where the kinds that ask to hear of the entry's exit have their
    /// bits, a kind's at its position.
    const EXITS: u32 = 6;
    const ALL_FLAGS: u64 = (1 << Self::FLAGS) - 1;

    /// How long the entry must wait before it passes (rate limiters).
    #[inline]
    pub(crate) fn wait_ns(self) -> u64 {
        self.0 >> Self::FLAGS
    }

    /// Nodes whose exact concurrency this entry holds (a bit each).
    #[inline]
    pub(crate) fn reserved(self) -> u8 {
        (self.0 & Self::RESERVED) as u8
    }

    /// Whether a check asks to hear of the entry's admission.
    #[inline]
    pub(crate) fn hears_admission(self) -> bool {
        self.0 & Self::ADMISSION != 0
    }

    /// Asks to hear of the entry's admission (every later check passed,
    /// any queue waited): the slots' `admitted` hooks run then.
    pub(crate) fn hear_admission(self) -> Self {
        Outcome(self.0 | Self::ADMISSION)
    }

    /// Whether a check of one of `kinds` asked to hear of the entry's exit.
    #[inline(always)]
    pub(crate) fn hears_exit(self, kinds: Kinds) -> bool {
        self.0 & u64::from(kinds.bits()) << Self::EXITS != 0
    }

    /// Whether an exit hook has work for the entry: a check asked to hear
    /// of its exit, or it holds reserved concurrency.
    #[inline]
    pub(crate) fn exit_has_work(self) -> bool {
        self.0 & (Self::EXIT | Self::RESERVED) != 0
    }

    /// Asks, for the checks of `kinds`, to hear of the entry's exit with
    /// what their rules in force then.
    #[inline(always)]
    pub(crate) fn hear_exit(self, kinds: Kinds) -> Self {
        Outcome(self.0 | Self::EXIT | u64::from(kinds.bits()) << Self::EXITS)
    }

    /// This outcome and `other`'s: the longer wait, every flag.
    pub(crate) fn merge(self, other: Outcome) -> Self {
        let wait = self.wait_ns().max(other.wait_ns());
        Outcome(wait << Self::FLAGS | ((self.0 | other.0) & Self::ALL_FLAGS))
    }

    /// Whether the entry spent permits to give back if it is not admitted.
    #[inline]
    pub(crate) fn leased(self) -> bool {
        self.0 & Self::LEASED != 0
    }

    /// Marks that the entry spent permits to give back if not admitted.
    #[inline]
    pub(crate) fn lease(&mut self) {
        self.0 |= Self::LEASED;
    }

    /// Waits at least `ns` (capped at 2^50 ns, 13 days: far above the
    /// longest queueing time a rule may set).
    pub(crate) fn wait_at_least(&mut self, ns: u64) {
        let ns = ns.min(u64::MAX >> Self::FLAGS);
        if ns > self.wait_ns() {
            self.0 = ns << Self::FLAGS | (self.0 & Self::ALL_FLAGS);
        }
    }

    pub(crate) fn reserve(&mut self, bit: u8) {
        self.0 |= u64::from(bit) & Self::RESERVED;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry whose breaker asked to hear of its exit is heard by the
    /// breakers' kind alone: no other kind's exit hook runs for it.
    #[test]
    fn an_exit_asked_for_by_one_kind_is_heard_by_that_kind_alone() {
        let (degrade, adaptive) = (Kinds::at(4), Kinds::at(5));
        let outcome = Outcome::default().hear_exit(degrade);
        assert!(outcome.exit_has_work());
        assert!(outcome.hears_exit(degrade));
        assert!(!outcome.hears_exit(adaptive));
        let both = outcome.merge(Outcome::default().hear_exit(adaptive));
        assert!(both.hears_exit(degrade) && both.hears_exit(adaptive));
        assert!(!Outcome::default().exit_has_work());
    }

    /// The wait keeps every flag, and the flags keep the wait.
    #[test]
    fn the_wait_and_the_exit_bits_do_not_overlap() {
        let adaptive = Kinds::at(Kinds::CAPACITY as u32 - 1);
        let mut outcome = Outcome::default().hear_exit(adaptive);
        outcome.lease();
        outcome.wait_at_least(u64::MAX);
        assert_eq!(outcome.wait_ns(), u64::MAX >> Outcome::FLAGS);
        assert!(outcome.hears_exit(adaptive) && outcome.leased());
        assert_eq!(outcome.reserved(), 0);
        assert!(!outcome.hears_admission());
        // The longest queueing time a rule may set fits whole.
        let hour_ns = 3_600_000 * 1_000_000;
        let mut outcome = Outcome::default();
        outcome.wait_at_least(hour_ns);
        assert_eq!(outcome.wait_ns(), hour_ns);
    }
}
