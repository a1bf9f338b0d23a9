//! The slot contract: what each rule kind's check implements (`RuleSlot`),
//! what it reads and decides (`Checking`, `Verdict`), and what it hears
//! at the exit (`Exiting`). It names no kind: each kind's slot lives in
//! the kind's folder (`flow/slot.rs`, ...), and the chain composes them
//! from the list of kinds (`rule_chain.rs`).
//!
//! The rule slots are types without values, called through a trait with
//! associated functions: every call is static and inlined, so the chain
//! compiles to the straight-line code one would write by hand, and a
//! resource without rules of a kind pays one branch for it.

use std::sync::Arc;

use crate::engine::parts::Parts;
use crate::node::ResourceNode;
use crate::rule::present::Kinds;
use crate::{BlockError, BlockKind, Rule};

use super::placement::Placement;
use super::user::UserSlots;
use super::{EntryContext, Holds, Outcome};

/// A refusal; its reason is left in the [`Verdict`].
#[derive(Debug)]
pub(crate) struct Refused;

/// One rule kind's check in the chain: one shape for every kind. It is
/// called only when its kind has something to check for the entry
/// (`rules`: the resource's rules of the kind, or the whole kind's for a
/// kind over every entry).
pub(crate) trait RuleSlot {
    /// What the check reads.
    type Rules: ?Sized;

    /// Where the slot runs (see [`order`](super::order)); user slots of a
    /// smaller order run before it.
    const ORDER: i32;

    /// Checks the entry. A refusal leaves its reason in `c.verdict`, for
    /// the statistic slot to count.
    fn check(rules: &Self::Rules, c: &mut Checking<'_, '_>) -> Result<(), Refused>;

    /// Gives back what [`check`](Self::check) took from an entry that a
    /// later slot refused, or that unwound from a later slot's panic. It
    /// reads what was taken from `c.outcome`, so it does nothing for a slot
    /// that took nothing.
    #[inline(always)]
    fn undo(rules: &Self::Rules, c: &mut Checking<'_, '_>) {
        let _ = (rules, c);
    }

    /// Hears the admission of an entry whose outcome asks for it
    /// ([`Outcome::hear_admission`]): every check passed, any queue was
    /// waited. `in_force` finds the kind's rules in force, if it asks.
    #[inline(always)]
    fn admitted(ctx: &EntryContext<'_>, in_force: impl InForce<Self::Rules>) {
        let _ = (ctx, in_force);
    }

    /// Gives back what the check took from an entry that passed every
    /// check but will never be admitted (its wait in a queue was
    /// cancelled).
    #[cfg(feature = "tokio")]
    #[inline(always)]
    fn unadmitted(entry: &Abandoned<'_>, in_force: impl InForce<Self::Rules>) {
        let _ = (entry, in_force);
    }

    /// Whether [`exit`](Self::exit) has work for an entry that passed the
    /// whole chain with `outcome` (its check asked to hear of the exit,
    /// [`Checking::hear_exit`], or it reserved concurrency); the chain calls
    /// the hook for no other entry. A slot without an exit hook keeps the
    /// default, and its kind costs nothing at the exit.
    #[inline(always)]
    fn hears_exit(outcome: Outcome) -> bool {
        let _ = outcome;
        false
    }

    /// Hears the exit of an entry for which
    /// [`hears_exit`](Self::hears_exit) holds. The chain calls it out of
    /// line, apart from the other kinds' hooks.
    #[inline(always)]
    fn exit(x: &Exiting<'_, '_>, in_force: impl InForce<Self::Rules>) {
        let _ = (x, in_force);
    }
}

/// Where a hook finds its kind's rules in force for an entry's resource
/// (in the set in force now), only when it asks.
pub(crate) trait InForce<T: ?Sized>: Copy {
    /// Calls `f` with the kind's rules for `resource` (an `inbound` entry
    /// or not), if it has any.
    fn with(&self, resource: &ResourceNode, inbound: bool, f: impl FnOnce(&T));
}

