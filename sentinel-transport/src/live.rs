//! The live page: `GET /` (an HTML document), its stylesheet and script
//! under `/live/` (all embedded in the crate), and `GET /live/data`, the
//! JSON it polls every second (see the crate README, "The live page").

mod data;
mod page;
mod query;
mod rules;

use std::ops::Deref;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use sentinel_flow_core::Sentinel;

use crate::shared::SentinelRef;
use crate::sources::{Sources, states};
use data::LiveData;
use query::DataQuery;

/// The live page's routes, to serve on their own or to merge into a
/// service's router: `GET /` (the page), `GET /live/live.css` and
/// `GET /live/live.js` (its assets) and `GET /live/data` (its JSON).
///
/// ```
/// use std::sync::Arc;
/// use sentinel_flow_core::Sentinel;
///
/// let sentinel = Arc::new(Sentinel::builder().build());
/// let app: axum::Router = sentinel_flow_transport::live_page(sentinel);
/// # let _ = app;
/// ```
pub fn live_page<S>(sentinel: S) -> Router
where
    S: Deref<Target = Sentinel> + Send + Sync + 'static,
{
    live_router(Arc::new(sentinel), Arc::new([]))
}

/// What the live page's data reads: the instance and the rule sources it
/// shows.
#[derive(Clone)]
struct Live {
    sentinel: SentinelRef,
    sources: Sources,
}

/// The live page's routes, its data showing `sources`' state.
pub(crate) fn live_router(sentinel: SentinelRef, sources: Sources) -> Router {
    Router::new()
        .route("/", get(page::serve))
        .route("/live/data", get(serve_data))
        .route("/live/live.css", get(page::stylesheet))
        .route("/live/live.js", get(page::script))
        .with_state(Live { sentinel, sources })
}

/// `GET /live/data`: 400 with every problem of the query, or the JSON.
async fn serve_data(
    State(live): State<Live>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Response {
    let query = match DataQuery::parse(&pairs) {
        Ok(query) => query,
        Err(problems) => {
            let mut body = problems.join("\n");
            body.push('\n');
            return (
                StatusCode::BAD_REQUEST,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                body,
            )
                .into_response();
        }
    };
    // Reading every resource's minute window is CPU work of a few
    // milliseconds at most: done inline rather than on a blocking thread.
    let data = LiveData::compute(&live.sentinel, &query, states(&live.sources));
    match serde_json::to_vec(&data) {
        Ok(body) => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            body,
        )
            .into_response(),
        Err(error) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot encode the live data: {error}\n"),
        )
            .into_response(),
    }
}
