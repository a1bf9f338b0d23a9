//! The slot chain: what every entry goes through, in Sentinel's order.
//!
//! Read `chain.rs` first: it is the chain, top to bottom. The slots that
//! find what the checks read, and the one that counts, have a file each
//! here; each rule kind's check is in the kind's folder:
//!
//! | file | slot | at entry | at exit |
//! |---|---|---|---|
//! | `node_selector.rs` | node selector | the context and the node in the tree | |
//! | `cluster_builder.rs` | cluster builder | the origin's node | |
//! | `statistic.rs` | statistic | runs the checks below; counts a pass or a block | RT, success, error |
//! | `authority/slot.rs` | authority | origin white and black lists | |
//! | `system/slot.rs` | system | inbound QPS, threads, RT, load, CPU | |
//! | `param_flow/slot.rs` | hot parameters | limits per argument value | |
//! | `flow/slot.rs` | flow | QPS and concurrency limits | releases reservations |
//! | `degrade/slot.rs` | degrade | circuit breakers | feeds the breakers |
//!
//! The base every kind's check is written against names no kind:
//! `rule_slot.rs` (the `RuleSlot` trait, one shape for every kind: check;
//! give back when a later slot refuses; hear the admission and the exit),
//! `context.rs` what a slot sees, `outcome.rs` what the checks decide for
//! a passing entry, `holds.rs` what it holds until its exit (an enum made
//! from the list of kinds). `rule_chain.rs` composes the kinds' slots at
//! compile time, in the order of the list (`crate::kinds`): no dynamic
//! call, and a resource with no rules of a kind pays one branch for it.
//!
//! A user [`Slot`] goes in by its order (`user.rs`). Below
//! [`order::STATISTIC`] it runs after the nodes are resolved and before
//! counting (a block there is not counted, as in Sentinel); above it, it
//! runs among the rule checks and its block is counted.

pub(crate) mod chain;
mod cluster_builder;
mod context;
pub(crate) mod holds;
mod node_selector;
pub mod order;
mod outcome;
pub(crate) mod placement;
pub(crate) mod rule_chain;
pub(crate) mod rule_slot;
mod statistic;
mod user;

pub use context::{EntryContext, ExitContext};
pub(crate) use holds::Holds;
pub(crate) use outcome::Outcome;
pub use user::Slot;
pub(crate) use user::UserSlots;
