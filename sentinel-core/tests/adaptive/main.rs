//! Adaptive concurrency rules through the public API: admission, origin
//! scope, reloads and exactness under threads (`semantics`), and each
//! algorithm's convergence on a simulated service whose latency follows
//! queueing (`service` the simulation, `convergence` the scenarios).

#[path = "../support/mod.rs"]
mod support;

mod convergence;
mod semantics;
mod service;
