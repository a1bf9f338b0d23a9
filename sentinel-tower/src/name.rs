//! Resource names of requests: the route template or a cleaned path.

use std::borrow::Cow;
use std::sync::Arc;

use http::request::Parts;
use sentinel_flow_core::Resource;

use crate::buffer::with_buffer;
use crate::cache::NameCache;
use crate::segment::{first_id, next_id};

/// Replaces the path segments that look like identifiers with `{id}`: all
/// digits (`123`), UUIDs (`0f8c…-…`), and hex strings of 16 characters or
/// more (hashes, object ids). Borrows when nothing changes.
///
/// ```
/// use sentinel_flow_tower::clean_path;
///
/// assert_eq!(clean_path("/orders/123/items/9"), "/orders/{id}/items/{id}");
/// assert_eq!(
///     clean_path("/users/8c6f3b8e-5a3c-4e1b-9d7a-2f4e6c8b1a0d"),
///     "/users/{id}"
/// );
/// assert_eq!(clean_path("/blobs/5f2b6c1d9e8a7b3c4d5e6f70"), "/blobs/{id}");
/// assert_eq!(clean_path("/health"), "/health");
/// ```
pub fn clean_path(path: &str) -> Cow<'_, str> {
    let Some(first) = first_id(path) else {
        return Cow::Borrowed(path);
    };
    let mut cleaned = String::with_capacity(path.len());
    push_cleaned(&mut cleaned, path, first);
    Cow::Owned(cleaned)
}

/// Appends `path` to `out` with its identifier segments as `{id}`, the
/// first of them `first` (from [`first_id`]). The text between
/// identifiers is copied in one piece (a copy per segment cost more than
/// the scan).
fn push_cleaned(out: &mut String, path: &str, first: (usize, usize)) {
    // Where the text not yet copied starts.
    let mut copied = 0;
    let mut id = Some(first);
    while let Some((start, end)) = id {
        // `start` and `end` border a `/` or an end: char boundaries.
        out.push_str(&path[copied..start]);
        out.push_str("{id}");
        copied = end;
        id = next_id(path.as_bytes(), end + 1);
    }
    out.push_str(&path[copied..]);
}

/// A path cleaner: takes a request path, gives the path to name the
/// resource with.
pub(crate) type Cleaner = Arc<dyn Fn(&str) -> Cow<'_, str> + Send + Sync>;
/// A user function naming the resource of a request.
pub(crate) type NameFn = Arc<dyn Fn(&Parts) -> String + Send + Sync>;

/// How a request's resource name is made.
#[derive(Clone)]
pub(crate) enum Namer {
    /// `METHOD:` + route template, else `METHOD:` + cleaned path
    /// ([`clean_path`] when `None`: written into the name's buffer, no
    /// `String` per request).
    Route(Option<Cleaner>),
    /// A user function.
    Custom(NameFn),
}

impl Namer {
    pub(crate) fn default_route() -> Self {
        Namer::Route(None)
    }

    /// Whether this namer reads the request through `&Parts` (a user
    /// function), which costs taking the request apart.
    pub(crate) fn needs_parts(&self) -> bool {
        matches!(self, Namer::Custom(_))
    }

    /// The resource of `head` if `names` finds it in its index (a known
    /// name, by a route template or a path, with a standard method; a path
    /// with identifiers is found by the name it cleans to, not cleaned):
    /// returned, not passed to a closure, so that entering it needs no
    /// result carried back up. `None`: ask
    /// [`with_resource`](Self::with_resource).
    #[inline]
    pub(crate) fn find<'c>(
        &self,
        names: &'c NameCache,
        head: &impl Head,
    ) -> Option<&'c Resource<'static>> {
        let Namer::Route(None) = self else {
            return None;
        };
        let method = head.method();
        #[cfg(feature = "axum")]
        if let Some(matched) = head.extensions().get::<axum::extract::MatchedPath>() {
            return names.find_route(method, matched.as_str());
        }
        // The path is not cleaned: the index finds the cleaned name from it.
        names.find_path(method, head.uri().path())
    }

    /// Calls `f` with the resource of `head`, from `names`. The default
    /// names are looked up by method and path (the template, or the path
    /// as it is when it has no identifier) without joining them; a cleaned
    /// path is written into this thread's buffer. `parts` is `Some` when
    /// [`needs_parts`](Self::needs_parts).
    #[inline]
    pub(crate) fn with_resource<T>(
        &self,
        names: &NameCache,
        head: &impl Head,
        parts: Option<&Parts>,
        f: impl FnOnce(&Resource<'static>) -> T,
    ) -> T {
        match self {
            Namer::Custom(name) => {
                names.with(&name(parts.expect("a custom namer is given the parts")), f)
            }
            Namer::Route(cleaner) => with_route_path(head, cleaner.as_ref(), |method, path| {
                names.with_route(method, path, f)
            }),
        }
    }
}

