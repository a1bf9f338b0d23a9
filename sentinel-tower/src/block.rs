//! What a blocked request gets back: `429` for HTTP, a trailers-only
//! `RESOURCE_EXHAUSTED`/`UNAVAILABLE` for gRPC.

use std::cell::RefCell;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderName, RETRY_AFTER};
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use sentinel_flow_core::degrade::DegradeRule;
use sentinel_flow_core::flow::FlowQuota;
use sentinel_flow_core::flow::{FlowGrade, FlowRule};
use sentinel_flow_core::gateway::{GatewayGrade, GatewayRule};
use sentinel_flow_core::param_flow::{ParamFlowGrade, ParamFlowRule};
use sentinel_flow_core::{BlockError, BlockKind};

use crate::headers::{self, HeaderSettings};

/// A user function making the HTTP response of a blocked request.
pub(crate) type BlockFn = Arc<dyn Fn(&BlockError) -> Response<String> + Send + Sync>;
/// A user function deciding which responses are errors.
pub(crate) type ErrorFn = Arc<dyn Fn(StatusCode, &HeaderMap) -> bool + Send + Sync>;

/// gRPC status `RESOURCE_EXHAUSTED`.
const GRPC_RESOURCE_EXHAUSTED: &str = "8";
/// gRPC status `UNAVAILABLE`.
const GRPC_UNAVAILABLE: &str = "14";
/// gRPC status `INVALID_ARGUMENT`.
const GRPC_INVALID_ARGUMENT: &str = "3";

/// What a request whose origin header appears more than once is told.
const DUPLICATE_ORIGIN: &str = "duplicated origin header";

/// The seconds after which a blocked request may succeed, for a
/// `Retry-After` header; `None` where waiting is no remedy or no time is
/// known.
///
/// - flow, QPS grade: the rule's statistics window, rounded up to whole
///   seconds (1 for the default window), including rate limiters whose
///   queue was full;
/// - flow, concurrency grade: `None` (it depends on other calls finishing);
/// - degrade (open breaker): the rule's `time_window_sec`, after which the
///   breaker lets a probe through;
/// - system: 1 (its limits are per-second measures);
/// - hot parameter, QPS grade: the rule's `duration_in_sec`;
/// - gateway, QPS grade: the rule's `interval_sec` (concurrency: `None`);
/// - authority and custom slots: `None` (retrying does not help).
///
/// ```
/// use sentinel_flow_core::{BlockError, BlockKind};
/// use sentinel_flow_core::flow::FlowRule;
/// use std::sync::Arc;
///
/// let block = BlockError::by_rule(BlockKind::Flow, Arc::new(FlowRule::new("GET:/a", 10.0)));
/// assert_eq!(sentinel_flow_tower::retry_after(&block), Some(1));
/// ```
pub fn retry_after(block: &BlockError) -> Option<u64> {
    match block.kind() {
        BlockKind::Flow => match block.rule_as::<FlowRule>() {
            Some(rule) if rule.grade == FlowGrade::Qps => {
                Some(rule.stat_interval_ms.div_ceil(1000).max(1))
            }
            Some(_) => None,
            None => Some(1),
        },
        BlockKind::Degrade => Some(
            block
                .rule_as::<DegradeRule>()
                .map_or(1, |rule| u64::from(rule.time_window_sec).max(1)),
        ),
        BlockKind::System => Some(1),
        BlockKind::ParamFlow => match block.rule_as::<ParamFlowRule>() {
            Some(rule) if rule.grade == ParamFlowGrade::Qps => Some(rule.duration_in_sec.max(1)),
            Some(_) => None,
            None => Some(1),
        },
        BlockKind::Gateway => match block.rule_as::<GatewayRule>() {
            Some(rule) if rule.grade == GatewayGrade::Qps => Some(rule.interval_sec.max(1)),
            Some(_) => None,
            None => Some(1),
        },
        _ => None,
    }
}

