//! What every rule kind shares, through the public API: the contract every
//! built-in kind keeps, run for each from one table (`contract`), loading
//! every kind at once (`rule_book`), a kind added by an application (`user_kind`),
//! bounded cost for any rule (`bounds`), caps that never switch a rule off
//! (`caps`), rules a Java machine accepts (`java_parity`), and every kind
//! under a clock that jumps (`clock_jumps`).

#[path = "../support/mod.rs"]
mod support;

mod bounds;
mod caps;
mod clock_jumps;
mod contract;
mod java_parity;
mod rule_book;
mod user_kind;
