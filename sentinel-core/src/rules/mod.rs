//! The rules of an instance, every kind together, swapped as one.
//!
//! Imports go one way: this folder composes the rule kinds (`flow/`,
//! `degrade/`, `hotspot/`, `authority/`, `system/`) and knows them all; a
//! kind knows only its own rule, its compiled form and the small shared
//! layer below both (`crate::rule`: `Rule`, `CompiledRule`, the names a
//! rule mentions, `Problems`). Within the folder, too, no two modules need
//! each other:
//!
//! ```text
//! kind_set.rs   KindSet: one kind's list compiled per resource, state kept
//! set.rs        RuleSet: every kind's KindSet, and each resource's rules  (kind_set)
//! listeners.rs  Listeners per kind, AllListeners of an instance
//! kinds.rs      Kind: what the set knows of each kind; FLOW, DEGRADE, ... (set, kind_set, listeners)
//! manager.rs    RuleManager: load, read, listen to one kind             (kinds)
//!   manager/degrade.rs, manager/hotspot.rs: what it adds for one kind
//! book.rs       RuleBook: every kind at once, in one swap              (kinds, set)
//! names.rs      each kind's names, for the instance's caps
//! ```

mod book;
mod kind_set;
pub(crate) mod kinds;
mod listeners;
mod manager;
pub(crate) mod names;
mod set;

pub use crate::rule::Listener;
pub use book::RuleBook;
pub(crate) use listeners::AllListeners;
pub use manager::{FlowRules, RuleManager};
pub(crate) use set::{ResourceRules, RuleSet, RuleSetParts};
