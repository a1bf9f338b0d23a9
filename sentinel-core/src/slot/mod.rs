//! The slot chain: what every entry goes through, in order.
//!
//! The built-in slots run in Sentinel's order ([`order`]): node selector,
//! cluster builder, statistic, then the rule checks authority, system, hot
//! parameters, flow and degrade. The statistic slot wraps the checks: it runs
//! them and counts a pass or a block by their result; the first block wins.
//!
//! A user [`Slot`] goes in by its order. Below [`order::STATISTIC`] it runs
//! after the nodes are resolved and before counting (a block there is not
//! counted, as in Sentinel); above it, it runs among the rule checks and its
//! block is counted. The built-in checks are not trait objects: a resource
//! with no rules of a kind pays nothing for that kind, and a chain without
//! user slots makes no dynamic call at all.

mod context;
mod holds;
mod outcome;

use std::fmt;
use std::sync::Arc;

pub use context::{EntryContext, ExitContext};
pub(crate) use holds::Holds;
pub(crate) use outcome::Outcome;

use crate::BlockError;

/// Orders of the built-in slots (smaller runs first), as in Sentinel.
pub mod order {
    /// Finds the entry's node in its context (the invocation tree).
    pub const NODE_SELECTOR: i32 = -10_000;
    /// Finds the resource node and the origin node.
    pub const CLUSTER_BUILDER: i32 = -9_000;
    /// Counts passes and blocks of the checks that follow it.
    pub const STATISTIC: i32 = -7_000;
    /// Origin white and black lists.
    pub const AUTHORITY: i32 = -6_000;
    /// System adaptive protection.
    pub const SYSTEM: i32 = -5_000;
    /// Hot-parameter rules.
    pub const HOT_PARAM: i32 = -3_000;
    /// Flow rules.
    pub const FLOW: i32 = -2_000;
    /// Circuit breakers.
    pub const DEGRADE: i32 = -1_000;
}

/// A step of the chain that a user adds with
/// [`SentinelBuilder::slot`](crate::SentinelBuilder::slot).
///
/// ```
/// use sentinel_core::slot::{EntryContext, Slot};
/// use sentinel_core::{BlockError, BlockKind, ManualClock, Sentinel};
///
/// /// Refuses callers without an origin.
/// #[derive(Debug)]
/// struct RequireOrigin;
///
/// impl Slot for RequireOrigin {
///     fn order(&self) -> i32 {
///         sentinel_core::slot::order::AUTHORITY + 1
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

/// The built-in rule checks, in chain order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Check {
    Authority,
    System,
    HotParam,
    Flow,
    Degrade,
}

impl Check {
    pub(crate) const ALL: [Check; 5] = [
        Check::Authority,
        Check::System,
        Check::HotParam,
        Check::Flow,
        Check::Degrade,
    ];

    fn order(self) -> i32 {
        match self {
            Check::Authority => order::AUTHORITY,
            Check::System => order::SYSTEM,
            Check::HotParam => order::HOT_PARAM,
            Check::Flow => order::FLOW,
            Check::Degrade => order::DEGRADE,
        }
    }
}

/// The user slots of an instance, split by where they run.
#[derive(Clone, Default)]
pub(crate) struct SlotChain {
    /// Before counting (order below `STATISTIC`).
    pub(crate) before_statistic: Box<[Arc<dyn Slot>]>,
    /// `checks[i]` run just before `Check::ALL[i]`; `checks[5]` after the last.
    pub(crate) checks: [Box<[Arc<dyn Slot>]>; 6],
    /// Every user slot, in order, for exits.
    pub(crate) all: Box<[Arc<dyn Slot>]>,
}

impl SlotChain {
    pub(crate) fn new(mut slots: Vec<Arc<dyn Slot>>) -> Self {
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
                Check::ALL[i - 1].order()
            };
            let high = Check::ALL.get(i).map_or(i32::MAX, |c| c.order());
            slots
                .iter()
                .filter(|s| (low..high).contains(&s.order()) || (i == 5 && s.order() == i32::MAX))
                .cloned()
                .collect()
        });
        SlotChain {
            before_statistic,
            checks,
            all: slots.into(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.all.is_empty()
    }
}

impl fmt::Debug for SlotChain {
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
        let chain = SlotChain::new(orders.iter().map(|&o| Arc::new(At(o)) as _).collect());
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
        assert_eq!(of(&chain.checks[5]), [order::DEGRADE + 1, i32::MAX]);
        assert_eq!(chain.all.len(), orders.len());
    }
}
