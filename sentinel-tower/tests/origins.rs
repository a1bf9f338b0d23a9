//! Origins a client cannot step around: a request with no origin refused
//! where authority rules apply (`require_origin`), a duplicated origin
//! header refused, an origin taken from a verified identity in the
//! request's extensions instead of a header, and exact matching.

mod common;

use std::convert::Infallible;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use common::sentinel;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::{BlockKind, Sentinel};
use sentinel_flow_tower::SentinelLayer;
use tower::{ServiceBuilder, ServiceExt, service_fn};

/// The caller an authentication layer verified, in the extensions.
#[derive(Clone)]
struct Caller(&'static str);

async fn ok(_: Request<Empty<Bytes>>) -> Result<Response<Empty<Bytes>>, Infallible> {
    Ok(Response::new(Empty::new()))
}

/// `GET /admin` with `headers` (a name given twice is sent twice) and, if
/// given, a verified caller in the extensions.
fn request(headers: &[(&str, &[u8])], caller: Option<&'static str>) -> Request<Empty<Bytes>> {
    let mut request = Request::get("/admin").body(Empty::new()).unwrap();
    for (name, value) in headers {
        let name = http::HeaderName::from_bytes(name.as_bytes()).unwrap();
        let value = HeaderValue::from_bytes(value).unwrap();
        request.headers_mut().append(name, value);
    }
    if let Some(caller) = caller {
        request.extensions_mut().insert(Caller(caller));
    }
    request
}

/// Polls a future that is ready at once.
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the call was not ready at once"),
    }
}

/// An instance whose `GET:/admin` has `strategy` over `origins`.
fn guarded(strategy: AuthorityStrategy, origins: &[&str]) -> &'static Sentinel {
    let (sentinel, _clock) = sentinel();
    sentinel
        .authority_rules()
        .load(vec![AuthorityRule::new(
            "GET:/admin",
            strategy,
            origins.iter().copied(),
        )])
        .unwrap();
    sentinel
}

