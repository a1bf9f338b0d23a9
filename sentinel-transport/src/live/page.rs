//! The page itself: one HTML document with the stylesheet and the script
//! inlined, so that it makes one request besides its JSON (a read token in
//! the page's URL then covers everything it loads) and nothing from
//! elsewhere.

use std::sync::OnceLock;

use axum::http::header;
use axum::response::IntoResponse;

const HTML: &str = include_str!("../../assets/live.html");
const CSS: &str = include_str!("../../assets/live.css");
const JS: &str = include_str!("../../assets/live.js");

/// Where the stylesheet and the script go in the HTML.
const CSS_SLOT: &str = "/*LIVE_CSS*/";
const JS_SLOT: &str = "/*LIVE_JS*/";

/// Inline code may run; nothing may be loaded from elsewhere; the script
/// may fetch from this origin only.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; \
     script-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// The document, assembled once.
pub(crate) fn document() -> &'static str {
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    DOCUMENT.get_or_init(|| HTML.replacen(CSS_SLOT, CSS, 1).replacen(JS_SLOT, JS, 1))
}

/// `GET /`.
pub(crate) async fn serve() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        document(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_inlines_its_assets_and_loads_nothing_else() {
        let doc = document();
        assert!(!doc.contains(CSS_SLOT) && !doc.contains(JS_SLOT));
        assert!(doc.contains(CSS.trim()) && doc.contains(JS.trim()));
        for outside in ["http://", "https://", "src=\"", "<link rel=\"stylesheet\""] {
            assert!(!doc.contains(outside), "the page refers to {outside}");
        }
    }
}
