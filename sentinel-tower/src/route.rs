//! The resource of one route, remembered by the service of that route.
//!
//! With `Router::route_layer` (or a layer on one route) every service a
//! layer makes sees one axum route template, whose `MatchedPath` is the
//! same shared string on every request. The first such request's resource
//! is remembered by the template's address (kept alive by the memo) and
//! method, so later requests skip joining, hashing and the name cache.
//! Other requests (another template, another method, a nested router's
//! per-request template) take the name cache as before.

#[cfg(feature = "axum")]
use std::sync::OnceLock;

#[cfg(feature = "axum")]
use axum::extract::MatchedPath;
use http::Method;
use sentinel_flow_core::Resource;

#[cfg(feature = "axum")]
use crate::cache::OVERFLOW_RESOURCE;

/// One service's remembered route; empty until its first named request.
#[derive(Clone, Debug, Default)]
pub(crate) struct RouteMemo {
    #[cfg(feature = "axum")]
    memo: OnceLock<Memo>,
}

#[cfg(feature = "axum")]
#[derive(Clone, Debug)]
struct Memo {
    method: Method,
    // Holds the template's allocation, so its address names it.
    template: MatchedPath,
    resource: Resource<'static>,
}

#[cfg(feature = "axum")]
impl Memo {
    fn is(&self, method: &Method, template: &MatchedPath) -> bool {
        std::ptr::eq(self.template.as_str(), template.as_str()) && self.method == *method
    }
}

impl RouteMemo {
    /// The remembered resource of a request of `method` to the route of
    /// `extensions`' `MatchedPath`, if it is the remembered one.
    #[inline]
    pub(crate) fn get(
        &self,
        method: &Method,
        extensions: &http::Extensions,
    ) -> Option<&Resource<'static>> {
        #[cfg(feature = "axum")]
        {
            let memo = self.memo.get()?;
            let template = extensions.get::<MatchedPath>()?;
            memo.is(method, template).then_some(&memo.resource)
        }
        #[cfg(not(feature = "axum"))]
        {
            let _ = (method, extensions);
            None
        }
    }

    /// Remembers `resource` as the one of the request's route, if the
    /// request has a route template and nothing is remembered yet. The
    /// overflow resource is never remembered: the name cache decides
    /// about it on every request. Inline: a request without a template
    /// (no axum) pays a check of its extensions, not a call.
    #[inline]
    pub(crate) fn remember(
        &self,
        method: &Method,
        extensions: &http::Extensions,
        resource: &Resource<'static>,
    ) {
        #[cfg(feature = "axum")]
        if let Some(template) = extensions.get::<MatchedPath>()
            && self.memo.get().is_none()
        {
            self.set(method, template, resource);
        }
        #[cfg(not(feature = "axum"))]
        let _ = (method, extensions, resource);
    }

    #[cfg(feature = "axum")]
    #[cold]
    fn set(&self, method: &Method, template: &MatchedPath, resource: &Resource<'static>) {
        if resource.name() != OVERFLOW_RESOURCE {
            let _ = self.memo.set(Memo {
                method: method.clone(),
                template: template.clone(),
                resource: resource.clone(),
            });
        }
    }
}