/// The status and body `layer` answers `request` with.
fn answer(layer: SentinelLayer, request: Request<Empty<Bytes>>) -> (StatusCode, String) {
    let service = ServiceBuilder::new().layer(layer).service(service_fn(ok));
    let response = ready(service.oneshot(request)).unwrap();
    let status = response.status();
    let body = ready(response.into_body().collect()).unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

const AUTHORITY_BLOCK: (StatusCode, &str) = (StatusCode::TOO_MANY_REQUESTS, "blocked by authority");

fn refused_by_authority(answer: (StatusCode, String)) -> bool {
    (answer.0, answer.1.as_str()) == AUTHORITY_BLOCK
}

#[test]
fn a_request_without_the_origin_header_is_refused_under_a_white_list_with_require_origin() {
    let sentinel = guarded(AuthorityStrategy::White, &["ops-console"]);
    let header = || SentinelLayer::with_sentinel(sentinel).origin_header("x-caller");
    // Sentinel's rule, kept by default: no origin passes.
    assert_eq!(header().oneshot_status(request(&[], None)), StatusCode::OK);
    let strict = || header().require_origin(true);
    assert!(refused_by_authority(answer(strict(), request(&[], None))));
    let listed = request(&[("x-caller", b"ops-console")], None);
    assert_eq!(strict().oneshot_status(listed), StatusCode::OK);
    let unlisted = request(&[("x-caller", b"shop")], None);
    assert!(refused_by_authority(answer(strict(), unlisted)));
}

#[test]
fn a_request_without_the_origin_header_is_refused_under_a_black_list_with_require_origin() {
    let sentinel = guarded(AuthorityStrategy::Black, &["bad-bot"]);
    let header = || SentinelLayer::with_sentinel(sentinel).origin_header("x-caller");
    assert_eq!(header().oneshot_status(request(&[], None)), StatusCode::OK);
    let strict = || header().require_origin(true);
    assert!(refused_by_authority(answer(strict(), request(&[], None))));
    let other = request(&[("x-caller", b"shop")], None);
    assert_eq!(strict().oneshot_status(other), StatusCode::OK);
}

#[test]
fn an_empty_or_unreadable_origin_is_refused_with_require_origin() {
    for strategy in [AuthorityStrategy::White, AuthorityStrategy::Black] {
        let sentinel = guarded(strategy, &["bad-bot"]);
        let header = || SentinelLayer::with_sentinel(sentinel).origin_header("x-caller");
        for value in [&b""[..], b"caf\xe9"] {
            let sent = || request(&[("x-caller", value)], None);
            // Without the option: no origin, which passes every list.
            assert_eq!(
                header().oneshot_status(sent()),
                StatusCode::OK,
                "{strategy:?} {value:?}"
            );
            assert!(
                refused_by_authority(answer(header().require_origin(true), sent())),
                "{strategy:?} {value:?}"
            );
        }
    }
}

#[test]
fn a_duplicated_origin_header_is_refused_with_400() {
    let sentinel = guarded(AuthorityStrategy::Black, &["bad-bot"]);
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = {
        let calls = calls.clone();
        service_fn(move |request: Request<Empty<Bytes>>| {
            calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            ok(request)
        })
    };
    let service = ServiceBuilder::new()
        .layer(SentinelLayer::with_sentinel(sentinel).origin_header("x-caller"))
        .service(counted);
    for pair in [
        [("x-caller", &b"bad-bot"[..]), ("x-caller", b"shop")],
        [("x-caller", b"shop"), ("x-caller", b"bad-bot")],
        [("x-caller", b"shop"), ("x-caller", b"shop")],
        [("x-caller", b""), ("x-caller", b"shop")],
    ] {
        let response = ready(service.clone().oneshot(request(&pair, None))).unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{pair:?}");
        let body = ready(response.into_body().collect()).unwrap().to_bytes();
        assert_eq!(&body[..], b"duplicated origin header");
    }
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 0);
    // Refused before the entry: nothing counted.
    let node = sentinel.resource_node("GET:/admin").unwrap();
    assert_eq!(node.stats().total_request(sentinel.now_ms()), 0);

    // Whatever the rules: no rule at all on the resource.
    let (bare, _clock) = common::sentinel();
    let layer = SentinelLayer::with_sentinel(bare).origin_header("x-caller");
    let twice = request(&[("x-caller", b"a"), ("x-caller", b"b")], None);
    assert_eq!(layer.oneshot_status(twice), StatusCode::BAD_REQUEST);
}

#[test]
fn a_duplicated_origin_header_is_invalid_argument_to_grpc_clients() {
    let sentinel = guarded(AuthorityStrategy::Black, &["bad-bot"]);
    let layer = SentinelLayer::with_sentinel(sentinel).origin_header("x-caller");
    let service = ServiceBuilder::new().layer(layer).service(service_fn(ok));
    let grpc = request(
        &[
            ("content-type", b"application/grpc"),
            ("x-caller", b"shop"),
            ("x-caller", b"bad-bot"),
        ],
        None,
    );
    let response = ready(service.oneshot(grpc)).unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["grpc-status"], "3");
    assert_eq!(
        response.headers()["grpc-message"],
        "duplicated origin header"
    );
}

#[test]
fn the_verified_identity_judges_a_request_whatever_its_origin_header_says() {
    let sentinel = guarded(AuthorityStrategy::White, &["ops-console"]);
    let verified = || {
        SentinelLayer::with_sentinel(sentinel)
            .origin_header("x-caller")
            .origin_from_extensions(|extensions| extensions.get::<Caller>().map(|c| c.0))
    };
    // A spoofed header naming a listed caller: judged by the identity.
    let spoofed = request(&[("x-caller", b"ops-console")], Some("shop"));
    assert!(refused_by_authority(answer(verified(), spoofed)));
    // A header naming an unlisted caller, twice even: not read.
    let honest = request(
        &[("x-caller", b"shop"), ("x-caller", b"shop")],
        Some("ops-console"),
    );
    assert_eq!(verified().oneshot_status(honest), StatusCode::OK);
    // No identity: no origin, whatever the header says.
    let anonymous = || request(&[("x-caller", b"ops-console")], None);
    assert_eq!(verified().oneshot_status(anonymous()), StatusCode::OK);
    assert!(refused_by_authority(answer(
        verified().require_origin(true),
        anonymous()
    )));
    // An empty identity is none either.
    assert!(refused_by_authority(answer(
        verified().require_origin(true),
        request(&[], Some(""))
    )));
    let node = sentinel.resource_node("GET:/admin").unwrap();
    assert!(node.find_origin("ops-console").is_some());
    assert!(node.find_origin("shop").is_some());
}

