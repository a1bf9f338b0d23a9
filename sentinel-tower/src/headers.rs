//! Rate-limit headers: the IETF fields (draft-ietf-httpapi-ratelimit-headers,
//! `RateLimit-Policy` and `RateLimit`) and, on request, the legacy
//! `X-RateLimit-*` trio, from a QPS flow rule's [`FlowQuota`].

use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};
use sentinel_core::flow::FlowQuota;

/// The policy name in the IETF fields.
const POLICY: &str = "default";

static RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
static RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
static X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
static X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
static X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// Which rate-limit headers a layer writes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeaderSettings {
    /// `RateLimit-Policy` and `RateLimit` on 429s (default on).
    pub(crate) ietf: bool,
    /// `X-RateLimit-Limit`, `-Remaining`, `-Reset` as well (default off).
    pub(crate) legacy: bool,
    /// On admitted responses too, not only on 429s (default off: it costs
    /// a rule-set read and a window sum per request).
    pub(crate) on_admitted: bool,
}

impl Default for HeaderSettings {
    fn default() -> Self {
        HeaderSettings {
            ietf: true,
            legacy: false,
            on_admitted: false,
        }
    }
}

impl HeaderSettings {
    /// Whether any header is written, i.e. whether a quota is worth reading.
    pub(crate) fn any(&self) -> bool {
        self.ietf || self.legacy
    }
}

/// Whole seconds, rounded up (a client that waits `t` seconds is past the
/// edge), at least 1.
fn seconds(ms: u64) -> u64 {
    ms.div_ceil(1_000).max(1)
}

/// Writes the headers of `quota` into `headers`, keeping any of them the
/// response already has (a user's block response may set its own).
/// `blocked`: the rule refused this request, so nothing remains now.
pub(crate) fn write(
    headers: &mut HeaderMap,
    quota: &FlowQuota,
    blocked: bool,
    settings: HeaderSettings,
) {
    let window = seconds(quota.window_ms);
    let remaining = if blocked { 0 } else { quota.remaining };
    let reset = seconds(quota.reset_ms);
    let mut put = |name: &HeaderName, value: String| {
        if !headers.contains_key(name)
            && let Ok(value) = HeaderValue::try_from(value)
        {
            headers.insert(name.clone(), value);
        }
    };
    if settings.ietf {
        put(
            &RATELIMIT_POLICY,
            format!("\"{POLICY}\";q={};w={window}", quota.limit),
        );
        put(&RATELIMIT, format!("\"{POLICY}\";r={remaining};t={reset}"));
    }
    if settings.legacy {
        put(&X_LIMIT, quota.limit.to_string());
        put(&X_REMAINING, remaining.to_string());
        put(&X_RESET, reset.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_follow_the_draft_syntax() {
        let quota = sentinel_quota(200, 1_000, 17, 250);
        let mut headers = HeaderMap::new();
        let all = HeaderSettings {
            ietf: true,
            legacy: true,
            on_admitted: true,
        };
        write(&mut headers, &quota, false, all);
        assert_eq!(headers["ratelimit-policy"], "\"default\";q=200;w=1");
        assert_eq!(headers["ratelimit"], "\"default\";r=17;t=1");
        assert_eq!(headers["x-ratelimit-limit"], "200");
        assert_eq!(headers["x-ratelimit-remaining"], "17");
        assert_eq!(headers["x-ratelimit-reset"], "1");
        let mut blocked = HeaderMap::new();
        blocked.insert("ratelimit-policy", HeaderValue::from_static("mine"));
        write(&mut blocked, &sentinel_quota(9, 3_000, 4, 1_001), true, all);
        assert_eq!(
            blocked["ratelimit-policy"], "mine",
            "a header already set is kept"
        );
        assert_eq!(blocked["ratelimit"], "\"default\";r=0;t=2");
        assert_eq!(blocked["x-ratelimit-reset"], "2");
    }

    fn sentinel_quota(limit: u64, window_ms: u64, remaining: u64, reset_ms: u64) -> FlowQuota {
        FlowQuota {
            limit,
            window_ms,
            remaining,
            reset_ms,
        }
    }
}
