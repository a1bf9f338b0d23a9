//! Security: writes off by default, the token, protected reads, the body
//! cap; every refused request changes nothing.

mod common;

use common::{
    center, get, get_with, instance, post_form, post_with, raw_status, send, writable_server,
};
use hyper::Method;
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_transport::CommandCenter;

const ONE_RULE: &str = r#"[{"resource":"GET:/a","count":0,"grade":1}]"#;

/// Flow rules in force before a refused write, which must stay.
fn kept() -> Vec<FlowRule> {
    vec![FlowRule::new("kept", 5.0)]
}

#[tokio::test]
async fn writes_are_off_by_default_and_change_nothing() {
    let (sentinel, _) = instance();
    let server = center(&sentinel).start().unwrap();
    let addr = server.local_addr();
    let set = post_form(addr, "/setRules", &[("type", "flow"), ("data", ONE_RULE)]).await;
    assert_eq!(set.status, 403, "{}", set.body);
    assert!(set.body.contains("allow_writes"), "{}", set.body);
    assert!(sentinel.flow_rules().rules().is_empty());
    assert_eq!(get(addr, "/setSwitch?value=false").await.status, 403);
    assert!(sentinel.is_enabled());
    let param = post_form(addr, "/setParamFlowRules", &[("data", "[]")]).await;
    assert_eq!(param.status, 403);
    // Reads stay open.
    assert_eq!(get(addr, "/getRules?type=flow").await.body, "[]");
}

#[tokio::test]
async fn a_token_guards_writes() {
    let (sentinel, _) = instance();
    let server = center(&sentinel)
        .allow_writes(true)
        .token("s3cret")
        .start()
        .unwrap();
    let addr = server.local_addr();
    let form = "type=flow&data=%5B%7B%22resource%22%3A%22GET%3A%2Fa%22%2C%22count%22%3A0%7D%5D";
    for headers in [&[][..], &[("authorization", "Bearer wrong")]] {
        let answer = post_with(addr, "/setRules", headers, form).await;
        assert_eq!(answer.status, 401, "{}", answer.body);
        assert!(sentinel.flow_rules().rules().is_empty());
    }
    let wrong = post_with(addr, "/setRules?token=s3cre", &[], form).await;
    assert_eq!(wrong.status, 401);
    assert!(sentinel.flow_rules().rules().is_empty());

    let bearer = [("authorization", "Bearer s3cret")];
    let answer = post_with(addr, "/setRules", &bearer, form).await;
    assert_eq!(
        (answer.status.as_u16(), answer.body.as_str()),
        (200, "success")
    );
    assert_eq!(
        sentinel.flow_rules().rules(),
        vec![FlowRule::new("GET:/a", 0.0)]
    );

    let by_query = post_with(addr, "/setSwitch?token=s3cret", &[], "value=false").await;
    assert_eq!(by_query.status, 200);
    assert!(!sentinel.is_enabled());
    // Reads need no token unless protected.
    assert_eq!(get(addr, "/getSwitch").await.status, 200);
}

#[tokio::test]
async fn protected_reads_need_the_token_everywhere() {
    let (sentinel, _) = instance();
    let server = center(&sentinel)
        .token("s3cret")
        .protect_reads(true)
        .start()
        .unwrap();
    let addr = server.local_addr();
    for path in [
        "/getRules?type=flow",
        "/metric?startTime=0",
        "/",
        "/live/data",
        "/nope",
    ] {
        assert_eq!(get(addr, path).await.status, 401, "{path}");
    }
    let ok = get(addr, "/getRules?type=flow&token=s3cret").await;
    assert_eq!((ok.status.as_u16(), ok.body.as_str()), (200, "[]"));
    let bearer = get_with(addr, "/version", &[("authorization", "Bearer s3cret")]).await;
    assert_eq!(bearer.status, 200);
}

