//! Flow control, circuit breaking and overload protection per named resource,
//! in the model of Alibaba Sentinel.
//!
//! A call enters a named resource and gets an [`Entry`] guard, or a
//! [`BlockError`] when a rule refuses it. Every entry goes through the slot
//! chain ([`slot`]) of its [`Sentinel`] instance, which keeps live statistics
//! per resource, per context and per origin ([`node`], [`stat`]) and checks
//! the rules.
//!
//! ```
//! use sentinel_flow_core::{ManualClock, Sentinel};
//!
//! let clock = ManualClock::new(1_700_000_000_000);
//! let sentinel = Sentinel::builder().clock(clock.clone()).build();
//!
//! for _ in 0..10 {
//!     let entry = sentinel.entry("GET:/orders")?;
//!     clock.advance_ms(3);
//!     drop(entry);
//!     clock.advance_ms(47);
//! }
//! let node = sentinel.resource_node("GET:/orders").unwrap();
//! let now = sentinel.now_ms();
//! assert_eq!(node.stats().pass_qps(now), 10.0);
//! assert_eq!(node.stats().avg_rt(now), 3.0);
//! assert_eq!(node.stats().cur_concurrency(), 0);
//! # Ok::<(), sentinel_flow_core::BlockError>(())
//! ```
//!
//! Services usually enter resources of the [`global`] instance with
//! [`entry`] or a [`Resource`] handle kept in a `static`.
//!
//! Reading the code: `slot/chain.rs` is the chain an entry goes through,
//! top to bottom; `kinds.rs` lists the rule kinds once, in chain order;
//! each kind (`flow/`, `degrade/`, `system/`, `authority/`,
//! `param_flow/`) is a folder with its rule, compiled form and slot,
//! knowing only `rule/` and the slot base, and `rules/` composes them;
//! `sentinel/` is the facade that holds an instance together; `stat/` and
//! `node/` keep the counts. Imports go one way (checked in CI).

#[macro_use]
mod kinds;

#[cfg(feature = "bench-internals")]
#[doc(hidden)]
#[path = "bench.rs"]
pub mod __bench;
#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
pub mod adaptive;
pub mod authority;
mod clock;
pub mod degrade;
mod engine;
mod entry;
pub mod flow;
pub mod gateway;
pub mod log;
pub mod node;
mod param;
pub mod param_flow;
#[cfg(feature = "prometheus")]
pub mod prometheus;
mod rule;
mod rules;
mod sentinel;
pub mod slot;
pub mod snapshot;
pub mod stat;
mod sync;
pub mod system;

pub use clock::{Clock, ManualClock, MonotonicClock, SystemClock};
pub use entry::{BlockError, BlockKind, Entry, EntryBuilder, EntryType, Resource};
#[cfg(feature = "tokio")]
pub use entry::{Entering, Queued};
pub use param::{InlineStr, ParamKey, ParamValue};
pub use rule::describe;
pub use rule::{Rule, RuleError, RuleErrors};
pub use rules::{Listener, RuleBook, UserKind, UserKindRules};
pub use sentinel::DEFAULT_RULE_MEMORY_BUDGET;
pub use sentinel::{
    CapUsage, Caps, DEFAULT_CONTEXT, DEFAULT_MAX_CONTEXTS, DEFAULT_MAX_NAME_LEN,
    DEFAULT_MAX_ORIGINS, DEFAULT_MAX_ORIGINS_TOTAL, DEFAULT_MAX_RESOURCES, DEFAULT_MAX_RULE_NAMES,
    RuleManager, Sentinel, SentinelBuilder, global,
};

/// Enters `resource` on the [`global`] instance with the default settings.
///
/// ```
/// fn handle() -> Result<(), sentinel_flow_core::BlockError> {
///     let _entry = sentinel_flow_core::entry("GET:/health")?;
///     Ok(())
/// }
/// handle().unwrap();
/// ```
#[inline]
pub fn entry(resource: &str) -> Result<Entry<'static>, BlockError> {
    global().entry(resource)
}

/// Records `error` on `entry`, as [`Entry::set_error`].
pub fn trace_error<E: ?Sized>(entry: &Entry<'_>, error: &E) {
    entry.set_error(error);
}
