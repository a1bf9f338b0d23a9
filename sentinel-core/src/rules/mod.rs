//! The rules of an instance, every kind together, swapped as one.
//!
//! Imports go one way: this folder composes the rule kinds (`flow/`,
//! `degrade/`, `param_flow/`, `authority/`, `system/`) and knows them all; a
//! kind knows only its own rule, its compiled form and the small shared
//! layer below both (`crate::rule`: `Rule`, `CompiledRule`, the names a
//! rule mentions, `Problems`). Within the folder, too, no two modules need
//! each other:
//!
//! ```text
//! file                 holds                                         needs, in rules/
//! kind_set.rs          KindSet: one kind compiled per resource       -
//! set.rs               RuleSet, RuleSetParts, ResourceRules          kind_set
//! listeners.rs         Listeners of one kind, AllListeners           -
//! kinds.rs             Kind descriptors: FLOW, DEGRADE, PARAM, ...   set, kind_set, listeners
//! manager.rs           RuleManager: load, read, listen               kinds, budget
//! manager/degrade.rs   breakers(), on_state_change()                 manager
//! manager/param_flow.rs   tables()                                      manager
//! book.rs              RuleBook: every kind in one swap              kinds, set, budget
//! budget.rs            Tally: the rule memory budget's sum           kinds, set
//! names.rs             each kind's names, for the instance's caps    -
//! ```

mod book;
pub(crate) mod budget;
pub(crate) mod kinds;
pub(crate) mod list;
mod listeners;
mod manager;
pub(crate) mod names;
mod set;
mod user_kind;

pub use crate::rule::Listener;
pub use book::RuleBook;
pub(crate) use listeners::AllListeners;
pub use manager::RuleManager;
pub(crate) use set::{RuleSet, RuleSetParts};
pub(crate) use user_kind::UserKindSlot;
pub use user_kind::{UserKind, UserKindRules};