/// Calls `k` with the method and path a route namer names `head` by: the
/// route template, else the path as it is when it has no identifier, else
/// the path cleaned (by `cleaner`, or by [`clean_path`]'s rule into this
/// thread's buffer, no `String` per request).
#[inline]
fn with_route_path<T>(
    head: &impl Head,
    cleaner: Option<&Cleaner>,
    k: impl FnOnce(&http::Method, &str) -> T,
) -> T {
    let method = head.method();
    #[cfg(feature = "axum")]
    if let Some(matched) = head.extensions().get::<axum::extract::MatchedPath>() {
        return k(method, matched.as_str());
    }
    let path = head.uri().path();
    match cleaner {
        None => match first_id(path) {
            None => k(method, path),
            Some(first) => with_buffer(
                |cleaned| push_cleaned(cleaned, path, first),
                |cleaned| k(method, cleaned),
            ),
        },
        Some(cleaner) => k(method, &cleaner(path)),
    }
}

/// The head of a request, borrowed from a whole `Request` (no taking
/// apart) or from its `Parts`.
pub(crate) trait Head {
    fn method(&self) -> &http::Method;
    fn uri(&self) -> &http::Uri;
    fn headers(&self) -> &http::HeaderMap;
    fn extensions(&self) -> &http::Extensions;
}

impl<B> Head for http::Request<B> {
    fn method(&self) -> &http::Method {
        self.method()
    }
    fn uri(&self) -> &http::Uri {
        self.uri()
    }
    fn headers(&self) -> &http::HeaderMap {
        self.headers()
    }
    fn extensions(&self) -> &http::Extensions {
        self.extensions()
    }
}

