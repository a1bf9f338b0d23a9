//! `RuleSlot`: what each rule check of the chain implements, and how the
//! chain composes them at compile time.
//!
//! The rule slots are types without values, called through a trait with
//! associated functions: every call is static and inlined, so the chain
//! compiles to the straight-line code one would write by hand, and a
//! resource without rules of a kind pays one branch for it. The chain is a
//! nested type, `Then<Authority, Then<System, … End>>` (written with
//! [`rule_slots!`]): [`RuleChecks::check`] runs the user slots placed
//! before each rule slot, then the slot, then the rest; when the rest
//! refuses, each slot that passed gives back what it took, latest first.

use std::marker::PhantomData;
use std::sync::Arc;

use crate::entry::Active;
use crate::rules::ResourceRules;
use crate::system::SystemLimits;
use crate::{BlockError, BlockKind, Rule, Sentinel};

use super::{EntryContext, Holds, Outcome};

/// A refusal; its reason is left in the [`Verdict`].
#[derive(Debug)]
pub(crate) struct Refused;

/// One rule check of the chain.
pub(crate) trait RuleSlot {
    /// Where the slot runs (see [`order`](super::order)); user slots of a
    /// smaller order run before it.
    const ORDER: i32;

    /// Checks the entry. A refusal leaves its reason in `c.verdict`, for
    /// the statistic slot to count.
    fn check(c: &mut Checking<'_, '_>) -> Result<(), Refused>;

    /// Gives back what [`check`](Self::check) took from an entry that a
    /// later slot refused, or that unwound from a later slot's panic. It
    /// reads what was taken from `c.outcome`, so it does nothing for a slot
    /// that took nothing, or did not run.
    #[inline(always)]
    fn undo(c: &mut Checking<'_, '_>) {
        let _ = c;
    }

    /// Hears the exit of an entry that passed the whole chain.
    #[inline(always)]
    fn exit(x: &Exiting<'_, '_>) {
        let _ = x;
    }
}

/// An entry on its way through the rule slots: what they read, and what
/// they decide.
pub(crate) struct Checking<'c, 'a> {
    pub(crate) ctx: &'c EntryContext<'a>,
    /// The rules of the entry's resource.
    pub(crate) rules: Option<&'c ResourceRules>,
    /// The system limits, for an inbound entry while any is set.
    pub(crate) system: Option<&'c SystemLimits>,
    /// What the slots passed so far decided (waits, reservations, flags).
    pub(crate) outcome: Outcome,
    pub(crate) verdict: &'c mut Verdict,
}

impl Checking<'_, '_> {
    /// Runs the user slots placed at position `at` (before the `at`-th
    /// rule slot; after the last one for the last position).
    #[inline(always)]
    fn user_slots(&mut self, at: usize) -> Result<(), Refused> {
        let ctx = self.ctx;
        match ctx.sentinel.user_slots.checks[at]
            .iter()
            .try_for_each(|slot| slot.entry(ctx))
        {
            Ok(()) => Ok(()),
            Err(block) => self.refuse_with(block, false),
        }
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
    pub(crate) sentinel: &'s Sentinel,
    pub(crate) active: &'e Active<'s>,
    pub(crate) now: u64,
    pub(crate) rt: u64,
    /// An error was recorded, or the entry exits as its thread unwinds.
    pub(crate) error: bool,
    /// The entry exits as its thread unwinds from a panic: the call did
    /// not complete, so a half-open probe it holds failed.
    pub(crate) panicked: bool,
}

/// Rule slots in a row.
pub(crate) trait RuleChecks {
    /// How many rule slots.
    const LEN: usize;

    /// Runs the slots from position `at` on, each after the user slots
    /// placed before it; the first refusal wins, and the slots that passed
    /// give back what they took.
    fn check(c: &mut Checking<'_, '_>, at: usize) -> Result<(), Refused>;

    /// Gives back what every slot took (each slot's
    /// [`undo`](RuleSlot::undo), latest first), for an entry whose checks
    /// unwound from a panic.
    fn undo_all(c: &mut Checking<'_, '_>);

    /// Tells every slot of an exit, in chain order.
    fn exit(x: &Exiting<'_, '_>);

    /// The slots' orders, in chain order.
    fn orders(into: &mut Vec<i32>);
}

/// Slot `S`, then the slots `R`.
pub(crate) struct Then<S, R>(PhantomData<fn() -> (S, R)>);

/// The end of the rule slots: the user slots placed after the last.
pub(crate) struct End;

impl<S: RuleSlot, R: RuleChecks> RuleChecks for Then<S, R> {
    const LEN: usize = R::LEN + 1;

    #[inline(always)]
    fn check(c: &mut Checking<'_, '_>, at: usize) -> Result<(), Refused> {
        c.user_slots(at)?;
        S::check(c)?;
        if let Err(refused) = R::check(c, at + 1) {
            S::undo(c);
            return Err(refused);
        }
        Ok(())
    }

    fn undo_all(c: &mut Checking<'_, '_>) {
        R::undo_all(c);
        S::undo(c);
    }

    #[inline(always)]
    fn exit(x: &Exiting<'_, '_>) {
        S::exit(x);
        R::exit(x);
    }

    fn orders(into: &mut Vec<i32>) {
        into.push(S::ORDER);
        R::orders(into);
    }
}

impl RuleChecks for End {
    const LEN: usize = 0;

    #[inline(always)]
    fn check(c: &mut Checking<'_, '_>, at: usize) -> Result<(), Refused> {
        c.user_slots(at)
    }

    fn undo_all(_: &mut Checking<'_, '_>) {}

    #[inline(always)]
    fn exit(_: &Exiting<'_, '_>) {}

    fn orders(_: &mut Vec<i32>) {}
}

/// The type of rule slots in a row: `rule_slots![A, B]` is
/// `Then<A, Then<B, End>>`.
macro_rules! rule_slots {
    () => { $crate::slot::rule_slot::End };
    ($slot:ty $(, $rest:ty)* $(,)?) => {
        $crate::slot::rule_slot::Then<$slot, rule_slots!($($rest),*)>
    };
}
pub(crate) use rule_slots;
