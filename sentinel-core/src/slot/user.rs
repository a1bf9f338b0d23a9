//! User slots: the [`Slot`] trait, and the user slots of an instance
//! split by where they run among the built-in slots.

use std::fmt;
use std::sync::Arc;

use super::{EntryContext, ExitContext, order};
use crate::BlockError;

/// A step of the chain that a user adds with
/// [`SentinelBuilder::slot`](crate::SentinelBuilder::slot).
///
/// ```
/// use sentinel_flow_core::slot::{EntryContext, Slot};
/// use sentinel_flow_core::{BlockError, BlockKind, ManualClock, Sentinel};
///
/// /// Refuses callers without an origin.
/// #[derive(Debug)]
/// struct RequireOrigin;
///
/// impl Slot for RequireOrigin {
///     fn order(&self) -> i32 {
///         sentinel_flow_core::slot::order::AUTHORITY + 1
///     }
///     fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
///         if ctx.origin().is_empty() {
///             return Err(ctx.block(BlockKind::Custom("no_origin")));
///         }
///         Ok(())
///     }
/// }
///
/// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).slot(RequireOrigin).build();
/// let err = sentinel.entry("res").unwrap_err();
/// assert_eq!(err.kind(), BlockKind::Custom("no_origin"));
/// assert!(sentinel.entry_builder("res").origin("app").enter().is_ok());
/// ```
pub trait Slot: fmt::Debug + Send + Sync + 'static {
    /// Where the slot runs: see [`order`].
    fn order(&self) -> i32;

    /// Checks an entry; an `Err` refuses it and no later check runs.
    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError>;

    /// Sees an entry that passed complete. Runs after the statistic slot
    /// recorded it.
    fn exit(&self, ctx: &ExitContext<'_>) {
        let _ = ctx;
    }
}

/// Positions among the rule slots: before each, and after the last.
const POSITIONS: usize = KIND_COUNT + 1;

/// Counts the list of kinds.
macro_rules! kind_count {
    ($($field:ident $variant:ident [$($kind:tt)*] [$($rule:tt)*] $accessor:ident $name:literal $exception:literal
        $doc:literal $book_doc:literal;)*) => {
        /// How many rule slots the chain has.
        const KIND_COUNT: usize = [$($name),*].len();
    };
}
rule_kinds!(kind_count);

/// The user slots of an instance, split by where they run.
#[derive(Clone, Default)]
pub(crate) struct UserSlots {
    /// Before counting (order below `STATISTIC`).
    pub(crate) before_statistic: Box<[Arc<dyn Slot>]>,
    /// `checks[i]` run just before the `i`-th rule slot of the
    /// [`RuleChain`]; the last, after the last rule slot.
    pub(crate) checks: [Box<[Arc<dyn Slot>]>; POSITIONS],
    /// Every user slot, in order, for exits.
    pub(crate) all: Box<[Arc<dyn Slot>]>,
}

impl UserSlots {
    /// `slots` placed among rule slots of `orders` (the chain's, in chain
    /// order).
    pub(crate) fn new(mut slots: Vec<Arc<dyn Slot>>, orders: &[i32]) -> Self {
        debug_assert_eq!(orders.len() + 1, POSITIONS, "one order per rule slot");
        // Stable: slots of equal order keep the order they were added in.
        slots.sort_by_key(|slot| slot.order());
        let before_statistic = slots
            .iter()
            .filter(|s| s.order() < order::STATISTIC)
            .cloned()
            .collect();
        let checks = std::array::from_fn(|i| {
            let low = if i == 0 {
                order::STATISTIC
            } else {
                orders[i - 1]
            };
            let high = orders.get(i).copied().unwrap_or(i32::MAX);
            let last = i == POSITIONS - 1;
            slots
                .iter()
                .filter(|s| (low..high).contains(&s.order()) || (last && s.order() == i32::MAX))
                .cloned()
                .collect()
        });
        UserSlots {
            before_statistic,
            checks,
            all: slots.into(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.all.is_empty()
    }
}

impl fmt::Debug for UserSlots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.all.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct At(i32);

    impl Slot for At {
        fn order(&self) -> i32 {
            self.0
        }
        fn entry(&self, _: &EntryContext<'_>) -> Result<(), BlockError> {
            Ok(())
        }
    }

    #[test]
    fn user_slots_land_between_the_built_in_checks() {
        let orders = [
            i32::MIN,
            order::STATISTIC - 1,
            order::STATISTIC,
            order::AUTHORITY,
            order::FLOW - 1,
            order::DEGRADE + 1,
            i32::MAX,
        ];
        let chain = UserSlots::new(
            orders.iter().map(|&o| Arc::new(At(o)) as _).collect(),
            &[
                order::AUTHORITY,
                order::SYSTEM,
                order::PARAM_FLOW,
                order::FLOW,
                order::DEGRADE,
                order::ADAPTIVE,
                order::GATEWAY,
                order::API_DEFINITIONS,
            ],
        );
        let of = |slots: &[Arc<dyn Slot>]| slots.iter().map(|s| s.order()).collect::<Vec<_>>();
        assert_eq!(
            of(&chain.before_statistic),
            [i32::MIN, order::STATISTIC - 1]
        );
        assert_eq!(of(&chain.checks[0]), [order::STATISTIC]);
        assert_eq!(of(&chain.checks[1]), [order::AUTHORITY]);
        assert_eq!(of(&chain.checks[2]), Vec::<i32>::new());
        assert_eq!(of(&chain.checks[3]), [order::FLOW - 1]);
        assert_eq!(of(&chain.checks[4]), Vec::<i32>::new());
        assert_eq!(of(&chain.checks[5]), [order::DEGRADE + 1]);
        assert_eq!(of(&chain.checks[6]), Vec::<i32>::new());
        assert_eq!(of(&chain.checks[7]), Vec::<i32>::new());
        assert_eq!(of(&chain.checks[8]), [i32::MAX]);
        assert_eq!(chain.all.len(), orders.len());
    }
}
