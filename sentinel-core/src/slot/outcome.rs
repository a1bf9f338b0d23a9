//! `Outcome`: what the checks decided for an entry that passes them.

/// What the checks decided for an entry that may pass, in one word so
/// that it travels in a register: the wait in nanoseconds above six flag bits (the
/// [`Reserved`](crate::flow::Reserved) nodes, [`WINDOWS`](Self::WINDOWS),
/// [`BREAKERS`](Self::BREAKERS) and [`LEASED`](Self::LEASED)). It is the outcome of every check, flow's
/// and the others'.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Outcome(u64);

impl Outcome {
    const FLAGS: u32 = 6;
    const RESERVED: u64 = 0b0_0111;
    /// A rule of the resource keeps a window of its own, to count the entry
    /// in once admitted.
    const WINDOWS: u64 = 0b0_1000;
    /// The resource has circuit breakers, to hear of the entry's exit.
    const BREAKERS: u64 = 0b1_0000;
    /// The entry spent permits of reject rules' quotas, to give back if a
    /// later check refuses it.
    const LEASED: u64 = 0b10_0000;
    const ALL_FLAGS: u64 = (1 << Self::FLAGS) - 1;

    /// How long the entry must wait before it passes (rate limiters).
    #[inline]
    pub(crate) fn wait_ns(self) -> u64 {
        self.0 >> Self::FLAGS
    }

    /// Nodes whose exact concurrency this entry holds (see [`Reserved`](crate::flow::Reserved)).
    #[inline]
    pub(crate) fn reserved(self) -> u8 {
        (self.0 & Self::RESERVED) as u8
    }

    /// Whether a rule of the resource keeps a window of its own.
    #[inline]
    pub(crate) fn windows(self) -> bool {
        self.0 & Self::WINDOWS != 0
    }

    /// Marks that a rule keeps a window of its own: rules with windows of
    /// their own count the entry once it is admitted (every later check
    /// passed, any queue waited): see `count_windows`.
    pub(crate) fn with_windows(self) -> Self {
        Outcome(self.0 | Self::WINDOWS)
    }

    /// Whether the resource has circuit breakers.
    #[inline]
    pub(crate) fn breakers(self) -> bool {
        self.0 & Self::BREAKERS != 0
    }

    /// Marks that the resource has circuit breakers.
    pub(crate) fn with_breakers(self) -> Self {
        Outcome(self.0 | Self::BREAKERS)
    }

    /// This outcome and `other`'s: the longer wait, every flag.
    pub(crate) fn merge(self, other: Outcome) -> Self {
        let wait = self.wait_ns().max(other.wait_ns());
        Outcome(wait << Self::FLAGS | ((self.0 | other.0) & Self::ALL_FLAGS))
    }

    /// Whether the entry spent permits of reject rules' quotas.
    #[inline]
    pub(crate) fn leased(self) -> bool {
        self.0 & Self::LEASED != 0
    }

    /// Marks that the entry spent a quota's permits.
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
