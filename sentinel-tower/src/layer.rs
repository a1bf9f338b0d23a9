//! `SentinelLayer`: the settings, shared by every service it makes.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use http::header::HeaderName;
use http::request::Parts;
use http::{Extensions, HeaderMap, Response, StatusCode};
use sentinel_flow_core::{BlockError, EntryType, Sentinel};
use tower_layer::Layer;

use crate::block::ErrorCheck;
#[cfg(feature = "axum")]
use crate::body::AxumBody;
use crate::body::WrappedBody;
use crate::cache::{DEFAULT_MAX_RESOURCE_NAMES, NameCache};
use crate::config::{Config, Origin};
use crate::headers::HeaderSettings;
use crate::name::Namer;
use crate::route::RouteMemo;
use crate::service::SentinelService;

/// A tower [`Layer`] that enters a Sentinel resource for each request.
///
/// Defaults:
///
/// - the [`global`](sentinel_flow_core::global) instance;
/// - resource name `METHOD:` + the axum route template
///   ([`MatchedPath`](axum::extract::MatchedPath), with the `axum` feature,
///   when the layer runs inside an axum `Router`), else `METHOD:` + the path
///   passed through [`clean_path`](crate::clean_path); at most
///   [`DEFAULT_MAX_RESOURCE_NAMES`](crate::DEFAULT_MAX_RESOURCE_NAMES)
///   distinct names, past which requests enter
///   [`OVERFLOW_RESOURCE`](crate::OVERFLOW_RESOURCE) (the instance's own
///   `max_resources` cap applies too: past it entries pass unchecked and
///   uncounted). With axum, `Router::route_layer` guards matched routes
///   only, so every name is a route template; `Router::layer` also guards
///   the fallback, whose random paths can fill the cap;
/// - no origin (see [Origins](#origins));
/// - [`EntryType::Inbound`];
/// - blocked HTTP requests get `429 Too Many Requests`, `blocked by <kind>`
///   (JSON when the `Accept` header names JSON), a
///   [`Retry-After`](crate::retry_after) header and, for a QPS flow rule,
///   `RateLimit-Policy` and `RateLimit`; blocked gRPC
///   requests get `grpc-status` 8 (`RESOURCE_EXHAUSTED`), 14 (`UNAVAILABLE`)
///   for an open breaker;
/// - an inner error, a 5xx status or a `grpc-status` header other than `0`
///   is recorded as an error of the entry (circuit breakers see it).
///
/// # Origins
///
/// Authority rules (origin white and black lists) and flow rules with a
/// `limit_app` judge a request by its origin, Sentinel's name for the
/// caller. Where it comes from:
///
/// - [`origin_from_extensions`](Self::origin_from_extensions): an identity
///   an earlier layer verified (a client certificate, an authenticated
///   user), read from the request's extensions: the form to trust;
/// - [`origin_header`](Self::origin_header): a header, which the client
///   sets to any value it likes (advisory: a caller refused by a black
///   list names itself otherwise, or not at all);
/// - [`origin_fn`](Self::origin_fn): any function of the request head.
///
/// Origins match rules exactly, as in Sentinel: `Bad-Bot` is not
/// `bad-bot`. A request with no origin (none given, or an empty one)
/// passes every authority rule, as in Sentinel, unless
/// [`require_origin`](Self::require_origin) is on. Each distinct origin
/// costs a node of statistics per resource it enters, within the
/// instance's origin cap
/// ([`max_origins`](sentinel_flow_core::SentinelBuilder::max_origins)).
///
/// ```
/// use sentinel_flow_tower::SentinelLayer;
///
/// let layer = SentinelLayer::new()
///     .origin_header("x-caller")
///     .max_resource_names(200);
/// let app: axum::Router = axum::Router::new()
///     .route("/orders/{id}", axum::routing::get(|| async { "order" }))
///     .layer(layer);
/// # drop(app);
/// ```
#[derive(Clone)]
pub struct SentinelLayer<K = WrappedBody> {
    config: Config,
    kind: PhantomData<fn() -> K>,
}

impl SentinelLayer {
    /// A layer on the global instance with the default settings.
    pub fn new() -> Self {
        SentinelLayer::with_sentinel(sentinel_flow_core::global())
    }

    /// A layer on `sentinel`. The instance must live as long as the
    /// service: an entry borrows it, and the entry lives in the response
    /// future (leak an instance built at start-up with `Box::leak`).
    pub fn with_sentinel(sentinel: &'static Sentinel) -> Self {
        SentinelLayer {
            config: Config {
                names: Arc::new(NameCache::new(sentinel, DEFAULT_MAX_RESOURCE_NAMES)),
                namer: Namer::default_route(),
                origin: Origin::None,
                require_origin: false,
                entry_type: EntryType::Inbound,
                block: None,
                is_error: ErrorCheck(None),
                headers: HeaderSettings::default(),
                route: RouteMemo::default(),
            },
            kind: PhantomData,
        }
    }
}

