//! Rate-limit headers: the IETF fields (draft-ietf-httpapi-ratelimit-headers,
//! `RateLimit-Policy` and `RateLimit`) and, on request, the legacy
//! `X-RateLimit-*` trio, from a QPS flow rule's [`FlowQuota`].

use std::cell::RefCell;
use std::thread::LocalKey;

use http::HeaderMap;
use http::header::{HeaderName, HeaderValue};
use sentinel_flow_core::flow::FlowQuota;

static RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
static RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
static X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
static X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
static X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// Which rate-limit headers a layer writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

/// The figures the headers state of a quota: what the rule admits per
/// window, its window in whole seconds, what is left, and the seconds to
/// the reset. Two quotas with the same figures give the same headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stated {
    limit: u64,
    window: u64,
    remaining: u64,
    reset: u64,
}

impl Stated {
    /// The figures of `quota`; `blocked`: the rule refused this request,
    /// so nothing remains now.
    pub(crate) fn of(quota: &FlowQuota, blocked: bool) -> Self {
        Stated {
            limit: quota.limit,
            window: seconds(quota.window_ms),
            remaining: if blocked { 0 } else { quota.remaining },
            reset: seconds(quota.reset_ms),
        }
    }
}

/// Writes the headers of `quota` into `headers`; with `keep`, keeps any
/// of them the response already has (a user's block response may set its
/// own). `blocked`: the rule refused this request, so nothing remains now.
pub(crate) fn write(
    headers: &mut HeaderMap,
    quota: &FlowQuota,
    blocked: bool,
    keep: bool,
    settings: HeaderSettings,
) {
    write_stated(headers, Stated::of(quota, blocked), keep, settings);
}

/// Writes the headers stating `stated` (see [`write`]).
pub(crate) fn write_stated(
    headers: &mut HeaderMap,
    stated: Stated,
    keep: bool,
    settings: HeaderSettings,
) {
    let Stated {
        limit,
        window,
        remaining,
        reset,
    } = stated;
    let mut put = |name: &HeaderName, value: &dyn Fn() -> HeaderValue| {
        if !keep || !headers.contains_key(name) {
            headers.insert(name.clone(), value());
        }
    };
    if settings.ietf {
        put(&RATELIMIT_POLICY, &|| policy(limit, window));
        put(&RATELIMIT, &|| {
            value(&[
                Part::Text(POLICY_R),
                Part::Number(remaining),
                Part::Text(";t="),
                Part::Number(reset),
            ])
        });
    }
    if settings.legacy {
        put(&X_LIMIT, &|| value(&[Part::Number(limit)]));
        put(&X_REMAINING, &|| value(&[Part::Number(remaining)]));
        put(&X_RESET, &|| value(&[Part::Number(reset)]));
    }
}

/// A thread's last value of a kind, with the key that decided it.
pub(crate) type Last<K, V> = RefCell<Option<(K, V)>>;

/// The value for `key`: this thread's last one (in `last`) when its key
/// was the same, else `build`'s, kept for the next call.
#[inline]
pub(crate) fn last_or<K: PartialEq + Copy, V: Clone>(
    last: &'static LocalKey<Last<K, V>>,
    key: K,
    build: impl Fn() -> V,
) -> V {
    last.try_with(|last| {
        let mut last = last.try_borrow_mut().ok()?;
        match &*last {
            Some((held, value)) if *held == key => Some(value.clone()),
            _ => {
                let value = build();
                *last = Some((key, value.clone()));
                Some(value)
            }
        }
    })
    .ok()
    .flatten()
    .unwrap_or_else(build)
}

thread_local! {
    /// The last `RateLimit-Policy` value this thread built, with its limit
    /// and window: the 429s of one rule share it (a reference count each,
    /// not a new value joined and checked byte by byte).
    static POLICY: Last<(u64, u64), HeaderValue> = const { RefCell::new(None) };
}

/// `"default";q=<limit>;w=<window>`, from this thread's last one when the
/// figures are the same.
fn policy(limit: u64, window: u64) -> HeaderValue {
    last_or(&POLICY, (limit, window), || {
        value(&[
            Part::Text(POLICY_Q),
            Part::Number(limit),
            Part::Text(";w="),
            Part::Number(window),
        ])
    })
}

const POLICY_Q: &str = "\"default\";q=";
const POLICY_R: &str = "\"default\";r=";

/// A piece of a header value.
enum Part<'a> {
    Text(&'a str),
    Number(u64),
}

/// A header value joined from `parts` (ASCII digits and the texts above,
/// always valid), without the formatting machinery: a 429 is built on
/// every refused request, and should cost little more than a pass.
fn value(parts: &[Part<'_>]) -> HeaderValue {
    // The usual `RateLimit` of a 429 (nothing left, the next second):
    // without an allocation.
    if let [
        Part::Text(POLICY_R),
        Part::Number(0),
        Part::Text(";t="),
        Part::Number(1),
    ] = parts
    {
        return HeaderValue::from_static("\"default\";r=0;t=1");
    }
    let mut bytes = Vec::with_capacity(32);
    for part in parts {
        match part {
            Part::Text(text) => bytes.extend_from_slice(text.as_bytes()),
            Part::Number(n) => push_number(&mut bytes, *n),
        }
    }
    HeaderValue::from_maybe_shared(bytes::Bytes::from(bytes))
        .expect("digits and quoted ASCII make a valid header value")
}

fn push_number(bytes: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    bytes.extend_from_slice(&digits[at..]);
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
        write(&mut headers, &quota, false, false, all);
        assert_eq!(headers["ratelimit-policy"], "\"default\";q=200;w=1");
        assert_eq!(headers["ratelimit"], "\"default\";r=17;t=1");
        assert_eq!(headers["x-ratelimit-limit"], "200");
        assert_eq!(headers["x-ratelimit-remaining"], "17");
        assert_eq!(headers["x-ratelimit-reset"], "1");
        let mut blocked = HeaderMap::new();
        blocked.insert("ratelimit-policy", HeaderValue::from_static("mine"));
        write(
            &mut blocked,
            &sentinel_quota(9, 3_000, 4, 1_001),
            true,
            true,
            all,
        );
        assert_eq!(
            blocked["ratelimit-policy"], "mine",
            "a header already set is kept"
        );
        assert_eq!(blocked["ratelimit"], "\"default\";r=0;t=2");
        assert_eq!(blocked["x-ratelimit-reset"], "2");
        let mut big = HeaderMap::new();
        write(
            &mut big,
            &sentinel_quota(u64::MAX, 1_000, 0, 1),
            false,
            false,
            all,
        );
        assert_eq!(big["x-ratelimit-limit"], u64::MAX.to_string().as_str());
        assert_eq!(big["ratelimit"], "\"default\";r=0;t=1");
    }

    #[test]
    fn the_policy_value_follows_the_figures_across_calls() {
        let all = HeaderSettings::default();
        for (limit, window_ms, expect) in [
            (200, 1_000, "\"default\";q=200;w=1"),
            (200, 1_000, "\"default\";q=200;w=1"),
            (5, 1_000, "\"default\";q=5;w=1"),
            (5, 3_000, "\"default\";q=5;w=3"),
            (200, 1_000, "\"default\";q=200;w=1"),
        ] {
            let mut headers = HeaderMap::new();
            write(
                &mut headers,
                &sentinel_quota(limit, window_ms, 0, 10),
                true,
                false,
                all,
            );
            assert_eq!(headers["ratelimit-policy"], expect);
        }
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
