//! `Config`: what every service of one layer shares (the name cache, the
//! namer, the origin, the block and error settings), and the origin of a
//! request.

use std::borrow::Cow;
use std::sync::Arc;

use http::Extensions;
use http::header::HeaderName;
use http::request::Parts;
use sentinel_flow_core::EntryType;

use crate::block::{BlockFn, ErrorCheck};
use crate::cache::NameCache;
use crate::headers::HeaderSettings;
use crate::name::{Head, Namer};
use crate::route::RouteMemo;

type OriginFn = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;
type IdentityFn = Arc<dyn for<'e> Fn(&'e Extensions) -> Option<&'e str> + Send + Sync>;

/// Where a request's origin (Sentinel's caller name) comes from.
#[derive(Clone)]
pub(crate) enum Origin {
    None,
    /// A header the client sets (advisory).
    Header(HeaderName),
    /// A user function of the request head (a `String`).
    Custom(OriginFn),
    /// An identity an earlier layer verified, borrowed from the request's
    /// extensions.
    Identity(IdentityFn),
}

/// A request whose origin header appears more than once: which one names
/// the caller is ambiguous.
#[derive(Debug)]
pub(crate) struct DuplicateOrigin;

/// What every service of one layer shares.
#[derive(Clone)]
pub(crate) struct Config {
    pub(crate) names: Arc<NameCache>,
    pub(crate) namer: Namer,
    pub(crate) origin: Origin,
    /// Refuse a request with no origin where authority rules apply.
    pub(crate) require_origin: bool,
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

    /// The origin of a request (absent or empty: `None`); borrowed from
    /// its headers or extensions when it comes from them. `parts` is
    /// `Some` when [`needs_parts`](Self::needs_parts). An origin header
    /// that appears twice is refused, whatever its values.
    #[inline]
    pub(crate) fn origin_of<'p>(
        &self,
        head: &'p impl Head,
        parts: Option<&Parts>,
    ) -> Result<Option<Cow<'p, str>>, DuplicateOrigin> {
        let origin = match &self.origin {
            Origin::None => return Ok(None),
            Origin::Header(name) => {
                let mut values = head.headers().get_all(name).iter();
                let first = values.next();
                if first.is_some() && values.next().is_some() {
                    return Err(DuplicateOrigin);
                }
                first
                    .and_then(|value| value.to_str().ok())
                    .map(Cow::Borrowed)
            }
            Origin::Custom(origin) => {
                origin(parts.expect("a custom origin function is given the parts")).map(Cow::Owned)
            }
            Origin::Identity(identity) => identity(head.extensions()).map(Cow::Borrowed),
        };
        Ok(origin.filter(|origin| !origin.is_empty()))
    }
}