#[test]
fn origins_match_rules_exactly() {
    let sentinel = guarded(AuthorityStrategy::Black, &["bad-bot"]);
    let layer = || SentinelLayer::with_sentinel(sentinel).origin_header("x-caller");
    let exact = request(&[("x-caller", b"bad-bot")], None);
    assert!(refused_by_authority(answer(layer(), exact)));
    // Another name to Sentinel: a black list names every spelling it
    // keeps out (or the origin comes from a verified identity).
    let variant = request(&[("x-caller", b"Bad-Bot")], None);
    assert_eq!(layer().oneshot_status(variant), StatusCode::OK);
}

#[test]
fn require_origin_refuses_only_where_authority_rules_apply() {
    let (sentinel, _clock) = sentinel();
    sentinel
        .flow_rules()
        .load(vec![FlowRule::new("GET:/admin", 100.0)])
        .unwrap();
    let strict = || {
        SentinelLayer::with_sentinel(sentinel)
            .origin_header("x-caller")
            .require_origin(true)
    };
    assert_eq!(strict().oneshot_status(request(&[], None)), StatusCode::OK);
    sentinel
        .authority_rules()
        .load(vec![AuthorityRule::new(
            "GET:/admin",
            AuthorityStrategy::Black,
            ["bad-bot"],
        )])
        .unwrap();
    assert!(refused_by_authority(answer(strict(), request(&[], None))));
    // Switched off, Sentinel checks nothing, and neither does the layer.
    sentinel.set_enabled(false);
    assert_eq!(strict().oneshot_status(request(&[], None)), StatusCode::OK);
    sentinel.set_enabled(true);
    sentinel.authority_rules().load(vec![]).unwrap();
    assert_eq!(strict().oneshot_status(request(&[], None)), StatusCode::OK);
}

#[test]
fn a_request_without_an_origin_gets_the_response_of_every_authority_block() {
    let sentinel = guarded(AuthorityStrategy::White, &["ops-console"]);
    let custom = SentinelLayer::with_sentinel(sentinel)
        .origin_header("x-caller")
        .require_origin(true)
        .block_response(|block| {
            assert_eq!(block.kind(), BlockKind::Authority);
            assert_eq!(block.resource(), "GET:/admin");
            let rule = block.rule_as::<AuthorityRule>().expect("the refusing rule");
            let mut response = Response::new(format!("forbidden: {}", rule.limit_app[0]));
            *response.status_mut() = StatusCode::FORBIDDEN;
            response
        });
    assert_eq!(
        answer(custom, request(&[], None)),
        (StatusCode::FORBIDDEN, "forbidden: ops-console".to_owned())
    );
    let strict = SentinelLayer::with_sentinel(sentinel)
        .origin_header("x-caller")
        .require_origin(true);
    let service = ServiceBuilder::new().layer(strict).service(service_fn(ok));
    let grpc = request(&[("content-type", b"application/grpc")], None);
    let response = ready(service.oneshot(grpc)).unwrap();
    assert_eq!(response.headers()["grpc-status"], "8");
    assert_eq!(response.headers()["grpc-message"], "blocked by authority");
}

/// The status of one request through a layer around [`ok`].
trait OneshotStatus {
    fn oneshot_status(self, request: Request<Empty<Bytes>>) -> StatusCode;
}

impl OneshotStatus for SentinelLayer {
    fn oneshot_status(self, request: Request<Empty<Bytes>>) -> StatusCode {
        answer(self, request).0
    }
}
