//! Tests that count the warnings `tracing` hears, in a binary of their own:
//! the caps (`caps`), cluster rules with no cluster service (`cluster`) and a
//! lasting metric log error (`metric_log`) are each logged once.
//!
//! `tracing` caches each call site's interest process-wide, so a test on
//! another thread hitting the same call site with no subscriber could race the
//! scoped subscriber of `count_warnings` out of its events. No test here hits
//! another's call site, and no other binary's test shares this process.

#[path = "../support/mod.rs"]
mod support;

mod caps;
mod cluster;
mod metric_log;
