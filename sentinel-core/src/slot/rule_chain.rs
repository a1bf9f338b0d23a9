//! The rule checks of the chain, composed at compile time from the list of
//! kinds (`crate::kinds`): a nested type, `Then<Authority, Then<System, …
//! End>>`. [`RuleChecks::check`] runs the user slots placed before each
//! kind's slot, then the slot (when the kind has something to check for
//! the entry: its bit in the kinds present), then the rest (without user
//! slots, none after the last kind present); when the rest refuses, each
//! slot that passed gives back what it took, latest first.

use std::marker::PhantomData;

use super::EntryContext;
use super::placement::Placement;
#[cfg(feature = "tokio")]
use super::rule_slot::Abandoned;
use super::rule_slot::{Checking, Exiting, Refused, RuleSlot};
use crate::engine::Engine;
use crate::engine::rules::InstanceRules;
use crate::rules::list::Listed;
use crate::rules::view::{Found, View};

/// Rule slots in a row.
pub(crate) trait RuleChecks {
    /// Runs the slots from position `at` on, each after the user slots
    /// placed before it (`USER`: the instance has user slots; without,
    /// no position is looked at); the first refusal wins, and the slots
    /// that passed give back what they took.
    fn check<const USER: bool>(
        v: &View<'_>,
        c: &mut Checking<'_, '_>,
        at: usize,
    ) -> Result<(), Refused>;

    /// Gives back what every slot took (each slot's
    /// [`undo`](RuleSlot::undo), latest first), for an entry whose checks
    /// unwound from a panic.
    fn undo_all(v: &View<'_>, c: &mut Checking<'_, '_>);

    /// Tells every slot of an admission, in chain order (`rules`: the
    /// rules in force, where a slot that asks finds its kind's).
    fn admitted(ctx: &EntryContext<'_>, rules: &InstanceRules);

    /// Tells every slot that a checked entry will not be admitted.
    #[cfg(feature = "tokio")]
    fn unadmitted(entry: &Abandoned<'_>, rules: &InstanceRules);

    /// Tells every slot that has work for the exit of an entry (its
    /// [`hears_exit`](RuleSlot::hears_exit)) of it, in chain order: the
    /// entry at `placement` exits at `now` after `rt` ms, with an error
    /// or not, as its thread unwinds from a panic or not.
    fn exit(
        engine: &Engine,
        placement: &Placement<'_>,
        now: u64,
        rt: u64,
        error: bool,
        panicked: bool,
    );

    /// The slots' orders, in chain order.
    fn orders(into: &mut Vec<i32>);
}

/// Kind `K`'s slot, then the slots `R`.
pub(crate) struct Then<K, R>(PhantomData<fn() -> (K, R)>);

/// The end of the rule slots: the user slots placed after the last.
pub(crate) struct End;

impl<K: Listed, R: RuleChecks> RuleChecks for Then<K, R> {
    #[inline(always)]
    fn check<const USER: bool>(
        v: &View<'_>,
        c: &mut Checking<'_, '_>,
        at: usize,
    ) -> Result<(), Refused> {
        if USER {
            c.user_slots(at)?;
        }
        let Some(rules) = v.select::<K>() else {
            return R::check::<USER>(v, c, at + 1);
        };
        K::Slot::check(rules, c)?;
        if !USER && v.present.none_after(K::KIND) {
            // No kind after this one has rules for the entry.
            return Ok(());
        }
        if let Err(refused) = R::check::<USER>(v, c, at + 1) {
            K::Slot::undo(rules, c);
            return Err(refused);
        }
        Ok(())
    }

    fn undo_all(v: &View<'_>, c: &mut Checking<'_, '_>) {
        R::undo_all(v, c);
        if let Some(rules) = v.select::<K>() {
            K::Slot::undo(rules, c);
        }
    }

    #[inline(always)]
    fn admitted(ctx: &EntryContext<'_>, rules: &InstanceRules) {
        K::Slot::admitted(ctx, Found::<K>::new(rules));
        R::admitted(ctx, rules);
    }

    #[cfg(feature = "tokio")]
    fn unadmitted(entry: &Abandoned<'_>, rules: &InstanceRules) {
        K::Slot::unadmitted(entry, Found::<K>::new(rules));
        R::unadmitted(entry, rules);
    }

    #[inline(always)]
    fn exit(
        engine: &Engine,
        placement: &Placement<'_>,
        now: u64,
        rt: u64,
        error: bool,
        panicked: bool,
    ) {
        if K::Slot::hears_exit(placement.outcome) {
            exit_hook::<K>(engine, placement, now, rt, error, panicked);
        }
        R::exit(engine, placement, now, rt, error, panicked);
    }

    fn orders(into: &mut Vec<i32>) {
        into.push(K::Slot::ORDER);
        R::orders(into);
    }
}

/// Kind `K`'s exit hook, out of line: an entry's exit calls the hooks of
/// the kinds that asked for it, each a call of its own, and the code of
/// the others is never reached.
#[inline(never)]
fn exit_hook<K: Listed>(
    engine: &Engine,
    placement: &Placement<'_>,
    now: u64,
    rt: u64,
    error: bool,
    panicked: bool,
) {
    let x = Exiting {
        parts: &engine.parts,
        placement,
        now,
        rt,
        error,
        panicked,
    };
    K::Slot::exit(&x, Found::<K>::new(&engine.rules));
}

impl RuleChecks for End {
    #[inline(always)]
    fn check<const USER: bool>(
        _: &View<'_>,
        c: &mut Checking<'_, '_>,
        at: usize,
    ) -> Result<(), Refused> {
        if USER { c.user_slots(at) } else { Ok(()) }
    }

    fn undo_all(_: &View<'_>, _: &mut Checking<'_, '_>) {}

    #[inline(always)]
    fn admitted(_: &EntryContext<'_>, _: &InstanceRules) {}

    #[cfg(feature = "tokio")]
    fn unadmitted(_: &Abandoned<'_>, _: &InstanceRules) {}

    #[inline(always)]
    fn exit(_: &Engine, _: &Placement<'_>, _: u64, _: u64, _: bool, _: bool) {}

    fn orders(_: &mut Vec<i32>) {}
}

/// Makes the chain's type from the list of kinds.
macro_rules! rule_chain {
    ($($field:ident $variant:ident [$($kind:tt)*] [$($rule:tt)*] $accessor:ident $name:literal $exception:literal
        $doc:literal $book_doc:literal;)*) => {
        /// The rule checks, in the order of the list of kinds (Sentinel's).
        pub(crate) type RuleChain = rule_chain!(@nest $(crate::$($kind)*,)*);
    };
    (@nest) => { End };
    (@nest $first:path, $($rest:path,)*) => { Then<$first, rule_chain!(@nest $($rest,)*)> };
}
rule_kinds!(rule_chain);

#[cfg(test)]
mod tests {
    use super::super::order;
    use super::*;

    #[test]
    fn the_rule_slots_run_in_sentinels_order() {
        let mut orders = Vec::new();
        RuleChain::orders(&mut orders);
        assert_eq!(
            orders,
            [
                order::AUTHORITY,
                order::SYSTEM,
                order::PARAM_FLOW,
                order::FLOW,
                order::DEGRADE,
                order::ADAPTIVE,
                order::GATEWAY,
                order::API_DEFINITIONS
            ]
        );
        assert!(orders.is_sorted(), "a slot of smaller order runs first");
        assert!(order::STATISTIC < orders[0]);
    }
}
