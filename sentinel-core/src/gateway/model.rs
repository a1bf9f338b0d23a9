//! What API definitions and gateway rules say, with Sentinel's fields and
//! defaults (`ApiDefinition`, `GatewayFlowRule`, `GatewayParamFlowItem`).

/// The most API definitions an instance holds.
pub const MAX_API_DEFINITIONS: usize = 1_000;
/// The most path predicates one API definition holds.
pub const MAX_API_PREDICATES: usize = 100;
/// The most gateway rules an instance holds.
pub const MAX_GATEWAY_RULES: usize = 10_000;
/// The longest pattern (a path, a value, a regular expression), in bytes.
pub const MAX_PATTERN_LEN: usize = 1_024;
/// The most memory a compiled regular expression may take, in bytes (its
/// program and its lazy DFA's cache each); a larger one is refused when
/// the rules load. Matching is linear in the input's length.
pub const MAX_REGEX_BYTES: usize = 256 * 1024;
/// The longest field name (header, query parameter, cookie), in bytes.
pub const MAX_FIELD_NAME_LEN: usize = 256;
/// The most gateway rules on one resource (each reads one argument of the
/// resource's entries: its parameter item's value, or a constant).
pub const MAX_PARAM_ITEMS_PER_RESOURCE: usize = 16;
/// The longest API or route name a rule names, in bytes.
pub const MAX_GATEWAY_NAME_LEN: usize = 1_024;

/// A named group of paths (Sentinel's `ApiDefinition`): a request whose
/// path matches any predicate enters a resource of the API's name, beside
/// its route's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiDefinition {
    /// The API's name, which is the resource gateway rules in
    /// [`ResourceMode::ApiGroup`] name (at most [`MAX_GATEWAY_NAME_LEN`]
    /// bytes).
    pub name: String,
    /// The paths of the group (at least one, at most
    /// [`MAX_API_PREDICATES`]).
    pub predicates: Vec<ApiPredicate>,
}

impl ApiDefinition {
    /// An API named `name` with `predicates`.
    pub fn new(name: impl Into<String>, predicates: Vec<ApiPredicate>) -> Self {
        ApiDefinition {
            name: name.into(),
            predicates,
        }
    }
}

/// One path pattern of an API (Sentinel's `ApiPathPredicateItem`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiPredicate {
    /// The pattern (at most [`MAX_PATTERN_LEN`] bytes).
    pub pattern: String,
    /// How the request path is matched against it.
    pub match_strategy: PathMatch,
}

impl ApiPredicate {
    /// The path `pattern` exactly.
    pub fn exact(pattern: impl Into<String>) -> Self {
        ApiPredicate {
            pattern: pattern.into(),
            match_strategy: PathMatch::Exact,
        }
    }

    /// Paths under `pattern` (see [`PathMatch::Prefix`]).
    pub fn prefix(pattern: impl Into<String>) -> Self {
        ApiPredicate {
            pattern: pattern.into(),
            match_strategy: PathMatch::Prefix,
        }
    }

    /// Paths the regular expression `pattern` matches whole.
    pub fn regex(pattern: impl Into<String>) -> Self {
        ApiPredicate {
            pattern: pattern.into(),
            match_strategy: PathMatch::Regex,
        }
    }
}

/// How an API predicate matches a request path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PathMatch {
    /// The path equals the pattern.
    #[default]
    Exact,
    /// The path starts with the pattern. A pattern ending in `/**` (the
    /// Ant form Sentinel's gateway adapters use, `/orders/**`) matches the
    /// path before it and every path under it (`/orders`, `/orders/`,
    /// `/orders/7`, not `/ordersx`); a pattern ending in `**` otherwise
    /// is the prefix before the stars.
    Prefix,
    /// The whole path matches the regular expression (Java's
    /// `Matcher.matches`, as Sentinel): `/items/[0-9]+` matches
    /// `/items/42`, not `/items/42/x`. The `regex` crate's syntax, bounded
    /// by [`MAX_REGEX_BYTES`].
    Regex,
}

/// Which resource a gateway rule limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResourceMode {
    /// A route: the axum route template of the requests
    /// (`/orders/{id}`), or the cleaned path outside a `Router` (see
    /// `sentinel-flow-tower`'s `GatewayLayer`).
    #[default]
    Route,
    /// An API group: the name of an [`ApiDefinition`].
    ApiGroup,
}

/// What a gateway rule counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GatewayGrade {
    /// Requests per `interval_sec`.
    #[default]
    Qps,
    /// Requests inside the resource at once (Sentinel's thread grade).
    Concurrency,
}

/// What a QPS gateway rule does with a request over its count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GatewayBehavior {
    /// Refuse it at once (`429`).
    #[default]
    Reject,
    /// Queue it on a timer: requests pass evenly spaced, each waiting
    /// less than `max_queueing_timeout_ms`.
    RateLimiter,
}

/// A gateway flow rule (Sentinel's `GatewayFlowRule`): a limit on a route
/// or an API group, as a whole or per value of a request attribute.
///
/// ```
/// use sentinel_flow_core::gateway::{GatewayParamItem, GatewayRule};
///
/// // Each client IP at most 10 requests per second on the API "orders".
/// let rule = GatewayRule::api_group("orders", 10.0).param_item(GatewayParamItem::client_ip());
/// assert_eq!(rule.interval_sec, 1);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayRule {
    /// The route or API name (at most [`MAX_GATEWAY_NAME_LEN`] bytes).
    pub resource: String,
    /// Whether `resource` is a route or an API group (default route).
    pub resource_mode: ResourceMode,
    /// What is counted (default QPS).
    pub grade: GatewayGrade,
    /// The threshold (per value, with a parameter item): requests per
    /// `interval_sec`, or requests at once. Whole numbers, as in Sentinel.
    pub count: f64,
    /// The window `count` applies to, in seconds (default 1; at most one
    /// day).
    pub interval_sec: u64,
    /// Over the threshold: reject or queue (default reject; QPS only).
    pub control_behavior: GatewayBehavior,
    /// Extra requests a quiet caller may pass at once (default 0; QPS with
    /// reject).
    pub burst: u64,
    /// Rate limiter: the longest a request waits, in ms (default 500, as
    /// in Sentinel; at most one hour).
    pub max_queueing_timeout_ms: u64,
    /// Limit per value of a request attribute; `None` limits the resource
    /// as a whole.
    pub param_item: Option<GatewayParamItem>,
}