impl<K> SentinelLayer<K> {
    /// Names resources with `name` instead of the route template. The
    /// function's names are capped like the default ones. One `String` per
    /// request.
    pub fn resource_fn(mut self, name: impl Fn(&Parts) -> String + Send + Sync + 'static) -> Self {
        self.config.namer = Namer::Custom(Arc::new(name));
        self
    }

    /// Replaces [`clean_path`](crate::clean_path) for requests without a
    /// route template.
    pub fn path_cleaner(
        mut self,
        cleaner: impl Fn(&str) -> Cow<'_, str> + Send + Sync + 'static,
    ) -> Self {
        self.config.namer = Namer::Route(Some(Arc::new(cleaner)));
        self
    }

    /// At most `max` distinct resource names (default
    /// [`DEFAULT_MAX_RESOURCE_NAMES`](crate::DEFAULT_MAX_RESOURCE_NAMES));
    /// requests with further names enter
    /// [`OVERFLOW_RESOURCE`](crate::OVERFLOW_RESOURCE). Forgets the names
    /// this layer has seen.
    pub fn max_resource_names(mut self, max: usize) -> Self {
        let sentinel = self.config.names.sentinel();
        self.config.names = Arc::new(NameCache::new(sentinel, max));
        self
    }

    /// Takes the origin from the header `name` (absent, empty or not
    /// UTF-8: no origin), matched against rules exactly (`Bad-Bot` is not
    /// `bad-bot`). Borrowed from the request: no allocation.
    ///
    /// The header is advisory: a client sets it to any value, so a black
    /// list keeps out only callers that name themselves honestly, and a
    /// white list is as strong as the secrecy of the names on it. Trust it
    /// only where something in front (a gateway that sets it and drops
    /// the client's own) vouches for it; else take the origin from a
    /// verified identity with
    /// [`origin_from_extensions`](Self::origin_from_extensions). A request
    /// without the header passes authority rules, as in Sentinel, unless
    /// [`require_origin`](Self::require_origin) is on.
    ///
    /// A request that carries the header more than once is refused,
    /// whatever its rules and values: `400 Bad Request`, `duplicated
    /// origin header` (gRPC: `grpc-status` 3, `INVALID_ARGUMENT`), before
    /// any entry (not counted in the statistics, not given to
    /// [`block_response`](Self::block_response)): which value names the
    /// caller is ambiguous, and proxies disagree on it.
    ///
    /// # Panics
    ///
    /// If `name` is not a valid header name.
    pub fn origin_header(mut self, name: &str) -> Self {
        let name = HeaderName::try_from(name).expect("a valid header name");
        self.config.origin = Origin::Header(name);
        self
    }

    /// Takes the origin from a function of the request head (one `String`
    /// per request that has an origin; `None` or an empty string: no
    /// origin). For an origin that needs no computing, borrowed from an
    /// identity in the extensions, see
    /// [`origin_from_extensions`](Self::origin_from_extensions).
    pub fn origin_fn(
        mut self,
        origin: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.config.origin = Origin::Custom(Arc::new(origin));
        self
    }

