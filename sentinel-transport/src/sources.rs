//! Rule sources an operator sees: each one's [`SourceState`] on the live
//! page and in the Prometheus text at `GET /metrics`.

use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use sentinel_flow_rules::source::SourceState;

#[cfg(feature = "prometheus")]
use crate::shared::SentinelRef;

/// Reads one source's state now.
pub(crate) type SourceReader = Arc<dyn Fn() -> SourceState + Send + Sync>;

/// The sources a server shows, in the order they were given.
pub(crate) type Sources = Arc<[SourceReader]>;

/// Each source's state now.
pub(crate) fn states(sources: &Sources) -> Vec<SourceState> {
    sources.iter().map(|read| read()).collect()
}

/// The Prometheus text format's content type, version 0.0.4.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What `GET /metrics` reads.
#[derive(Clone)]
pub(crate) struct Scrape {
    #[cfg(feature = "prometheus")]
    pub(crate) sentinel: SentinelRef,
    pub(crate) sources: Sources,
}

/// `GET /metrics`: the instance's statistics (feature `prometheus`) and
/// each rule source's state, as Prometheus text.
pub(crate) async fn metrics(State(scrape): State<Scrape>) -> Response {
    #[cfg(feature = "prometheus")]
    let mut text = sentinel_flow_core::prometheus::render_prometheus(&scrape.sentinel);
    #[cfg(not(feature = "prometheus"))]
    let mut text = String::new();
    let states = states(&scrape.sources);
    if !states.is_empty() {
        text.push_str(&SourceState::prometheus_of(&states));
    }
    (
        [
            (header::CONTENT_TYPE, PROMETHEUS_TEXT),
            (header::CACHE_CONTROL, "no-store"),
        ],
        text,
    )
        .into_response()
}