/// An entry that passed its checks and will not be admitted, with what the
/// checks decided for it.
#[cfg(feature = "tokio")]
pub(crate) struct Abandoned<'a> {
    pub(crate) node: &'a ResourceNode,
    pub(crate) resource: &'a crate::node::StatisticNode,
    pub(crate) origin: Option<&'a crate::node::StatisticNode>,
    pub(crate) context: Option<&'a crate::node::StatisticNode>,
    pub(crate) outcome: Outcome,
    pub(crate) batch: u32,
    pub(crate) pass_ms: u64,
}

/// An entry on its way through the rule slots: what they read, and what
/// they decide.
pub(crate) struct Checking<'c, 'a> {
    pub(crate) ctx: &'c EntryContext<'a>,
    /// The application's slots, run among the checks by order.
    pub(crate) slots: &'c UserSlots,
    /// What the slots passed so far decided (waits, reservations, flags).
    pub(crate) outcome: Outcome,
    pub(crate) verdict: &'c mut Verdict,
}

impl Checking<'_, '_> {
    /// Runs the user slots placed at position `at` (before the `at`-th
    /// rule slot; after the last one for the last position).
    #[inline(always)]
    pub(crate) fn user_slots(&mut self, at: usize) -> Result<(), Refused> {
        let ctx = self.ctx;
        let Some(slots) = self.slots.checks.get(at) else {
            return Ok(());
        };
        for slot in slots.iter() {
            if let Err(block) = slot.entry(ctx) {
                return self.refuse_with(block, false);
            }
        }
        Ok(())
    }

    /// Asks to hear of the entry's exit in the exit hook of `kind` (the
    /// asking slot's, [`KindBit::KIND`](crate::rule::present::KindBit::KIND)),
    /// with its rules in force then.
    #[inline(always)]
    pub(crate) fn hear_exit(&mut self, kind: Kinds) {
        self.outcome = self.outcome.hear_exit(kind);
    }

    /// Refuses by `rule` of `kind` (a rule of the resource).
    #[inline(always)]
    pub(crate) fn refuse(&mut self, kind: BlockKind, rule: Arc<dyn Rule>) -> Result<(), Refused> {
        self.verdict.rule = Some((kind, rule));
        Err(Refused)
    }

    /// Refuses with a block made whole by the check (a user slot's, a
    /// system limit's), counted apart from the kind's other rules when
    /// `by_rule` (see [`Verdict::block_by_rule`]).
    #[cold]
    pub(crate) fn refuse_with(&mut self, block: BlockError, by_rule: bool) -> Result<(), Refused> {
        self.verdict.block = Some(block);
        self.verdict.block_by_rule = by_rule;
        Err(Refused)
    }
}

/// What the checks leave beside their outcome: why they refused an entry (a
/// rule of the resource, or a block made whole by its check: a user slot's,
/// a system limit's), or what an entry they let through holds.
#[derive(Default)]
pub(crate) struct Verdict {
    pub(crate) rule: Option<(BlockKind, Arc<dyn Rule>)>,
    pub(crate) block: Option<BlockError>,
    /// `block` is counted by its rule, apart from the kind's other rules
    /// (a built-in rule, whose reference lives as long as the rule); a
    /// user slot's blocks are counted per kind, as it may make a rule per
    /// block.
    pub(crate) block_by_rule: bool,
    pub(crate) holds: Holds,
    /// Where a passing entry is counted, if later than its clock reading:
    /// the start of a reject rule's bucket that began after it (0: none).
    pub(crate) pass_ms: u64,
}

impl Verdict {
    /// The error of a refused entry.
    #[inline]
    pub(crate) fn take_error(&mut self) -> BlockError {
        match (self.rule.take(), self.block.take()) {
            (Some((kind, rule)), _) => BlockError::by_rule(kind, rule),
            (None, Some(block)) => block,
            (None, None) => unreachable!("a refused entry has its reason"),
        }
    }
}

/// An entry that passed, exiting.
pub(crate) struct Exiting<'e, 's> {
    pub(crate) parts: &'s Parts,
    /// Where the entry ran and what it holds.
    pub(crate) placement: &'e Placement<'s>,
    pub(crate) now: u64,
    pub(crate) rt: u64,
    /// An error was recorded, or the entry exits as its thread unwinds.
    pub(crate) error: bool,
    /// The entry exits as its thread unwinds from a panic: the call did
    /// not complete, so a half-open probe it holds failed.
    pub(crate) panicked: bool,
}
