//! Security: writes off by default, the token, protected reads, the body
//! cap; every refused request changes nothing.

mod common;

use std::sync::Arc;

use common::{get, instance, post_form, send};
use hyper::Method;
use sentinel_core::flow::FlowRule;
use sentinel_transport::CommandCenter;

const ONE_RULE: &str = r#"[{"resource":"GET:/a","count":0,"grade":1}]"#;

#[tokio::test]
async fn writes_are_off_by_default_and_change_nothing() {
    let (sentinel, _) = instance();
    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .start()
        .unwrap();
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
    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .allow_writes(true)
        .token("s3cret")
        .start()
        .unwrap();
    let addr = server.local_addr();
    let form = "type=flow&data=%5B%7B%22resource%22%3A%22GET%3A%2Fa%22%2C%22count%22%3A0%7D%5D";
    let form_type = ("content-type", "application/x-www-form-urlencoded");
    for headers in [
        vec![form_type],
        vec![form_type, ("authorization", "Bearer wrong")],
    ] {
        let answer = send(Method::POST, addr, "/setRules", &headers, Some(form.into())).await;
        assert_eq!(answer.status, 401, "{}", answer.body);
        assert!(sentinel.flow_rules().rules().is_empty());
    }
    let wrong = send(
        Method::POST,
        addr,
        "/setRules?token=s3cre",
        &[form_type],
        Some(form.into()),
    )
    .await;
    assert_eq!(wrong.status, 401);
    assert!(sentinel.flow_rules().rules().is_empty());

    let bearer = [form_type, ("authorization", "Bearer s3cret")];
    let answer = send(Method::POST, addr, "/setRules", &bearer, Some(form.into())).await;
    assert_eq!(
        (answer.status.as_u16(), answer.body.as_str()),
        (200, "success")
    );
    assert_eq!(
        sentinel.flow_rules().rules(),
        vec![FlowRule::new("GET:/a", 0.0)]
    );

    let by_query = send(
        Method::POST,
        addr,
        "/setSwitch?token=s3cret",
        &[form_type],
        Some("value=false".into()),
    )
    .await;
    assert_eq!(by_query.status, 200);
    assert!(!sentinel.is_enabled());
    // Reads need no token unless protected.
    assert_eq!(get(addr, "/getSwitch").await.status, 200);
}

#[tokio::test]
async fn protected_reads_need_the_token_everywhere() {
    let (sentinel, _) = instance();
    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
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
    let bearer = send(
        Method::GET,
        addr,
        "/version",
        &[("authorization", "Bearer s3cret")],
        None,
    )
    .await;
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
    let no_token = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .protect_reads(true)
        .start();
    assert!(
        no_token
            .unwrap_err()
            .to_string()
            .contains("protect_reads needs a token")
    );
    let empty = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .token(" ")
        .start();
    assert!(
        empty
            .unwrap_err()
            .to_string()
            .contains("token must not be empty")
    );
    let no_body = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .max_body_bytes(0)
        .start();
    assert!(
        no_body
            .unwrap_err()
            .to_string()
            .contains("max_body_bytes must be > 0")
    );
    let no_interval = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
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
    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
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
    sentinel
        .flow_rules()
        .load(vec![FlowRule::new("kept", 5.0)])
        .unwrap();
    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .allow_writes(true)
        .start()
        .unwrap();
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
    assert_eq!(
        sentinel.flow_rules().rules(),
        vec![FlowRule::new("kept", 5.0)]
    );
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
    assert_eq!(
        sentinel.flow_rules().rules(),
        vec![FlowRule::new("kept", 5.0)]
    );
}

#[tokio::test]
async fn a_page_of_another_site_cannot_change_state() {
    let (sentinel, _) = instance();
    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .allow_writes(true)
        .start()
        .unwrap();
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
    let read = send(
        Method::GET,
        addr,
        "/getSwitch",
        &[("sec-fetch-site", "cross-site")],
        None,
    )
    .await;
    assert_eq!(read.status, 200);
}

#[tokio::test]
async fn on_loopback_only_loopback_host_names_are_served() {
    let (sentinel, _) = instance();
    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .allow_writes(true)
        .start()
        .unwrap();
    let addr = server.local_addr();
    let port = addr.port();
    let rebound = format!("evil.example:{port}");
    let refused = send(
        Method::GET,
        addr,
        "/setSwitch?value=false",
        &[("host", &rebound)],
        None,
    )
    .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(sentinel.is_enabled());
    let read = send(
        Method::GET,
        addr,
        "/getRules?type=flow",
        &[("host", &rebound)],
        None,
    )
    .await;
    assert_eq!(read.status, 403);
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ] {
        let answer = send(Method::GET, addr, "/getSwitch", &[("host", &host)], None).await;
        assert_eq!(answer.status, 200, "{host}");
    }
}