    /// Takes the origin from the request's extensions: the identity an
    /// earlier layer verified and put there (the subject of a client
    /// certificate, an authenticated user or service), borrowed, with no
    /// allocation. `None` or an empty string: no origin. Headers are not
    /// read: a client cannot choose its origin by sending one.
    ///
    /// ```
    /// use sentinel_flow_tower::SentinelLayer;
    ///
    /// /// Put in the extensions by the authentication layer.
    /// #[derive(Clone)]
    /// struct Caller(String);
    ///
    /// let layer = SentinelLayer::new()
    ///     .origin_from_extensions(|extensions| {
    ///         extensions.get::<Caller>().map(|caller| caller.0.as_str())
    ///     })
    ///     .require_origin(true);
    /// # drop(layer);
    /// ```
    pub fn origin_from_extensions(
        mut self,
        origin: impl for<'e> Fn(&'e Extensions) -> Option<&'e str> + Send + Sync + 'static,
    ) -> Self {
        self.config.origin = Origin::Identity(Arc::new(origin));
        self
    }

    /// Whether a request with no origin (its origin header absent, empty
    /// or not UTF-8; the origin function's `None` or empty string) is
    /// refused where authority rules apply to its resource (default off:
    /// as in Sentinel, it passes every list). Refused as an authority
    /// block by the resource's first authority rule, with the response of
    /// every authority block (a `429` by default, or the
    /// [`block_response`](Self::block_response)); before the entry, so
    /// not counted in the resource's statistics. Resources without
    /// authority rules, and an instance switched off, let it through. No
    /// cost for a request that has an origin.
    pub fn require_origin(mut self, on: bool) -> Self {
        self.config.require_origin = on;
        self
    }

    /// Inbound (default) or outbound entries.
    pub fn entry_type(mut self, entry_type: EntryType) -> Self {
        self.config.entry_type = entry_type;
        self
    }

    /// Makes the HTTP response of a blocked request (gRPC requests keep the
    /// gRPC response) instead of the default (`blocked by <kind>`, or JSON
    /// to a client that accepts it; see [`retry_after`](crate::retry_after)
    /// for its `Retry-After`). The rate-limit headers the response does not
    /// set itself are added.
    pub fn block_response(
        mut self,
        respond: impl Fn(&BlockError) -> Response<String> + Send + Sync + 'static,
    ) -> Self {
        self.config.block = Some(Arc::new(respond));
        self
    }

    /// Decides which responses count as errors of the entry (default: 5xx,
    /// or a `grpc-status` header other than `0`). An `Err` from the inner
    /// service is always an error.
    pub fn error_when(
        mut self,
        is_error: impl Fn(StatusCode, &HeaderMap) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.config.is_error = ErrorCheck(Some(Arc::new(is_error)));
        self
    }

    /// Whether 429s blocked by a QPS flow rule carry the IETF rate-limit
    /// fields `RateLimit-Policy` (`"default";q=<limit>;w=<window s>`) and
    /// `RateLimit` (`"default";r=0;t=<reset s>`); on by default. See
    /// [`rate_limit_headers_on_admitted`](Self::rate_limit_headers_on_admitted)
    /// for what the figures are.
    pub fn rate_limit_headers(mut self, on: bool) -> Self {
        self.config.headers.ietf = on;
        self
    }

    /// Whether the legacy `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
    /// `X-RateLimit-Reset` (seconds from now, not a date) are written
    /// beside the IETF fields, for clients that read them; off by default.
    pub fn legacy_rate_limit_headers(mut self, on: bool) -> Self {
        self.config.headers.legacy = on;
        self
    }

    /// Whether admitted responses carry the rate-limit headers too (off by
    /// default: reading the quota costs a rule-set read and a window sum
    /// per request). The figures are those of the resource's first QPS
    /// flow rule that limits all callers on the resource's own
    /// statistics (see [`FlowQuota`](sentinel_flow_core::flow::FlowQuota)):
    ///
    /// - limit `q`: the rule's count times its window in seconds, rounded
    ///   down; window `w`: the rule's window (`stat_interval_ms`, one
    ///   second by default) in whole seconds, rounded up;
    /// - remaining `r`: the limit minus the passes counted in the window
    ///   the rule checks, this request's included, at least 0 (0 on a 429);
    /// - reset `t`: the seconds, rounded up, until the window's oldest
    ///   bucket leaves it (the next bucket edge).
    ///
    /// Responses of resources without such a rule get none.
    pub fn rate_limit_headers_on_admitted(mut self, on: bool) -> Self {
        self.config.headers.on_admitted = on;
        self
    }

    /// Hands out axum's [`Body`](axum::body::Body) in responses instead of
    /// [`ResponseBody`](crate::ResponseBody): for a layer inside an axum
    /// `Router`, which turns every response body into its `Body` and so
    /// boxes a `ResponseBody` (one allocation per request); a handler's
    /// `Body` whose entry exits at the head is handed on as it is.
    /// Streamed bodies are still wrapped (and boxed).
    ///
    /// ```
    /// use sentinel_flow_tower::SentinelLayer;
    ///
    /// let app: axum::Router = axum::Router::new()
    ///     .route("/orders/{id}", axum::routing::get(|| async { "order" }))
    ///     .route_layer(SentinelLayer::new().axum_body());
    /// # drop(app);
    /// ```
    #[cfg(feature = "axum")]
    pub fn axum_body(self) -> SentinelLayer<AxumBody> {
        SentinelLayer {
            config: self.config,
            kind: PhantomData,
        }
    }

    /// How many requests entered the overflow resource because the name
    /// cap was reached.
    pub fn overflowed(&self) -> u64 {
        self.config.names.refused()
    }
}

impl Default for SentinelLayer {
    fn default() -> Self {
        SentinelLayer::new()
    }
}

impl<S, K> Layer<S> for SentinelLayer<K> {
    type Service = SentinelService<S, K>;

    fn layer(&self, inner: S) -> Self::Service {
        let config = Config {
            // Each service remembers its own route.
            route: RouteMemo::default(),
            ..self.config.clone()
        };
        SentinelService::new(inner, Arc::new(config))
    }
}

impl<K> fmt::Debug for SentinelLayer<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelLayer")
            .field("entry_type", &self.config.entry_type)
            .finish_non_exhaustive()
    }
}
