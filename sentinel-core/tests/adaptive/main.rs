//! Adaptive concurrency rules through the public API: admission, origin
//! scope, reloads and exactness under threads (`semantics`), and each
//! algorithm's convergence on a simulated service whose latency follows
//! queueing (`service` the simulation, `convergence` the scenarios), and the
//! same scenarios against tower-resilience's AIMD and Vegas layers as a
//! reference (`reference`).

#[path = "../support/mod.rs"]
mod support;

mod convergence;
mod reference;
mod semantics;
mod service;
