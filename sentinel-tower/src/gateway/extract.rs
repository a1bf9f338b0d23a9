//! A request's arguments for one resource: each rule's value, read from
//! the request and passed through its item's pattern.

use std::borrow::Cow;

use http::header::{COOKIE, HOST};
use http::{HeaderMap, Uri};
use sentinel_flow_core::ParamValue;
use sentinel_flow_core::gateway::{ParseStrategy, constant, missing, not_matched};

use super::convert::{ArgSource, Item};

/// What the arguments are read from: the request head and the client's
/// key, computed at most once per request.
pub(crate) struct RequestView<'r, F> {
    pub(crate) uri: &'r Uri,
    pub(crate) headers: &'r HeaderMap,
    pub(crate) client: ClientKey<'r, F>,
}

/// The client's key (its address, grouped by prefix, as text), found
/// when a rule first reads it and kept for the others (several rules and
/// resources may read it). `find` is a type parameter, not a trait
/// object, so that it is inlined where it is read; the key is a plain
/// field filled in line, where a `OnceCell` would fill it out of line.
pub(crate) struct ClientKey<'r, F> {
    found: Option<Option<ParamValue>>,
    find: &'r F,
}

impl<'r, F: Fn() -> Option<ParamValue>> ClientKey<'r, F> {
    pub(crate) fn new(find: &'r F) -> Self {
        ClientKey { found: None, find }
    }

    #[inline(always)]
    pub(crate) fn get(&mut self) -> Option<&ParamValue> {
        self.found.get_or_insert_with(self.find).as_ref()
    }
}

/// Appends the arguments of `sources` to `args`.
pub(crate) fn arguments<F: Fn() -> Option<ParamValue>>(
    sources: &[ArgSource],
    view: &mut RequestView<'_, F>,
    args: &mut Vec<ParamValue>,
) {
    args.extend(sources.iter().map(|source| source_argument(source, view)));
}

/// The argument of one source.
#[inline]
pub(crate) fn source_argument<F: Fn() -> Option<ParamValue>>(
    source: &ArgSource,
    view: &mut RequestView<'_, F>,
) -> ParamValue {
    match source {
        ArgSource::Constant => constant(),
        ArgSource::Item(item) => argument(item, view),
    }
}

/// Whether `source` passes the client's key unchanged (a client-IP item
/// without a pattern): its argument is then the key itself, borrowed, or,
/// for a request without one, [`without_client_key`].
#[inline(always)]
pub(crate) fn is_client_key(source: &ArgSource) -> bool {
    matches!(source, ArgSource::Item(item)
        if item.parse == ParseStrategy::ClientIp && item.matcher.is_any())
}

/// The argument of `source` (a client-key source) for a request without a
/// client key.
pub(crate) fn without_client_key(source: &ArgSource) -> ParamValue {
    match source {
        ArgSource::Constant => constant(),
        ArgSource::Item(item) if item.missing_as_one => missing(),
        ArgSource::Item(_) => not_matched(),
    }
}

fn argument<F: Fn() -> Option<ParamValue>>(
    item: &Item,
    view: &mut RequestView<'_, F>,
) -> ParamValue {
    let value = match item.parse {
        ParseStrategy::ClientIp => match view.client.get() {
            Some(key) if item.matcher.is_any() => return key.clone(),
            Some(key) => {
                return match key.as_str() {
                    Some(text) if item.matcher.matches(text) => key.clone(),
                    _ => not_matched(),
                };
            }
            None => None,
        },
        ParseStrategy::Host => host(view.uri, view.headers).map(Cow::Borrowed),
        ParseStrategy::Header => item
            .header
            .as_ref()
            .and_then(|name| view.headers.get(name))
            .and_then(|value| value.to_str().ok())
            .map(Cow::Borrowed),
        ParseStrategy::UrlParam => query_param(view.uri.query(), &item.field),
        ParseStrategy::Cookie => cookie(view.headers, &item.field).map(Cow::Borrowed),
        // A strategy this layer does not read: the value is missing.
        _ => None,
    };
    match value {
        Some(value) if item.matcher.matches(&value) => ParamValue::from(value.as_ref()),
        Some(_) => not_matched(),
        None if item.missing_as_one => missing(),
        None => not_matched(),
    }
}

