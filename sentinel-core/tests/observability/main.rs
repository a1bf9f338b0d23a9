//! Observability through the public API, on a `ManualClock`: the metric
//! log, snapshots and the Prometheus text (`metrics`), the adaptive rules'
//! Prometheus gauges (`adaptive`), blocks aggregated per second and the
//! block log (`block_log`), and response-time percentiles (`percentiles`).
//! The warning a lasting disk error logs is counted in `tests/warnings/`,
//! away from the tests here that hit the same call site.

#[path = "../support/mod.rs"]
mod support;

#[cfg(feature = "prometheus")]
mod adaptive;
mod block_log;
mod metrics;
mod percentiles;
