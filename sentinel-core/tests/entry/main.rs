//! Integration tests of the entry API, one file per topic: counting on
//! resource, origin and inbound nodes with batches, errors and window sizes
//! (`counting`), contexts and the invocation tree (`contexts`), the caps and
//! the switch (`caps`), user slots (`slots`), `Resource` handles and entries
//! across threads and futures (`handles`), concurrency (`threads`), time
//! read by threads through `MonotonicClock` (`clock`), and panics in the
//! chain or in guarded code, which give back everything taken (`panics`).
//!
//! Every test builds its own [`Sentinel`] on a [`ManualClock`] (one small test
//! touches the global instance, on a resource name no other test uses).

use std::fmt;

use sentinel_flow_core::Sentinel;
use sentinel_flow_core::node::{ContextNode, NodeSnapshot};

#[path = "../support/mod.rs"]
mod support;

mod caps;
mod clock;
mod contexts;
mod counting;
mod handles;
mod panics;
mod slots;
mod threads;

/// Everything the resource node of `name` reports now.
fn res(sentinel: &Sentinel, name: &str) -> NodeSnapshot {
    sentinel
        .resource_node(name)
        .unwrap_or_else(|| panic!("no resource node for {name}"))
        .stats()
        .snapshot(sentinel.now_ms())
}

/// Everything the node of `name` in `context` reports now.
fn ctx_node(sentinel: &Sentinel, context: &str, name: &str) -> NodeSnapshot {
    sentinel
        .context_node(context, name)
        .unwrap_or_else(|| panic!("no node for {name} in {context}"))
        .snapshot(sentinel.now_ms())
}

fn origin(sentinel: &Sentinel, name: &str, origin: &str) -> NodeSnapshot {
    sentinel
        .resource_node(name)
        .unwrap()
        .find_origin(origin)
        .unwrap_or_else(|| panic!("no origin node {origin} on {name}"))
        .stats()
        .snapshot(sentinel.now_ms())
}

fn names(nodes: &[ContextNode<'_>]) -> Vec<String> {
    nodes.iter().map(|n| n.resource_name().to_owned()).collect()
}

#[derive(Debug)]
struct Oops;

impl fmt::Display for Oops {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("oops")
    }
}

impl std::error::Error for Oops {}
