//! Integration tests of system rules (`limits`): each limit against the
//! inbound total, inbound entries only, the strictest rule winning,
//! Sentinel's BBR condition for the load limit with injected readings, and
//! threads. What every kind shares (refused lists, listeners, reloads) is
//! the contract in `tests/kinds/contract.rs`.

use sentinel_flow_core::system::{ManualStatus, SystemRule};
use sentinel_flow_core::{BlockError, Entry, EntryType, ManualClock, Sentinel};

use crate::support::{instance_with, load};

#[path = "../support/mod.rs"]
mod support;

mod limits;

/// An instance with `rules` loaded and its system readings set by hand.
fn setup(rules: Vec<SystemRule>) -> (ManualClock, ManualStatus, Sentinel) {
    let status = ManualStatus::new();
    let (clock, sentinel) = instance_with(|builder| builder.system_status(status.clone()));
    load(&sentinel, rules);
    (clock, status, sentinel)
}

fn inbound<'s>(sentinel: &'s Sentinel, resource: &str) -> Result<Entry<'s>, BlockError> {
    sentinel
        .entry_builder(resource)
        .entry_type(EntryType::Inbound)
        .enter()
}

fn rule(f: impl FnOnce(&mut SystemRule)) -> SystemRule {
    let mut rule = SystemRule::default();
    f(&mut rule);
    rule
}