impl Default for GatewayRule {
    /// A route rule with an empty name and a count of 0, every other field
    /// at Sentinel's default: what a codec reads a rule into.
    fn default() -> Self {
        GatewayRule::route("", 0.0)
    }
}

impl GatewayRule {
    /// A QPS rule rejecting past `count` per second on the route
    /// `resource`, every other field at its default.
    pub fn route(resource: impl Into<String>, count: f64) -> Self {
        GatewayRule {
            resource: resource.into(),
            resource_mode: ResourceMode::Route,
            grade: GatewayGrade::Qps,
            count,
            interval_sec: 1,
            control_behavior: GatewayBehavior::Reject,
            burst: 0,
            max_queueing_timeout_ms: 500,
            param_item: None,
        }
    }

    /// As [`route`](Self::route), on the API group `api`.
    pub fn api_group(api: impl Into<String>, count: f64) -> Self {
        GatewayRule {
            resource_mode: ResourceMode::ApiGroup,
            ..GatewayRule::route(api, count)
        }
    }

    /// The rule limiting per value of `item`.
    pub fn param_item(mut self, item: GatewayParamItem) -> Self {
        self.param_item = Some(item);
        self
    }
}

/// Where a parameter item reads its value (Sentinel's parse strategies).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParseStrategy {
    /// The client's IP address: the connection's peer, or a forwarded
    /// address when the peer is a trusted proxy (see
    /// `sentinel-flow-tower`'s `GatewayLayer::trusted_proxies`);
    /// IPv6 addresses grouped by prefix.
    #[default]
    ClientIp,
    /// The host the request names (the URI's, else the `Host` header's,
    /// without the port).
    Host,
    /// The header `field_name` (its first value, if it is text).
    Header,
    /// The query parameter `field_name` (its first value, percent-decoded).
    UrlParam,
    /// The cookie `field_name`.
    Cookie,
}

/// How a parameter item's pattern selects the values it limits.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ValueMatch {
    /// The value equals the pattern.
    #[default]
    Exact,
    /// The value starts with the pattern.
    Prefix,
    /// The whole value matches the regular expression (bounded by
    /// [`MAX_REGEX_BYTES`]).
    Regex,
    /// The value contains the pattern.
    Contains,
}

/// Which request attribute a gateway rule limits per value (Sentinel's
/// `GatewayParamFlowItem`).
///
/// Each value is limited on its own. With a `pattern`, only the values it
/// matches are limited; the others pass (as in Sentinel's converter, they
/// share one bucket whose count no traffic reaches). A request without the
/// attribute passes, as in Sentinel, unless `count_missing_as_one`: then
/// all such requests share one count, which keeps a client from escaping a
/// per-API-key limit by sending no key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GatewayParamItem {
    /// Where the value comes from.
    pub parse: ParseStrategy,
    /// The header, query parameter or cookie name (required for those;
    /// ignored otherwise). At most [`MAX_FIELD_NAME_LEN`] bytes whatever
    /// the strategy.
    pub field_name: Option<String>,
    /// Only values this matches are limited (at most
    /// [`MAX_PATTERN_LEN`] bytes); `None` or empty: every value.
    pub pattern: Option<String>,
    /// How `pattern` is matched.
    pub match_strategy: ValueMatch,
    /// Count requests without the attribute under one shared value
    /// (default off: they pass).
    pub count_missing_as_one: bool,
}

impl GatewayParamItem {
    fn of(parse: ParseStrategy, field_name: Option<String>) -> Self {
        GatewayParamItem {
            parse,
            field_name,
            pattern: None,
            match_strategy: ValueMatch::Exact,
            count_missing_as_one: false,
        }
    }

    /// Per client IP.
    pub fn client_ip() -> Self {
        GatewayParamItem::of(ParseStrategy::ClientIp, None)
    }

    /// Per requested host.
    pub fn host() -> Self {
        GatewayParamItem::of(ParseStrategy::Host, None)
    }

    /// Per value of the header `name`.
    pub fn header(name: impl Into<String>) -> Self {
        GatewayParamItem::of(ParseStrategy::Header, Some(name.into()))
    }

    /// Per value of the query parameter `name`.
    pub fn url_param(name: impl Into<String>) -> Self {
        GatewayParamItem::of(ParseStrategy::UrlParam, Some(name.into()))
    }

    /// Per value of the cookie `name`.
    pub fn cookie(name: impl Into<String>) -> Self {
        GatewayParamItem::of(ParseStrategy::Cookie, Some(name.into()))
    }

    /// Limits only the values `pattern` matches by `strategy`.
    pub fn pattern(mut self, pattern: impl Into<String>, strategy: ValueMatch) -> Self {
        self.pattern = Some(pattern.into());
        self.match_strategy = strategy;
        self
    }

    /// Counts requests without the attribute under one shared value.
    pub fn count_missing_as_one(mut self, on: bool) -> Self {
        self.count_missing_as_one = on;
        self
    }
}