#[test]
fn bad_security_settings_do_not_start() {
    let (sentinel, _) = instance();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _in = runtime.enter();
    let no_token = center(&sentinel).protect_reads(true).start();
    assert!(
        no_token
            .unwrap_err()
            .to_string()
            .contains("protect_reads needs a token")
    );
    let empty = center(&sentinel).token(" ").start();
    assert!(
        empty
            .unwrap_err()
            .to_string()
            .contains("token must not be empty")
    );
    let no_body = center(&sentinel).max_body_bytes(0).start();
    assert!(
        no_body
            .unwrap_err()
            .to_string()
            .contains("max_body_bytes must be > 0")
    );
    let no_interval = center(&sentinel)
        .dashboard("127.0.0.1:1")
        .heartbeat_interval(std::time::Duration::ZERO)
        .start();
    assert!(
        no_interval
            .unwrap_err()
            .to_string()
            .contains("heartbeat interval must be > 0")
    );
}

#[tokio::test]
async fn an_oversized_body_is_refused_and_changes_nothing() {
    let (sentinel, _) = instance();
    let server = center(&sentinel)
        .allow_writes(true)
        .max_body_bytes(1024)
        .start()
        .unwrap();
    let addr = server.local_addr();
    let many: Vec<String> = (0..100)
        .map(|i| format!(r#"{{"resource":"r{i}","count":1}}"#))
        .collect();
    let data = format!("[{}]", many.join(","));
    let big = post_form(addr, "/setRules", &[("type", "flow"), ("data", &data)]).await;
    assert_eq!(big.status, 413, "{}", big.body);
    assert!(sentinel.flow_rules().rules().is_empty());
    let small = post_form(addr, "/setRules", &[("type", "flow"), ("data", ONE_RULE)]).await;
    assert_eq!(small.status, 200, "{}", small.body);
}

#[tokio::test]
async fn a_bad_set_rules_reports_every_problem_and_changes_nothing() {
    let (sentinel, _) = instance();
    sentinel.flow_rules().load(kept()).unwrap();
    let server = writable_server(&sentinel);
    let addr = server.local_addr();
    let data = r#"[{"resource":"a","count":-1},{"resource":"b","count":1,"strategy":9},{"resource":"c","count":1}]"#;
    let answer = post_form(addr, "/setRules", &[("type", "flow"), ("data", data)]).await;
    assert_eq!(answer.status, 400);
    let lines: Vec<&str> = answer.body.lines().collect();
    assert_eq!(lines.len(), 2, "{}", answer.body);
    assert!(
        lines[0].starts_with("flow[0] (a): count"),
        "{}",
        answer.body
    );
    assert!(
        lines[1].starts_with(
            "flow[1] (b): strategy: must be 0 (direct) or 1 (relate) or 2 (chain), got 9"
        ),
        "{}",
        answer.body
    );
    assert_eq!(sentinel.flow_rules().rules(), kept());
    for (params, why) in [
        (vec![("type", "flow"), ("data", "[{")], "bad JSON"),
        (vec![("type", "flow")], "data: is required"),
        (vec![("type", "bogus"), ("data", "[]")], "invalid type"),
        (vec![("data", "[]")], "type: is required"),
    ] {
        let answer = post_form(addr, "/setRules", &params).await;
        assert_eq!(answer.status, 400);
        assert!(answer.body.contains(why), "{why}: {}", answer.body);
    }
    assert_eq!(sentinel.flow_rules().rules(), kept());
}

#[tokio::test]
async fn a_page_of_another_site_cannot_change_state() {
    let (sentinel, _) = instance();
    let server = writable_server(&sentinel);
    let addr = server.local_addr();
    let host = addr.to_string();
    let same = format!("http://{host}");
    let cases: [(&[(&str, &str)], u16); 5] = [
        (&[("origin", "http://evil.example")], 403),
        (&[("sec-fetch-site", "cross-site")], 403),
        (&[("sec-fetch-site", "same-site")], 403),
        (
            &[("origin", same.as_str()), ("sec-fetch-site", "same-origin")],
            200,
        ),
        (&[], 200),
    ];
    for (headers, status) in cases {
        let answer = send(
            Method::POST,
            addr,
            "/setSwitch",
            headers,
            Some("value=false".into()),
        )
        .await;
        assert_eq!(answer.status, status, "{headers:?}: {}", answer.body);
        assert_eq!(sentinel.is_enabled(), status != 200, "{headers:?}");
        sentinel.set_enabled(true);
    }
    // Reads from other sites stay possible (the page may be embedded).
    let read = get_with(addr, "/getSwitch", &[("sec-fetch-site", "cross-site")]).await;
    assert_eq!(read.status, 200);
}

#[tokio::test]
async fn on_loopback_only_loopback_host_names_are_served() {
    let (sentinel, _) = instance();
    let server = writable_server(&sentinel);
    let addr = server.local_addr();
    let port = addr.port();
    let rebound = format!("evil.example:{port}");
    let refused = get_with(addr, "/setSwitch?value=false", &[("host", &rebound)]).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(sentinel.is_enabled());
    let read = get_with(addr, "/getRules?type=flow", &[("host", &rebound)]).await;
    assert_eq!(read.status, 403);
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ] {
        let answer = get_with(addr, "/getSwitch", &[("host", &host)]).await;
        assert_eq!(answer.status, 200, "{host}");
    }
}

#[tokio::test]
async fn a_get_write_from_an_image_with_a_foreign_referer_is_refused() {
    let (sentinel, _) = instance();
    sentinel.flow_rules().load(kept()).unwrap();
    let server = writable_server(&sentinel);
    let addr = server.local_addr();
    let evil = [("referer", "http://evil.example/page")];
    for path in ["/setSwitch?value=false", "/setRules?type=flow&data=%5B%5D"] {
        for headers in [&evil[..], &[]] {
            let answer = get_with(addr, path, headers).await;
            assert_eq!(answer.status, 405, "{path} {headers:?}: {}", answer.body);
            assert!(answer.body.contains("allow_get_writes"), "{}", answer.body);
        }
    }
    assert!(sentinel.is_enabled());
    assert_eq!(sentinel.flow_rules().rules(), kept());
    // A POST with a foreign Referer (no Origin, no Sec-Fetch-Site: an
    // older browser's form) is refused too; the page's own is not.
    let foreign = post_with(addr, "/setSwitch", &evil, "value=false").await;
    assert_eq!(foreign.status, 403, "{}", foreign.body);
    assert!(sentinel.is_enabled());
    let own = format!("http://{addr}/");
    let same = post_with(addr, "/setSwitch", &[("referer", &own)], "value=false").await;
    assert_eq!(same.status, 200, "{}", same.body);
    assert!(!sentinel.is_enabled());
    // A write's body is a form.
    let json = send(
        Method::POST,
        addr,
        "/setSwitch",
        &[("content-type", "application/json")],
        Some("value=true".into()),
    )
    .await;
    assert_eq!(json.status, 415, "{}", json.body);
    assert!(!sentinel.is_enabled());
}

#[tokio::test]
async fn get_writes_enabled_for_an_old_dashboard_still_refuse_a_foreign_referer() {
    let (sentinel, _) = instance();
    let server = center(&sentinel)
        .allow_writes(true)
        .allow_get_writes(true)
        .start()
        .unwrap();
    let addr = server.local_addr();
    let evil = get_with(
        addr,
        "/setSwitch?value=false",
        &[("referer", "http://evil.example/")],
    )
    .await;
    assert_eq!(evil.status, 403, "{}", evil.body);
    assert!(sentinel.is_enabled());
    assert_eq!(get(addr, "/setSwitch?value=false").await.status, 200);
    assert!(!sentinel.is_enabled());
    let put = send(Method::PUT, addr, "/setSwitch?value=true", &[], None).await;
    assert_eq!(put.status, 405);
}

#[tokio::test]
async fn a_duplicated_parameter_or_header_is_refused_and_changes_nothing() {
    let (sentinel, _) = instance();
    sentinel
        .degrade_rules()
        .load(vec![sentinel_flow_core::degrade::DegradeRule::new(
            "kept",
            sentinel_flow_core::degrade::DegradeGrade::ErrorCount,
            5.0,
        )])
        .unwrap();
    let server = writable_server(&sentinel);
    let addr = server.local_addr();
    let degrade_before = sentinel.degrade_rules().rules();
    for (path, body) in [
        ("/setRules", "type=flow&type=degrade&data=%5B%5D"),
        ("/setRules", "type=degrade&data=%5B%5D&data=%5B%5D"),
        ("/setRules?type=flow", "type=degrade&data=%5B%5D"),
        ("/setSwitch", "value=true&value=false"),
    ] {
        let answer = post_with(addr, path, &[], body).await;
        assert_eq!(answer.status, 400, "{path} {body}: {}", answer.body);
        assert!(
            answer.body.contains("given more than once"),
            "{}",
            answer.body
        );
    }
    assert_eq!(sentinel.degrade_rules().rules(), degrade_before);
    assert!(sentinel.is_enabled());
    let reads = get(addr, "/getRules?type=flow&type=degrade").await;
    assert_eq!(reads.status, 400);

    // Two Host headers, raw (a client library would merge or refuse them).
    let request = b"POST /setSwitch HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 11\r\nConnection: close\r\n\r\nvalue=false";
    let status = raw_status(addr, request).await;
    assert!(status.starts_with("HTTP/1.1 400"), "{status}");
    assert!(sentinel.is_enabled());
}

/// A change to a server's settings, given the dashboard's and the
/// client's addresses.
type Configure = fn(CommandCenter, std::net::SocketAddr, std::net::IpAddr) -> CommandCenter;

#[tokio::test]
async fn off_loopback_writes_come_only_from_a_dashboard_an_allowed_peer_or_with_the_token() {
    let any: std::net::IpAddr = "0.0.0.0".parse().unwrap();
    let localhost: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let (sentinel, _) = instance();
    // A port with nothing listening, as the dashboard: its address is
    // what counts.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dashboard = closed.local_addr().unwrap();
    drop(closed);
    let cases: [(&str, Configure, u16); 4] = [
        ("nobody allowed", |c, _, _| c, 403),
        ("the dashboard", |c, d, _| c.dashboard(d.to_string()), 200),
        ("an allowed peer", |c, _, ip| c.allow_writes_from(ip), 200),
        (
            "another peer allowed",
            |c, _, _| c.allow_writes_from("10.9.9.9".parse().unwrap()),
            403,
        ),
    ];
    for (case, configure, status) in cases {
        let server = configure(
            center(&sentinel).bind(any).allow_writes(true),
            dashboard,
            localhost,
        )
        .start()
        .unwrap();
        let addr = std::net::SocketAddr::new(localhost, server.port());
        let answer = post_with(addr, "/setSwitch", &[], "value=false").await;
        assert_eq!(answer.status, status, "{case}: {}", answer.body);
        if status == 403 {
            assert!(answer.body.contains("allow_writes_from"), "{}", answer.body);
            assert!(answer.body.contains("127.0.0.1"), "{}", answer.body);
        }
        assert_eq!(sentinel.is_enabled(), status != 200, "{case}");
        sentinel.set_enabled(true);
        // Reads stay open to anyone.
        assert_eq!(get(addr, "/getSwitch").await.status, 200);
    }
    // With a token, the token is what counts.
    let server = center(&sentinel)
        .bind(any)
        .allow_writes(true)
        .token("s3cret")
        .start()
        .unwrap();
    let addr = std::net::SocketAddr::new(localhost, server.port());
    let answer = post_with(
        addr,
        "/setSwitch",
        &[("authorization", "Bearer s3cret")],
        "value=false",
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(!sentinel.is_enabled());
}

#[tokio::test]
async fn on_any_address_the_host_must_name_this_machine() {
    let (sentinel, _) = instance();
    let server = center(&sentinel)
        .bind("0.0.0.0".parse().unwrap())
        .host_name("sentinel.internal")
        .start()
        .unwrap();
    let port = server.port();
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    for (host, status) in [
        (format!("evil.example:{port}"), 403),
        (format!("10.255.255.1:{port}"), 403),
        (format!("sentinel.internal:{port}"), 200),
        (format!("SENTINEL.internal:{port}"), 200),
        (format!("localhost:{port}"), 200),
        (format!("127.0.0.1:{port}"), 200),
    ] {
        let answer = get_with(addr, "/getSwitch", &[("host", &host)]).await;
        assert_eq!(answer.status, status, "{host}: {}", answer.body);
    }
}
