//! `Config`: what every service of one layer shares (the name cache, the
//! namer, the origin, the block and error settings), and the origin of a
//! request.

use std::borrow::Cow;
use std::sync::Arc;

use http::header::HeaderName;
use http::request::Parts;
use sentinel_core::EntryType;

use crate::block::{BlockFn, ErrorCheck};
use crate::cache::NameCache;
use crate::headers::HeaderSettings;
use crate::name::{Head, Namer};
use crate::route::RouteMemo;

type OriginFn = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;

/// Where a request's origin (Sentinel's caller name) comes from.
#[derive(Clone)]
pub(crate) enum Origin {
    None,
    Header(HeaderName),
    Custom(OriginFn),
}

/// What every service of one layer shares.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) names: Arc<NameCache>,
    pub(crate) namer: Namer,
    pub(crate) origin: Origin,
    pub(crate) entry_type: EntryType,
    pub(crate) block: Option<BlockFn>,
    pub(crate) is_error: ErrorCheck,
    pub(crate) headers: HeaderSettings,
    /// The route this config's service has seen (a config per service).
    pub(crate) route: RouteMemo,
}

impl Config {
    /// Whether a user function reads the request as `&Parts`, which costs
    /// taking the request apart.
    pub(crate) fn needs_parts(&self) -> bool {
        self.namer.needs_parts() || matches!(self.origin, Origin::Custom(_))
    }

    /// The origin of a request; borrowed from its headers when it comes
    /// from one. `parts` is `Some` when [`needs_parts`](Self::needs_parts).
    #[inline]
    pub(crate) fn origin_of<'p>(
        &self,
        head: &'p impl Head,
        parts: Option<&Parts>,
    ) -> Option<Cow<'p, str>> {
        match &self.origin {
            Origin::None => None,
            Origin::Header(name) => head
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(Cow::Borrowed),
            Origin::Custom(origin) => {
                origin(parts.expect("a custom origin function is given the parts")).map(Cow::Owned)
            }
        }
        .filter(|origin| !origin.is_empty())
    }
}
