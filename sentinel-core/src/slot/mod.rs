//! The slot chain: what every entry goes through, in Sentinel's order.
//!
//! Read `chain.rs` first: it is the chain, top to bottom. Each
//! built-in slot has a file of its own:
//!
//! | file | slot | at entry | at exit |
//! |---|---|---|---|
//! | `node_selector.rs` | node selector | the context and the node in the tree | |
//! | `cluster_builder.rs` | cluster builder | the origin's node | |
//! | `statistic.rs` | statistic | runs the checks below; counts a pass or a block | RT, success, error |
//! | `authority.rs` | authority | origin white and black lists | |
//! | `system.rs` | system | inbound QPS, threads, RT, load, CPU | |
//! | `param_flow.rs` | hot parameters | limits per argument value | |
//! | `flow.rs` | flow | QPS and concurrency limits | releases reservations |
//! | `degrade.rs` | degrade | circuit breakers | feeds the breakers |
//!
//! The five rule checks implement one crate-private trait,
//! `RuleSlot` (check; give back when a later slot
//! refuses; hear the exit), and are composed at compile time
//! (`rule_slot.rs`): no dynamic call, and a resource with no rules of a
//! kind pays one branch for it. The first three slots find what the checks
//! read, and the statistic slot wraps them, so they are plain functions
//! called in order by the chain. `context.rs` is what a slot sees,
//! `outcome.rs` what the checks decide for a passing entry, `holds.rs`
//! what it holds until its exit.
//!
//! A user [`Slot`] goes in by its order (`user.rs`). Below
//! [`order::STATISTIC`] it runs after the nodes are resolved and before
//! counting (a block there is not counted, as in Sentinel); above it, it
//! runs among the rule checks and its block is counted.

mod authority;
pub(crate) mod chain;
mod cluster_builder;
mod context;
mod degrade;
mod flow;
mod holds;
mod node_selector;
pub mod order;
mod outcome;
mod param_flow;
pub(crate) mod rule_slot;
mod statistic;
mod system;
mod user;

pub use context::{EntryContext, ExitContext};
pub(crate) use holds::Holds;
pub(crate) use outcome::Outcome;
pub use user::Slot;
pub(crate) use user::UserSlots;