/// The host the request names, without its port.
fn host<'r>(uri: &'r Uri, headers: &'r HeaderMap) -> Option<&'r str> {
    if let Some(host) = uri.host() {
        return Some(host);
    }
    let host = headers.get(HOST)?.to_str().ok()?;
    let host = match host.strip_prefix('[') {
        // An IPv6 literal: `[::1]:8080`.
        Some(rest) => return rest.split_once(']').map(|(addr, _)| addr),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    (!host.is_empty()).then_some(host)
}

/// The first value of the query parameter `name`, percent-decoded (`+` is
/// a space, as in a form).
fn query_param<'q>(query: Option<&'q str>, name: &str) -> Option<Cow<'q, str>> {
    form_urlencoded::parse(query?.as_bytes())
        .find(|(key, _)| key == name)
        .map(|(_, value)| value)
}

/// The value of the cookie `name` (the first one, over every `Cookie`
/// header), without its quotes.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|line| line.split(';'))
        .find_map(|pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key.trim() == name).then(|| value.trim().trim_matches('"'))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sentinel_flow_core::gateway::{ValueMatch, ValueMatcher};

    fn item(
        parse: ParseStrategy,
        field: &str,
        pattern: Option<&str>,
        missing_as_one: bool,
    ) -> Item {
        Item {
            parse,
            header: (parse == ParseStrategy::Header).then(|| field.parse().unwrap()),
            field: field.into(),
            matcher: ValueMatcher::new(pattern, ValueMatch::Exact).unwrap(),
            missing_as_one,
        }
    }

    fn value(item: &Item, request: http::Request<()>) -> ParamValue {
        let (parts, ()) = request.into_parts();
        let client = || Some(ParamValue::from("192.0.2.1"));
        argument(
            item,
            &mut RequestView {
                uri: &parts.uri,
                headers: &parts.headers,
                client: ClientKey::new(&client),
            },
        )
    }

    #[test]
    fn values_are_read_from_each_place() {
        let request = || {
            http::Request::get("/a?key=x%20y&key=second&plus=a+b")
                .header("host", "example.com:8080")
                .header("x-api-key", "k1")
                .header("cookie", "a=1; session=\"s2\"")
                .body(())
                .unwrap()
        };
        let read = |parse, field| value(&item(parse, field, None, false), request());
        assert_eq!(read(ParseStrategy::UrlParam, "key").as_str(), Some("x y"));
        assert_eq!(read(ParseStrategy::UrlParam, "plus").as_str(), Some("a b"));
        assert_eq!(
            read(ParseStrategy::Header, "x-api-key").as_str(),
            Some("k1")
        );
        assert_eq!(read(ParseStrategy::Cookie, "session").as_str(), Some("s2"));
        assert_eq!(read(ParseStrategy::Host, "").as_str(), Some("example.com"));
        assert_eq!(
            read(ParseStrategy::ClientIp, "").as_str(),
            Some("192.0.2.1")
        );
        let patterned = item(ParseStrategy::ClientIp, "", Some("192.0.2.1"), false);
        assert_eq!(value(&patterned, request()).as_str(), Some("192.0.2.1"));
        let outside = item(ParseStrategy::ClientIp, "", Some("192.0.2.2"), false);
        assert_eq!(value(&outside, request()), not_matched());
    }

    #[test]
    fn outside_the_pattern_and_missing_pass_unless_missing_counts_as_one() {
        let request = || {
            http::Request::get("/a")
                .header("x-k", "b")
                .body(())
                .unwrap()
        };
        let limited = item(ParseStrategy::Header, "x-k", Some("a"), false);
        assert_eq!(value(&limited, request()), not_matched());
        let absent = item(ParseStrategy::Header, "x-other", None, false);
        assert_eq!(value(&absent, request()), not_matched());
        let counted = item(ParseStrategy::Header, "x-other", None, true);
        assert_eq!(value(&counted, request()), missing());
        // A client cannot send a marker: every read value is a string.
        assert_ne!(ParamValue::from("false"), not_matched());
    }
}