/// Whether a request or response speaks gRPC (`content-type:
/// application/grpc…`). Asked of every response: a head of a few fields
/// is scanned (comparing a standard name is one compare), which costs
/// less than hashing the name for a lookup.
#[inline]
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    let content_type = if headers.keys_len() <= 4 {
        headers
            .iter()
            .find_map(|(name, value)| (*name == CONTENT_TYPE).then_some(value))
    } else {
        headers.get(CONTENT_TYPE)
    };
    content_type.is_some_and(|value| value.as_bytes().starts_with(b"application/grpc"))
}

/// What a blocked request's response is made from, besides the block.
pub(crate) struct BlockReply<'a> {
    /// The request speaks gRPC.
    pub(crate) grpc: bool,
    /// The request accepts JSON (and not a user's builder).
    pub(crate) json: bool,
    /// The quota of the QPS flow rule that blocked, for the headers.
    pub(crate) quota: Option<FlowQuota>,
    pub(crate) headers: HeaderSettings,
    pub(crate) custom: Option<&'a BlockFn>,
}

/// The response to a blocked request.
pub(crate) fn blocked_response(block: &BlockError, reply: BlockReply<'_>) -> Response<Bytes> {
    if reply.grpc {
        return grpc_response(block);
    }
    match reply.custom {
        Some(custom) => {
            let mut response = custom(block).map(Bytes::from);
            if let Some(quota) = &reply.quota {
                // The user's own headers win.
                headers::write(response.headers_mut(), quota, true, true, reply.headers);
            }
            response
        }
        None => http_response(block, reply.json, reply.quota.as_ref(), reply.headers),
    }
}

/// `429 Too Many Requests`, `blocked by <kind>` (or the JSON body),
/// `Retry-After` where [`retry_after`] gives one, and the rate-limit
/// headers of `quota`.
fn http_response(
    block: &BlockError,
    json: bool,
    quota: Option<&FlowQuota>,
    settings: HeaderSettings,
) -> Response<Bytes> {
    let retry = retry_after(block);
    let body = if json {
        // The exact time to the window's next bucket edge when a QPS rule
        // blocked, else Retry-After's seconds.
        let retry_ms = quota.map(|q| q.reset_ms).or(retry.map(|s| s * 1_000));
        json_body(block.kind().as_str(), block.resource(), retry_ms)
    } else {
        Bytes::from_static(blocked_text(block.kind()).as_bytes())
    };
    let head = Head {
        json,
        retry,
        stated: quota.map(|quota| headers::Stated::of(quota, true)),
        settings,
    };
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    *response.headers_mut() = head.headers();
    response
}

/// `{"error":<kind>,"resource":<name>,"retry_after_ms":<ms or null>}`,
/// written in one buffer (each value escaped by `serde_json`), not built
/// as a `serde_json::Value` of three keys first.
fn json_body(kind: &str, resource: &str, retry_ms: Option<u64>) -> Bytes {
    const WRITES: &str = "a string or a number serializes";
    let mut out = Vec::with_capacity(64 + resource.len());
    out.extend_from_slice(b"{\"error\":");
    serde_json::to_writer(&mut out, kind).expect(WRITES);
    out.extend_from_slice(b",\"resource\":");
    serde_json::to_writer(&mut out, resource).expect(WRITES);
    out.extend_from_slice(b",\"retry_after_ms\":");
    serde_json::to_writer(&mut out, &retry_ms).expect(WRITES);
    out.push(b'}');
    Bytes::from(out)
}

/// What decides the headers of a default 429: the body's type,
/// `Retry-After`, the quota's figures and which rate-limit headers are
/// on. A refused request's are most often the same as the one before it
/// on its thread (one rule, one window edge a second).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Head {
    json: bool,
    retry: Option<u64>,
    stated: Option<headers::Stated>,
    settings: HeaderSettings,
}

thread_local! {
    /// The last default 429's headers this thread built, with what
    /// decided them: the next one with the same copies them (two
    /// allocations, no header hashed or value built).
    static LAST_HEAD: headers::Last<Head, HeaderMap> = const { RefCell::new(None) };
}

