//! Integration tests of authority rules: white and black lists by origin
//! and their place in the chain (`lists`). What every kind shares (refused
//! lists, listeners, reloads) is the contract in `tests/kinds/contract.rs`.

use sentinel_flow_core::{BlockKind, Sentinel};

#[path = "../support/mod.rs"]
mod support;

mod lists;

fn enter(sentinel: &Sentinel, resource: &str, origin: &str) -> Result<(), BlockKind> {
    sentinel
        .entry_builder(resource)
        .origin(origin)
        .enter()
        .map(drop)
        .map_err(|e| e.kind())
}
