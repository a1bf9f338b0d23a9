//! Who may call what: state-changing commands off unless allowed, made only
//! as the dashboard makes them (a POST form), never from a browser page of
//! another site, off loopback only from the dashboards' addresses (or with
//! the token), a token for them when one is set, and optionally for every
//! read too (the live page included); requests that name a host this
//! machine is not known by are refused. One middleware in front of every
//! route.

use std::net::IpAddr;
use std::sync::{Arc, PoisonError, RwLock};

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use crate::commands::{Access, access_of, bad_request, failure};
use crate::server::Connection;

/// The access rules of one server.
#[derive(Clone, Debug, Default)]
pub(crate) struct Guard {
    pub(crate) allow_writes: bool,
    /// State-changing commands are also served as a GET (a dashboard
    /// before 1.6.0 sends them so).
    pub(crate) get_writes: bool,
    pub(crate) token: Option<String>,
    pub(crate) protect_reads: bool,
    /// Bound to a loopback address: the write-peer check is off (every
    /// client is a local process).
    pub(crate) loopback: bool,
    /// Host names served besides `localhost` (the machine's name and the
    /// configured ones).
    pub(crate) host_names: Vec<String>,
    /// Addresses served as a `Host` besides loopback ones and the one the
    /// client connected to (the bind address, the heartbeat's IP).
    pub(crate) host_ips: Vec<IpAddr>,
    /// Who may write without a token when bound beyond loopback.
    pub(crate) writers: Arc<Writers>,
}

/// The peers whose writes are accepted off loopback without a token: the
/// dashboards' addresses (resolved again before every heartbeat) and the
/// ones the user adds.
#[derive(Debug, Default)]
pub(crate) struct Writers {
    fixed: Vec<IpAddr>,
    dashboards: RwLock<Vec<Vec<IpAddr>>>,
}

impl Writers {
    /// `fixed` always, and `dashboards` slots to fill as they resolve.
    pub(crate) fn new(fixed: Vec<IpAddr>, dashboards: usize) -> Self {
        Writers {
            fixed: fixed.into_iter().map(|ip| ip.to_canonical()).collect(),
            dashboards: RwLock::new(vec![Vec::new(); dashboards]),
        }
    }

    /// The addresses dashboard `index` resolves to now.
    pub(crate) fn set_dashboard(&self, index: usize, ips: Vec<IpAddr>) {
        let mut dashboards = self
            .dashboards
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = dashboards.get_mut(index) {
            *slot = ips.into_iter().map(|ip| ip.to_canonical()).collect();
        }
    }

    fn allows(&self, peer: IpAddr) -> bool {
        let peer = peer.to_canonical();
        self.fixed.contains(&peer)
            || self
                .dashboards
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .iter()
                .any(|ips| ips.contains(&peer))
    }
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

    /// Whether the `Host` a request names is one this machine answers to:
    /// `localhost`, a loopback address, the address the client connected
    /// to, the bind address or the heartbeat's IP, the machine's name or a
    /// configured one (any port). A web page whose name an attacker
    /// re-points at this machine (DNS rebinding) is same-origin for the
    /// browser, but still names its own host.
    fn host_allowed(&self, request: &Request) -> bool {
        let Some(host) = request
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
        else {
            // HTTP/1.0 without Host: not a browser.
            return true;
        };
        let name = host_name(host);
        if name.eq_ignore_ascii_case("localhost") {
            return true;
        }
        if let Ok(ip) = name.parse::<IpAddr>() {
            let ip = ip.to_canonical();
            let local = request
                .extensions()
                .get::<Connection>()
                .map(|c| c.local.ip().to_canonical());
            return ip.is_loopback() || local == Some(ip) || self.host_ips.contains(&ip);
        }
        self.host_names
            .iter()
            .any(|known| known.eq_ignore_ascii_case(name))
    }

    /// Whether the client may write without a token: on loopback anyone
    /// (a local process); beyond, a dashboard's address or an allowed one.
    fn peer_may_write(&self, request: &Request) -> Result<(), String> {
        if self.loopback {
            return Ok(());
        }
        let Some(peer) = request
            .extensions()
            .get::<Connection>()
            .map(|c| c.peer.ip())
        else {
            return Err("the client's address is unknown".into());
        };
        if self.writers.allows(peer) {
            Ok(())
        } else {
            Err(format!(
                "state-changing commands are accepted only from the dashboards' addresses (CommandCenter::dashboard) and CommandCenter::allow_writes_from, or with the token (CommandCenter::token); {peer} is none of them"
            ))
        }
    }
}

/// The name or address of a `Host` value, without its port or brackets.
fn host_name(host: &str) -> &str {
    match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    }
}

