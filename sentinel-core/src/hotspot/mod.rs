//! Hot-parameter flow control (Sentinel's param flow): limit each value of
//! one argument of a resource on its own — each user, each product id —
//! with bounded memory whatever the number of distinct values.
//!
//! A [`ParamFlowRule`] names the argument (`param_idx`, negative from the
//! end) of the [`ParamValue`](crate::ParamValue)s an entry passes with
//! [`EntryBuilder::args`](crate::EntryBuilder::args), and a threshold per
//! value:
//!
//! - **QPS, reject**: a token bucket per value with Sentinel's formula. The
//!   first request of a value leaves `count + burst_count - batch` tokens;
//!   when more than `duration_in_sec` has passed since the last refill,
//!   `elapsed_ms × count / (duration_in_sec × 1000)` tokens are added,
//!   capped at `count + burst_count`; otherwise a request takes `batch`
//!   tokens or is refused.
//! - **QPS, rate limiter**: requests of one value pass spaced
//!   `round(1000 × batch × duration_in_sec / count)` ms apart; one that
//!   would wait `max_queueing_time_ms` or more is refused. The entry waits,
//!   the check never sleeps.
//! - **Concurrency**: at most `count` calls with the value inside at once,
//!   exact under any number of threads (one compare-and-swap counts and
//!   checks); the entry gives its count back at exit.
//!
//! Thresholds are whole numbers (Sentinel reads `(long) count`); a value
//! with threshold 0 is always refused. Values in `param_flow_item_list`
//! have thresholds of their own. A call without the argument passes; a
//! collection argument ([`ParamValue::List`](crate::ParamValue::List))
//! passes if each of its elements does.
//!
//! Each rule keeps its values in a fixed table of
//! [`ParamFlowRule::effective_capacity`] values, allocated when the rule is
//! loaded, with approximate LRU eviction: see `cache.rs` for the layout,
//! the collision odds and what happens past capacity.

#![allow(dead_code)] // wired by the slot chain in a following change

mod cache;
mod checker;
mod rule;
#[cfg(test)]
mod tests;

#[allow(unused_imports)] // used by the slot chain in a following change
pub(crate) use checker::{CompiledParam, ParamDecision, ParamHeld};
pub use rule::{
    BASE_PARAM_CAPACITY, MAX_PARAM_CAPACITY, MAX_PARAM_COUNT, ParamControlBehavior, ParamFlowGrade,
    ParamFlowItem, ParamFlowRule, TOTAL_PARAM_CAPACITY,
};