impl Head {
    /// The headers of a 429 with this head, copied from this thread's
    /// last one when that had the same.
    fn headers(self) -> HeaderMap {
        headers::last_or(&LAST_HEAD, self, || self.build())
    }

    fn build(self) -> HeaderMap {
        let mut headers = HeaderMap::with_capacity(4);
        let content_type = if self.json {
            "application/json"
        } else {
            "text/plain; charset=utf-8"
        };
        headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
        if let Some(seconds) = self.retry {
            let value = match seconds {
                // The common case without an allocation.
                1 => HeaderValue::from_static("1"),
                seconds => HeaderValue::from(seconds),
            };
            headers.insert(RETRY_AFTER, value);
        }
        if let Some(stated) = self.stated {
            headers::write_stated(&mut headers, stated, false, self.settings);
        }
        headers
    }
}

/// `blocked by <kind>`, without formatting.
fn blocked_text(kind: BlockKind) -> &'static str {
    match kind {
        BlockKind::Flow => "blocked by flow",
        BlockKind::Degrade => "blocked by degrade",
        BlockKind::System => "blocked by system",
        BlockKind::Authority => "blocked by authority",
        BlockKind::ParamFlow => "blocked by param_flow",
        _ => "blocked by sentinel",
    }
}

/// Whether a request's `Accept` header names JSON (`application/json` or
/// a `+json` type): then a block is told in JSON.
pub(crate) fn accepts_json(headers: &HeaderMap) -> bool {
    headers.get_all(ACCEPT).iter().any(|value| {
        value.to_str().is_ok_and(|value| {
            value.split(',').any(|range| {
                let media = range.split(';').next().unwrap_or("").trim();
                media.eq_ignore_ascii_case("application/json")
                    || media.len() > 5 && media[media.len() - 5..].eq_ignore_ascii_case("+json")
            })
        })
    })
}

/// A trailers-only gRPC error: HTTP 200, `grpc-status` 8
/// (`RESOURCE_EXHAUSTED`), or 14 (`UNAVAILABLE`) for an open breaker.
fn grpc_response(block: &BlockError) -> Response<Bytes> {
    let status = match block.kind() {
        BlockKind::Degrade => GRPC_UNAVAILABLE,
        _ => GRPC_RESOURCE_EXHAUSTED,
    };
    let mut response = Response::new(Bytes::new());
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    headers.insert("grpc-status", HeaderValue::from_static(status));
    headers.insert(
        "grpc-message",
        HeaderValue::from_static(blocked_text(block.kind())),
    );
    response
}

/// The answer to a request whose origin header appears more than once:
/// `400 Bad Request`, `duplicated origin header`; for gRPC, HTTP 200 with
/// `grpc-status` 3 (`INVALID_ARGUMENT`). No `Retry-After`: the same
/// request is refused again.
pub(crate) fn duplicate_origin_response(grpc: bool) -> Response<Bytes> {
    let mut response = Response::new(Bytes::new());
    let headers = response.headers_mut();
    if grpc {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert(
            "grpc-status",
            HeaderValue::from_static(GRPC_INVALID_ARGUMENT),
        );
        headers.insert("grpc-message", HeaderValue::from_static(DUPLICATE_ORIGIN));
    } else {
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        *response.status_mut() = StatusCode::BAD_REQUEST;
        *response.body_mut() = Bytes::from_static(DUPLICATE_ORIGIN.as_bytes());
    }
    response
}

static GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");

/// The default error classifier: a 5xx status, or a `grpc-status` header
/// other than `0` (a trailers-only gRPC error).
pub(crate) fn default_is_error(status: StatusCode, headers: &HeaderMap) -> bool {
    status.is_server_error()
        || headers
            .get(&GRPC_STATUS)
            .is_some_and(|value| value.as_bytes() != b"0")
}

/// Which responses count as errors of the entry: the default classifier
/// (`None`) costs no reference count per request; a user's does.
#[derive(Clone)]
pub(crate) struct ErrorCheck(pub(crate) Option<ErrorFn>);

