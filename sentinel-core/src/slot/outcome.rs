//! `Outcome`: what the checks decided for an entry that passes them.

/// What the checks decided for an entry that may pass, in one word so
/// that it travels in a register: the wait in nanoseconds above six flag
/// bits (the nodes whose exact concurrency is reserved,
/// [`ADMISSION`](Self::ADMISSION), [`EXIT`](Self::EXIT) and
/// [`LEASED`](Self::LEASED)). It is the outcome of every check.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome(u64);

impl Outcome {
    const FLAGS: u32 = 6;
    const RESERVED: u64 = 0b0_0111;
    /// A check asks to hear of the entry's admission (a rule counting it in
    /// a window of its own once admitted).
    const ADMISSION: u64 = 0b0_1000;
    /// A check asks to hear of the entry's exit (a breaker fed with its
    /// response time).
    const EXIT: u64 = 0b1_0000;
    /// The entry spent permits that a check gives back if a later check
    /// refuses it, or its wait is cancelled.
    const LEASED: u64 = 0b10_0000;
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

    /// Whether a check asks to hear of the entry's exit.
    #[inline]
    pub(crate) fn hears_exit(self) -> bool {
        self.0 & Self::EXIT != 0
    }

    /// Whether an exit hook has work for the entry: a check asked to hear
    /// of its exit, or it holds reserved concurrency.
    #[inline]
    pub(crate) fn exit_has_work(self) -> bool {
        self.0 & (Self::EXIT | Self::RESERVED) != 0
    }

    /// Asks to hear of the entry's exit with what the slot's rules in
    /// force then (its `exit` hook reads `Placement::hears_exit`).
    pub(crate) fn hear_exit(self) -> Self {
        Outcome(self.0 | Self::EXIT)
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

    /// Waits at least `ns` (capped at 2^58 ns, 9 years).
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
