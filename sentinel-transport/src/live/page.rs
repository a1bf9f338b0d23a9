//! The page itself: an HTML document, its stylesheet and its script, all
//! embedded in the crate. The document names its two assets by relative
//! URLs under `/live/`, and carries the page's own `token` parameter on to
//! them (the script carries it on to the JSON), so that a server which
//! restricts reads with a token serves the whole page to whoever opened it
//! with one. Nothing is inline: the Content-Security-Policy allows scripts
//! and styles from this origin only, so markup that got into the page
//! could not run.

use axum::extract::Query;
use axum::http::header;
use axum::response::{IntoResponse, Response};

const HTML: &str = include_str!("../../assets/live.html");
const CSS: &str = include_str!("../../assets/live.css");
const JS: &str = include_str!("../../assets/live.js");

/// Where the document's asset URLs take the token's query string.
const QUERY_SLOT: &str = "{{QUERY}}";

const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src data:; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The document, with `token` (when given) on its asset URLs.
pub(crate) fn document(token: Option<&str>) -> String {
    let query = token.map_or_else(String::new, |t| format!("?token={}", percent_encode(t)));
    HTML.replace(QUERY_SLOT, &query)
}

/// `GET /`.
pub(crate) async fn serve(Query(pairs): Query<Vec<(String, String)>>) -> Response {
    let token = pairs
        .iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.as_str());
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        document(token),
    )
        .into_response()
}

/// `GET /live/live.css`.
pub(crate) async fn stylesheet() -> Response {
    asset("text/css; charset=utf-8", CSS)
}

/// `GET /live/live.js`.
pub(crate) async fn script() -> Response {
    asset("text/javascript; charset=utf-8", JS)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            // Embedded in the binary: a new binary may bring new assets.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

/// Every byte but RFC 3986's unreserved ones percent-encoded: safe in a
/// query string and in an HTML attribute.
fn percent_encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for byte in value.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_loads_its_two_assets_and_nothing_else() {
        let doc = document(None);
        assert!(!doc.contains(QUERY_SLOT));
        assert!(doc.contains("<script src=\"live/live.js\" defer>"));
        assert!(doc.contains("<link rel=\"stylesheet\" href=\"live/live.css\">"));
        assert_eq!(doc.matches("src=").count(), 1, "one script, no image");
        assert!(!doc.contains("http://") && !doc.contains("https://"));
        assert!(
            !doc.contains("<style") && !doc.contains(" style="),
            "no inline style"
        );
        assert!(!doc.contains("<script>"), "no inline script");
    }

    #[test]
    fn the_token_goes_on_to_the_assets_encoded() {
        let doc = document(Some("a b&\"<é"));
        assert!(doc.contains("live/live.js?token=a%20b%26%22%3C%C3%A9\""));
        assert!(doc.contains("live/live.css?token=a%20b%26%22%3C%C3%A9\""));
    }
}