impl ErrorCheck {
    /// `grpc`: the response is a gRPC one; the default classifier looks
    /// for `grpc-status` only then.
    #[inline]
    pub(crate) fn is_error(&self, status: StatusCode, headers: &HeaderMap, grpc: bool) -> bool {
        match &self.0 {
            None => status.is_server_error() || grpc && default_is_error(status, headers),
            Some(is_error) => is_error(status, headers),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
    use sentinel_flow_core::degrade::DegradeGrade;

    use super::*;

    fn block(kind: BlockKind, rule: impl sentinel_flow_core::Rule) -> BlockError {
        BlockError::by_rule(kind, Arc::new(rule))
    }

    #[test]
    fn retry_after_follows_the_rule() {
        let mut qps = FlowRule::new("r", 5.0);
        qps.stat_interval_ms = 2_500;
        assert_eq!(retry_after(&block(BlockKind::Flow, qps)), Some(3));
        let mut threads = FlowRule::new("r", 5.0);
        threads.grade = FlowGrade::Concurrency;
        assert_eq!(retry_after(&block(BlockKind::Flow, threads)), None);
        let mut breaker = DegradeRule::new("r", DegradeGrade::ErrorRatio, 0.5);
        breaker.time_window_sec = 30;
        assert_eq!(retry_after(&block(BlockKind::Degrade, breaker)), Some(30));
        let origins = AuthorityRule::new("r", AuthorityStrategy::White, ["a"]);
        assert_eq!(retry_after(&block(BlockKind::Authority, origins)), None);
    }

    #[test]
    fn an_open_breaker_is_unavailable_to_grpc_clients() {
        let breaker = DegradeRule::new("r", DegradeGrade::ErrorCount, 1.0);
        let reply = BlockReply {
            grpc: true,
            json: false,
            quota: None,
            headers: HeaderSettings::default(),
            custom: None,
        };
        let response = blocked_response(&block(BlockKind::Degrade, breaker), reply);
        assert_eq!(response.headers()["grpc-status"], "14");
        assert_eq!(response.headers()["grpc-message"], "blocked by degrade");
        assert!(response.body().is_empty());
    }

    #[test]
    fn each_429_has_the_headers_of_its_own_block_whatever_came_before() {
        let quota = |limit, reset_ms| FlowQuota {
            limit,
            window_ms: 1_000,
            remaining: 7,
            reset_ms,
        };
        let reply = |json, quota, legacy| BlockReply {
            grpc: false,
            json,
            quota,
            headers: HeaderSettings {
                legacy,
                ..HeaderSettings::default()
            },
            custom: None,
        };
        let qps = || block(BlockKind::Flow, FlowRule::new("r", 5.0));
        let mut slow = FlowRule::new("r", 5.0);
        slow.stat_interval_ms = 2_500;
        let mut threads = FlowRule::new("r", 5.0);
        threads.grade = FlowGrade::Concurrency;
        let head = |response: Response<Bytes>| {
            let mut head: Vec<String> = response
                .headers()
                .iter()
                .map(|(name, value)| format!("{name}: {}", value.to_str().unwrap()))
                .collect();
            head.sort();
            head.join(" | ")
        };
        // Each block twice in a row (the second copies the first's
        // headers), then the next, which differs in one thing.
        let cases: [(BlockError, BlockReply<'_>, &str); 7] = [
            (
                qps(),
                reply(false, Some(quota(5, 300)), false),
                "content-type: text/plain; charset=utf-8 | ratelimit-policy: \"default\";q=5;w=1 | ratelimit: \"default\";r=0;t=1 | retry-after: 1",
            ),
            (
                qps(),
                reply(false, Some(quota(6, 300)), false),
                "content-type: text/plain; charset=utf-8 | ratelimit-policy: \"default\";q=6;w=1 | ratelimit: \"default\";r=0;t=1 | retry-after: 1",
            ),
            (
                qps(),
                reply(false, Some(quota(6, 1_300)), false),
                "content-type: text/plain; charset=utf-8 | ratelimit-policy: \"default\";q=6;w=1 | ratelimit: \"default\";r=0;t=2 | retry-after: 1",
            ),
            (
                qps(),
                reply(true, Some(quota(6, 1_300)), false),
                "content-type: application/json | ratelimit-policy: \"default\";q=6;w=1 | ratelimit: \"default\";r=0;t=2 | retry-after: 1",
            ),
            (
                qps(),
                reply(true, Some(quota(6, 1_300)), true),
                "content-type: application/json | ratelimit-policy: \"default\";q=6;w=1 | ratelimit: \"default\";r=0;t=2 | retry-after: 1 | x-ratelimit-limit: 6 | x-ratelimit-remaining: 0 | x-ratelimit-reset: 2",
            ),
            (
                block(BlockKind::Flow, slow),
                reply(true, Some(quota(6, 1_300)), true),
                "content-type: application/json | ratelimit-policy: \"default\";q=6;w=1 | ratelimit: \"default\";r=0;t=2 | retry-after: 3 | x-ratelimit-limit: 6 | x-ratelimit-remaining: 0 | x-ratelimit-reset: 2",
            ),
            (
                block(BlockKind::Flow, threads),
                reply(true, None, true),
                "content-type: application/json",
            ),
        ];
        for (block, reply, expected) in cases {
            for _ in 0..2 {
                let reply = BlockReply { ..reply };
                assert_eq!(head(blocked_response(&block, reply)), expected);
            }
        }
    }

    #[test]
    fn the_json_body_escapes_what_it_quotes() {
        for (kind, resource, retry_ms) in [
            ("flow", "GET:/orders/{id}", Some(350)),
            ("my \"kind\"", "GET:/a\"b\\c\n\u{1}é", None),
        ] {
            let body = json_body(kind, resource, retry_ms);
            let read: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(
                read,
                serde_json::json!({
                    "error": kind,
                    "resource": resource,
                    "retry_after_ms": retry_ms,
                })
            );
        }
        assert_eq!(
            json_body("flow", "r", None),
            r#"{"error":"flow","resource":"r","retry_after_ms":null}"#
        );
    }

    #[test]
    fn json_is_told_by_the_accept_header() {
        let accept = |value: &'static str| {
            let mut headers = HeaderMap::new();
            headers.insert(ACCEPT, HeaderValue::from_static(value));
            accepts_json(&headers)
        };
        assert!(accept("application/json"));
        assert!(accept("text/html, Application/JSON;q=0.9"));
        assert!(accept("application/problem+json"));
        assert!(!accept("text/plain"));
        assert!(!accept("*/*"));
        assert!(!accepts_json(&HeaderMap::new()));
    }

    #[test]
    fn grpc_is_told_by_the_content_type_in_small_and_large_heads() {
        let mut headers = HeaderMap::new();
        assert!(!is_grpc(&headers));
        headers.insert("x-a", HeaderValue::from_static("1"));
        headers.append("x-a", HeaderValue::from_static("2"));
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/grpc+proto"),
        );
        assert!(is_grpc(&headers));
        for i in 0..6 {
            headers.insert(
                HeaderName::from_bytes(format!("x-{i}").as_bytes()).unwrap(),
                HeaderValue::from_static("v"),
            );
        }
        assert!(headers.keys_len() > 4);
        assert!(is_grpc(&headers));
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert!(!is_grpc(&headers));
        let mut small = HeaderMap::new();
        small.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert!(!is_grpc(&small));
    }

    #[test]
    fn errors_are_5xx_and_non_ok_grpc_statuses() {
        let mut headers = HeaderMap::new();
        assert!(!default_is_error(StatusCode::NOT_FOUND, &headers));
        assert!(default_is_error(StatusCode::BAD_GATEWAY, &headers));
        headers.insert("grpc-status", HeaderValue::from_static("0"));
        assert!(!default_is_error(StatusCode::OK, &headers));
        headers.insert("grpc-status", HeaderValue::from_static("13"));
        assert!(default_is_error(StatusCode::OK, &headers));
    }
}
