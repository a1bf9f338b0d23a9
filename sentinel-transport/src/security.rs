//! Who may call what: state-changing commands off unless allowed, never
//! from a browser page of another site, a token for them when one is set,
//! and optionally for every read too (the live page included). One
//! middleware in front of every route.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use crate::commands::{Access, access_of, failure};

/// The access rules of one server.
#[derive(Clone, Debug, Default)]
pub(crate) struct Guard {
    pub(crate) allow_writes: bool,
    pub(crate) token: Option<String>,
    pub(crate) protect_reads: bool,
    /// Bound to a loopback address: only loopback host names are served.
    pub(crate) loopback: bool,
}

impl Guard {
    /// Whether `request` carries the token (`Authorization: Bearer <token>`
    /// or a `token` query parameter); true when no token is set.
    fn authorized(&self, request: &Request) -> bool {
        let Some(token) = &self.token else {
            return true;
        };
        let bearer = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .is_some_and(|given| same(given.trim(), token));
        bearer
            || request.uri().query().is_some_and(|q| {
                form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "token" && same(&v, token))
            })
    }
}

/// Whether the `Host` a request names is a loopback one (`localhost`,
/// `127.x.y.z`, `[::1]`, any port). A server on 127.0.0.1 refuses others:
/// a web page whose name an attacker re-points at 127.0.0.1 (DNS
/// rebinding) is same-origin for the browser, but still names its own host.
fn loopback_host(request: &Request) -> bool {
    let Some(host) = request
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
    else {
        // HTTP/1.0 without Host: not a browser.
        return true;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Compares in time independent of where the strings differ.
fn same(given: &str, token: &str) -> bool {
    let (a, b) = (given.as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether a browser says the request comes from another site: a page
/// elsewhere that posts to 127.0.0.1 (cross-site request forgery). Browsers
/// send `Sec-Fetch-Site` on every request and `Origin` on cross-origin
/// POSTs; the dashboard's HTTP client sends neither.
fn cross_site(request: &Request) -> bool {
    let headers = request.headers();
    let fetch_site = headers
        .get("sec-fetch-site")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|site| site != "same-origin" && site != "none");
    let foreign_origin = headers
        .get(header::ORIGIN)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|origin| {
            let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
            let origin_host = origin.split_once("://").map_or(origin, |(_, rest)| rest);
            host != Some(origin_host)
        });
    fetch_site || foreign_origin
}

/// The middleware: refuses before the command runs (and before its body is
/// read), so a refused command changes nothing.
pub(crate) async fn guard(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    if guard.loopback && !loopback_host(&request) {
        return failure(
            StatusCode::FORBIDDEN,
            "this server listens on loopback and answers only to localhost, 127.0.0.1 or [::1]",
        );
    }
    let access = access_of(request.uri().path());
    if access == Access::Write && !guard.allow_writes {
        return failure(
            StatusCode::FORBIDDEN,
            "state-changing commands are disabled on this server (CommandCenter::allow_writes)",
        );
    }
    if access == Access::Write && cross_site(&request) {
        return failure(
            StatusCode::FORBIDDEN,
            "cross-site request refused: a state-changing command cannot come from a page of another site",
        );
    }
    let needs_token = access == Access::Write || guard.protect_reads;
    if needs_token && !guard.authorized(&request) {
        return failure(
            StatusCode::UNAUTHORIZED,
            "missing or wrong token (Authorization: Bearer <token>, or ?token=<token>)",
        );
    }
    next.run(request).await
}