/// Compares in time independent of where the strings differ.
fn same(given: &str, token: &str) -> bool {
    let (a, b) = (given.as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether a browser says the request comes from another site: a page
/// elsewhere that sends a request to this server (cross-site request
/// forgery). Browsers send `Sec-Fetch-Site` on every request (recent ones),
/// `Origin` on cross-origin POSTs, and `Referer` on most requests unless
/// the page forbids it; the dashboard's HTTP client sends none of them.
fn cross_site(request: &Request) -> bool {
    let headers = request.headers();
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    let fetch_site = text(header::HeaderName::from_static("sec-fetch-site"))
        .is_some_and(|site| site != "same-origin" && site != "none");
    let host = text(header::HOST);
    // The authority of an `Origin` or `Referer` URL (`null` and anything
    // unreadable are foreign).
    let foreign = |url: Option<&str>| {
        url.is_some_and(|url| {
            let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
            let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
            !host.is_some_and(|host| host.eq_ignore_ascii_case(authority))
        })
    };
    fetch_site || foreign(text(header::ORIGIN)) || foreign(text(header::REFERER))
}

/// The headers the checks read, each of which must come once at most: two
/// `Host` headers could name one host to this server and another to a
/// proxy in front of it.
const SINGLE_HEADERS: [header::HeaderName; 6] = [
    header::HOST,
    header::ORIGIN,
    header::REFERER,
    header::AUTHORIZATION,
    header::CONTENT_TYPE,
    header::HeaderName::from_static("sec-fetch-site"),
];

/// Whether a write's body is a form (or has no type, as the dashboard's
/// client of 1.7.1 and later may send it).
fn form_or_untyped(request: &Request) -> bool {
    const FORM: &str = "application/x-www-form-urlencoded";
    match request.headers().get(header::CONTENT_TYPE) {
        None => true,
        Some(value) => value.to_str().is_ok_and(|t| {
            let t = t.trim();
            t.is_empty()
                || t.get(..FORM.len())
                    .is_some_and(|p| p.eq_ignore_ascii_case(FORM))
        }),
    }
}

/// The middleware: refuses before the command runs (and before its body is
/// read), so a refused command changes nothing.
pub(crate) async fn guard(
    State(guard): State<Arc<Guard>>,
    request: Request,
    next: Next,
) -> Response {
    if let Some(name) = SINGLE_HEADERS
        .iter()
        .find(|name| request.headers().get_all(*name).iter().nth(1).is_some())
    {
        return bad_request(format!("the header {name} is given more than once"));
    }
    let tokens = request.uri().query().map_or(0, |q| {
        form_urlencoded::parse(q.as_bytes())
            .filter(|(k, _)| k == "token")
            .count()
    });
    if tokens > 1 {
        return bad_request("the parameter token is given more than once");
    }
    if !guard.host_allowed(&request) {
        return failure(
            StatusCode::FORBIDDEN,
            "this server answers only to localhost, a loopback address, its own addresses, its host name and the names set with CommandCenter::host_name",
        );
    }
    let access = access_of(request.uri().path());
    if access == Access::Write {
        if !guard.allow_writes {
            return failure(
                StatusCode::FORBIDDEN,
                "state-changing commands are disabled on this server (CommandCenter::allow_writes)",
            );
        }
        let method = request.method();
        if method != Method::POST && !(guard.get_writes && method == Method::GET) {
            let mut answer = failure(
                StatusCode::METHOD_NOT_ALLOWED,
                "a state-changing command is a POST with a form body (a dashboard before 1.6.0 sends a GET: CommandCenter::allow_get_writes)",
            );
            let allow = if guard.get_writes {
                "GET, POST"
            } else {
                "POST"
            };
            answer
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static(allow));
            return answer;
        }
        if !form_or_untyped(&request) {
            return failure(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "a state-changing command's body is a form (application/x-www-form-urlencoded)",
            );
        }
        if cross_site(&request) {
            return failure(
                StatusCode::FORBIDDEN,
                "cross-site request refused: a state-changing command cannot come from a page of another site",
            );
        }
        if guard.token.is_none() {
            if let Err(why) = guard.peer_may_write(&request) {
                return failure(StatusCode::FORBIDDEN, why);
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_lose_their_port_and_brackets() {
        assert_eq!(host_name("a.example:8719"), "a.example");
        assert_eq!(host_name("[::1]:8719"), "::1");
        assert_eq!(host_name("10.0.0.5"), "10.0.0.5");
    }

    #[test]
    fn writers_match_mapped_addresses_and_follow_the_dashboards() {
        let writers = Writers::new(vec!["10.0.0.9".parse().unwrap()], 1);
        assert!(writers.allows("10.0.0.9".parse().unwrap()));
        assert!(writers.allows("::ffff:10.0.0.9".parse().unwrap()));
        assert!(!writers.allows("10.0.0.5".parse().unwrap()));
        writers.set_dashboard(0, vec!["10.0.0.5".parse().unwrap()]);
        assert!(writers.allows("10.0.0.5".parse().unwrap()));
        writers.set_dashboard(0, vec!["10.0.0.6".parse().unwrap()]);
        assert!(!writers.allows("10.0.0.5".parse().unwrap()));
    }
}
