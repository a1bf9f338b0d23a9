//! The live page: `/` and the JSON it refreshes from.

use std::ops::Deref;

use sentinel_core::Sentinel;

/// The live page's routes (`/` and its JSON), to serve on their own or to
/// merge into a service's router.
pub fn live_page<S>(sentinel: S) -> axum::Router
where
    S: Deref<Target = Sentinel> + Send + Sync + 'static,
{
    let _sentinel: crate::shared::SentinelRef = std::sync::Arc::new(sentinel);
    axum::Router::new()
}
