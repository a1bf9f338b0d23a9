//! The rules of an instance, every kind together, swapped as one.
//!
//! Imports go one way: this folder composes the rule kinds (`flow/`,
//! `degrade/`, `param_flow/`, `authority/`, `system/`) from the list of
//! kinds (`crate::kinds`), through what each kind gives (its `RuleKind`);
//! a kind knows only its own rule, its compiled form, its slot and the
//! small shared layers below both (`crate::rule`: `Rule`, `RuleKind`,
//! `CompiledRule`, `KindSet`, the names a rule mentions, `Problems`; the
//! slot base in `crate::slot`). Within the folder, too, no two modules
//! need each other:
//!
//! ```text
//! file                 holds                                          needs, in rules/
//! listeners.rs         Listeners of one kind, AllListeners (listed)   -
//! list.rs              RuleSetParts, ResourceRules, Listed, each_kind listeners
//! set.rs               RuleSet: the set in force, its index           list
//! view.rs              View, Found: a kind's rules for an entry       list, set
//! kinds.rs             Kind: a manager's descriptor of any kind       list, set, listeners
//! book.rs              RuleBook (listed): every kind in one swap      list, kinds, set, budget
//! budget.rs            Tally: the rule memory budget's sum            list, kinds, set
//! names.rs             the names rules mention, for the caps          -
//! user_kind.rs         UserKind, UserKindRules: an application's kinds -
//! ```
//!
//! The instance's side (the rule set in force and its per-thread cache,
//! the managers, rule loads) is in `crate::engine` and `crate::sentinel`.

mod book;
pub(crate) mod budget;
pub(crate) mod kinds;
pub(crate) mod list;
mod listeners;
pub(crate) mod names;
mod set;
mod user_kind;
pub(crate) mod view;

pub use crate::rule::Listener;
pub use book::RuleBook;
pub(crate) use list::RuleSetParts;
pub(crate) use listeners::AllListeners;
pub(crate) use set::RuleSet;
pub(crate) use user_kind::UserKindSlot;
pub use user_kind::{UserKind, UserKindRules};