impl Head for Parts {
    fn method(&self) -> &http::Method {
        &self.method
    }
    fn uri(&self) -> &http::Uri {
        &self.uri
    }
    fn headers(&self) -> &http::HeaderMap {
        &self.headers
    }
    fn extensions(&self) -> &http::Extensions {
        &self.extensions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::is_id;

    #[test]
    fn ids_are_replaced_and_words_kept() {
        assert_eq!(clean_path("/"), "/");
        assert_eq!(clean_path("/a/b"), "/a/b");
        assert_eq!(clean_path("/v1/orders"), "/v1/orders");
        assert_eq!(clean_path("/orders/42"), "/orders/{id}");
        assert_eq!(clean_path("/x/deadbeefdeadbeef/y"), "/x/{id}/y");
        assert_eq!(clean_path("/x/deadbeef"), "/x/deadbeef");
    }

    /// A name cache of room 100 on an instance of its own.
    fn names() -> NameCache {
        let sentinel: &'static sentinel_flow_core::Sentinel =
            Box::leak(Box::new(sentinel_flow_core::Sentinel::builder().build()));
        NameCache::new(sentinel, 100)
    }

    #[test]
    fn the_default_namer_cleans_into_the_name_and_a_users_cleaner_is_used() {
        let names = names();
        let request = http::Request::post("/orders/42/items/deadbeefdeadbeef?x=1")
            .body(())
            .unwrap();
        let name = |namer: &Namer, request: &http::Request<()>| {
            namer.with_resource(&names, request, None, |r| r.name().to_owned())
        };
        let default = Namer::default_route();
        assert_eq!(name(&default, &request), "POST:/orders/{id}/items/{id}");
        // Known now: found again, by its cleaned path.
        assert_eq!(name(&default, &request), "POST:/orders/{id}/items/{id}");
        let upper = Namer::Route(Some(Arc::new(|path: &str| Cow::Owned(path.to_uppercase()))));
        assert_eq!(
            name(&upper, &request),
            "POST:/ORDERS/42/ITEMS/DEADBEEFDEADBEEF"
        );
        let plain = http::Request::get("/health").body(()).unwrap();
        assert_eq!(name(&default, &plain), "GET:/health");
        assert_eq!(name(&default, &plain), "GET:/health");
        let odd = http::Request::builder()
            .method("PURGE")
            .uri("/health")
            .body(())
            .unwrap();
        assert_eq!(name(&default, &odd), "PURGE:/health");
        assert_eq!(name(&default, &odd), "PURGE:/health");
    }

    #[test]
    fn find_returns_the_named_resource_once_it_is_known_and_defers_the_rest() {
        let names = names();
        let default = Namer::default_route();
        let find = |namer: &Namer, request: &http::Request<()>| {
            namer
                .find(&names, request)
                .map(|r| std::ptr::from_ref(r) as usize)
        };
        let named = |namer: &Namer, request: &http::Request<()>| {
            namer.with_resource(&names, request, None, |r| std::ptr::from_ref(r) as usize)
        };
        let plain = http::Request::get("/health").body(()).unwrap();
        let cleaned = http::Request::get("/orders/42?x=1").body(()).unwrap();
        let other_id = http::Request::get("/orders/7").body(()).unwrap();
        // Unknown names: not found (the caller then names them).
        assert_eq!(find(&default, &plain), None);
        assert_eq!(find(&default, &cleaned), None);
        let health = named(&default, &plain);
        let orders = named(&default, &cleaned);
        assert_ne!(health, orders);
        // Known: the same handles, a cleaned path by its cleaned name.
        assert_eq!(find(&default, &plain), Some(health));
        assert_eq!(find(&default, &cleaned), Some(orders));
        assert_eq!(find(&default, &other_id), Some(orders));
        // Another method is another name.
        let post = http::Request::post("/health").body(()).unwrap();
        assert_eq!(find(&default, &post), None);
        // A user's cleaner or namer always names through `with_resource`.
        let upper = Namer::Route(Some(Arc::new(|path: &str| Cow::Owned(path.to_uppercase()))));
        assert_eq!(find(&upper, &plain), None);
        let custom = Namer::Custom(Arc::new(|parts: &Parts| parts.uri.path().to_owned()));
        assert_eq!(find(&custom, &plain), None);
    }

    #[test]
    fn paths_the_index_keys_apart_are_still_named_by_their_cleaned_path() {
        let names = names();
        let default = Namer::default_route();
        let get = |path: &str| http::Request::get(path).body(()).unwrap();
        let name = |request: &http::Request<()>| {
            let named = default.with_resource(&names, request, None, |r| r.name().to_owned());
            let found = default.find(&names, request).map(|r| r.name().to_owned());
            (named, found)
        };
        // More identifiers than a key holds: named, never in the index.
        let many = get("/1/2/3/4/5/6/7/8");
        let (named, found) = name(&many);
        assert_eq!(named, "GET:/{id}/{id}/{id}/{id}/{id}/{id}/{id}/{id}");
        assert_eq!(found, None);
        assert_eq!(name(&get("/9/8/7/6/5/4/3/2")).0, named);
        // A literal `{id}` is kept, as cleaning keeps it (the path is
        // looked up the slower way), and a path with an identifier there
        // is the same name, found by the path.
        let literal = get("/a/{id}/b");
        let (named, _) = name(&literal);
        assert_eq!(named, "GET:/a/{id}/b");
        assert_eq!(name(&get("/a/42/b")), (named.clone(), Some(named)));
        // Up to six identifiers are found by the path, as cleaned.
        let six = get("/1/x/2/3/4/5/6");
        let (named, _) = name(&six);
        assert_eq!(named, "GET:/{id}/x/{id}/{id}/{id}/{id}/{id}");
        assert_eq!(name(&get("/7/x/8/9/10/11/12")).1, Some(named));
    }

    #[test]
    fn the_scan_for_ids_matches_splitting() {
        for path in [
            "",
            "/",
            "//",
            "42",
            "/42",
            "/42/",
            "/a//42",
            "/orders",
            "/orders/",
            "a/b/c",
            "/x/deadbeefdeadbeef",
            "/x/deadbeef",
            "/é/42",
            "/é",
            "/u/8c6f3b8e-5a3c-4e1b-9d7a-2f4e6c8b1a0d",
            "/u/8c6f3b8e-5a3c-4e1b-9d7a-2f4e6c8b1a0",
            "/e/",
            "/orders/4x",
        ] {
            let by_split = path.as_bytes().split(|b| *b == b'/').any(is_id);
            assert_eq!(first_id(path).is_some(), by_split, "{path:?}");
        }
    }

    #[test]
    fn cleaning_in_runs_matches_cleaning_segment_by_segment() {
        let by_segment = |path: &str| {
            path.split('/')
                .map(|s| if is_id(s.as_bytes()) { "{id}" } else { s })
                .collect::<Vec<_>>()
                .join("/")
        };
        for path in [
            "",
            "/",
            "42",
            "/42",
            "/42/",
            "//",
            "/a//42",
            "/a/42/b/7",
            "/é/42/ü",
            "/a/deadbeefdeadbeef",
            "42/x/42",
            "/orders",
        ] {
            let mut cleaned = String::new();
            match first_id(path) {
                Some(first) => push_cleaned(&mut cleaned, path, first),
                None => cleaned.push_str(path),
            }
            assert_eq!(cleaned, by_segment(path), "{path:?}");
        }
    }
}
