//! `GET /live/data` on a `ManualClock` instance: the exact figures of the
//! last completed second, the minute's history, the busiest-first cap and
//! filter, breakers, rules, and bad queries refused with every problem.

use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use sentinel_flow_core::adaptive::{AdaptiveAlgorithm, AdaptiveRule};
use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::param_flow::{ParamFlowItem, ParamFlowRule};
use sentinel_flow_core::system::SystemRule;
use sentinel_flow_core::{ManualClock, RuleBook, Sentinel};
use serde_json::Value;
use tower::ServiceExt;

/// A second boundary of the instance clock.
const T0: u64 = 1_700_000_000_000;

fn instance() -> (Arc<Sentinel>, ManualClock) {
    let clock = ManualClock::new(T0);
    (
        Arc::new(Sentinel::builder().clock(clock.clone()).build()),
        clock,
    )
}

async fn get(sentinel: &Arc<Sentinel>, uri: &str) -> (StatusCode, String) {
    let app = sentinel_flow_transport::live_page(Arc::clone(sentinel));
    let response = app
        .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        .await
        .unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

async fn data(sentinel: &Arc<Sentinel>, query: &str) -> Value {
    let (status, body) = get(sentinel, &format!("/live/data{query}")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// In the second [T0, T0 + 1 s): 3 passes completing in 10, 20 and 30 ms
/// (the last with an error), then 2 refused by a 3 QPS rule.
fn one_busy_second(sentinel: &Sentinel, clock: &ManualClock) {
    sentinel
        .flow_rules()
        .load(vec![FlowRule::new("GET:/orders", 3.0)])
        .unwrap();
    clock.set(T0 + 100);
    let entries: Vec<_> = (0..3)
        .map(|_| sentinel.entry("GET:/orders").unwrap())
        .collect();
    assert!(sentinel.entry("GET:/orders").is_err());
    assert!(sentinel.entry("GET:/orders").is_err());
    for (i, entry) in entries.into_iter().enumerate() {
        clock.set(T0 + 110 + 10 * i as u64);
        if i == 2 {
            entry.set_error("boom");
        }
        drop(entry);
    }
}

#[tokio::test]
async fn the_last_completed_second_is_exact() {
    let (sentinel, clock) = instance();
    one_busy_second(&sentinel, &clock);
    // In the second still filling: not counted yet.
    clock.set(T0 + 1_200);
    let _held = sentinel.entry("GET:/orders").unwrap();
    clock.set(T0 + 1_500);

    let d = data(&sentinel, "").await;
    assert_eq!(d["now_ms"], T0 + 1_500);
    assert_eq!(d["second"]["start_ms"], T0);
    assert_eq!(d["second"]["end_ms"], T0 + 1_000);
    let row = &d["resources"][0];
    assert_eq!(row["name"], "GET:/orders");
    assert_eq!(
        (
            &row["pass"],
            &row["block"],
            &row["success"],
            &row["exception"]
        ),
        (&3.into(), &2.into(), &3.into(), &1.into())
    );
    assert_eq!(row["avg_rt"], 20.0);
    assert_eq!(row["min_rt"], 10);
    assert_eq!(row["concurrency"], 1, "the entry held now");
    assert_eq!(
        (&row["minute_pass"], &row["minute_block"]),
        (&3.into(), &2.into())
    );
    assert_eq!(row["rules"]["flow"], 1);
    assert_eq!(row["breaker"], Value::Null);
    let t = &d["totals"];
    assert_eq!(
        (&t["pass"], &t["block"], &t["concurrency"]),
        (&3.into(), &2.into(), &1.into())
    );
    assert_eq!(
        (&t["resources"], &t["matched"], &t["shown"]),
        (&1.into(), &1.into(), &1.into())
    );

    // One second on, that second is history and the last one is quiet but
    // for the pass of the held entry.
    clock.set(T0 + 2_000);
    let d = data(&sentinel, "").await;
    let row = &d["resources"][0];
    assert_eq!(
        (&row["pass"], &row["block"], &row["avg_rt"]),
        (&1.into(), &0.into(), &Value::Null)
    );
    assert_eq!(row["minute_pass"], 4);
}

#[tokio::test]
async fn the_selected_resource_has_a_minute_of_seconds() {
    let (sentinel, clock) = instance();
    clock.set(T0 - 5_000 + 300);
    drop(sentinel.entry("GET:/orders").unwrap());
    one_busy_second(&sentinel, &clock);
    clock.set(T0 + 1_999);

    let d = data(&sentinel, "?resource=GET:/orders").await;
    let h = &d["history"];
    assert_eq!(h["resource"], "GET:/orders");
    assert_eq!(h["start_ms"], T0 - 59_000);
    assert_eq!(h["step_ms"], 1_000);
    let pass: Vec<u64> = serde_json::from_value(h["pass"].clone()).unwrap();
    assert_eq!(pass.len(), 60);
    let mut expected = vec![0; 60];
    expected[54] = 1;
    expected[59] = 3;
    assert_eq!(pass, expected);
    assert_eq!(h["block"][59], 2);
    assert_eq!(h["exception"][59], 1);
    assert_eq!(h["avg_rt"][59], 20.0);
    assert_eq!(h["avg_rt"][58], Value::Null);
    assert_eq!(h["avg_rt"][54], 0.0);

    assert_eq!(
        data(&sentinel, "").await["history"],
        Value::Null,
        "none selected"
    );
    let unknown = data(&sentinel, "?resource=nope").await;
    assert_eq!(unknown["history"], Value::Null);
}

#[tokio::test]
async fn an_adaptive_rule_shows_its_limit_as_its_samples_move_it() {
    let (sentinel, clock) = instance();
    sentinel
        .adaptive_rules()
        .load(vec![AdaptiveRule {
            initial_limit: 2,
            min_limit: 1,
            max_limit: 10,
            window_ms: 100,
            min_samples: 1,
            ..AdaptiveRule::new("GET:/orders", AdaptiveAlgorithm::aimd())
        }])
        .unwrap();
    let state = |d: &Value| d["resources"][0]["adaptive"].clone();

    clock.set(T0 + 100);
    let first = sentinel.entry("GET:/orders").unwrap();
    let second = sentinel.entry("GET:/orders").unwrap();
    assert!(sentinel.entry("GET:/orders").is_err(), "the limit of 2");
    let d = data(&sentinel, "?resource=GET:/orders").await;
    assert_eq!(
        state(&d),
        serde_json::json!([{
            "limit_app": "default",
            "algorithm": "aimd",
            "limit": 2,
            "in_flight": 2,
            "reference_rtt_ms": 0.0,
            "last_rtt_ms": 0.0,
        }])
    );
    assert_eq!(d["history"]["adaptive"], state(&d), "the chart's copy");
    assert_eq!(d["resources"][0]["rules"]["adaptive"], 1);

    // The first exit opens a window; an exit 100 ms on folds it: two
    // calls in flight at a limit of 2, no failure, AIMD adds one.
    clock.set(T0 + 110);
    drop(first);
    clock.set(T0 + 250);
    let _third = sentinel.entry("GET:/orders").unwrap();
    drop(second);
    let d = data(&sentinel, "?resource=GET:/orders").await;
    let moved = &state(&d)[0];
    assert_eq!(moved["limit"], 3);
    assert_eq!(moved["in_flight"], 1);
    assert_eq!(moved["last_rtt_ms"], 80.0, "(10 + 150) / 2");
    assert_eq!(d["history"]["adaptive"][0]["limit"], 3);
    let rule = &d["rules"]["adaptive"];
    assert_eq!(rule["total"], 1);
    assert_eq!(rule["items"][0]["headline"], "aimd limit in 1..=10");

    // A resource without an adaptive rule has none; a removed rule goes.
    drop(sentinel.entry("GET:/users").unwrap());
    let d = data(&sentinel, "?resource=GET:/users&q=users").await;
    assert_eq!(d["resources"][0]["adaptive"], serde_json::json!([]));
    assert_eq!(d["history"]["adaptive"], serde_json::json!([]));
    sentinel.adaptive_rules().load(vec![]).unwrap();
    let d = data(&sentinel, "?resource=GET:/orders").await;
    assert_eq!(d["history"]["adaptive"], serde_json::json!([]));
}

#[tokio::test]
async fn busiest_first_capped_and_filtered() {
    let (sentinel, clock) = instance();
    clock.set(T0 + 10);
    for (i, name) in ["a", "b", "c", "d", "e", "quiet"].iter().enumerate() {
        let calls = if *name == "quiet" { 0 } else { 2 * i + 1 };
        drop(sentinel.entry(name).unwrap());
        for _ in 1..calls {
            drop(sentinel.entry(name).unwrap());
        }
    }
    clock.set(T0 + 1_000);
    let d = data(&sentinel, "?limit=3").await;
    let names: Vec<&str> = d["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["e", "d", "c"]);
    let t = &d["totals"];
    assert_eq!(
        (&t["resources"], &t["matched"], &t["shown"], &t["limit"]),
        (&6.into(), &6.into(), &3.into(), &3.into())
    );
    assert_eq!(
        t["pass"],
        1 + 3 + 5 + 7 + 9 + 1,
        "totals cover every resource, not only those listed"
    );

    let d = data(&sentinel, "?q=UI&limit=1000").await;
    let names: Vec<&str> = d["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["quiet"], "case is ignored");
    assert_eq!(d["totals"]["matched"], 1);
}

#[tokio::test]
async fn breakers_and_rules_of_every_kind() {
    let (sentinel, clock) = instance();
    let mut book = RuleBook::default();
    book.flow.push(FlowRule::new("GET:/orders", 100.0));
    let mut breaker = DegradeRule::new("GET:/orders", DegradeGrade::ErrorCount, 2.0);
    breaker.min_request_amount = 1;
    breaker.time_window_sec = 10;
    book.degrade.push(breaker);
    book.system.push(SystemRule {
        highest_cpu_usage: Some(0.8),
        avg_rt: Some(50),
        ..SystemRule::default()
    });
    book.authority.push(AuthorityRule::new(
        "GET:/admin",
        AuthorityStrategy::White,
        ["ops", "cron"],
    ));
    let mut param = ParamFlowRule::new("GET:/items", 0, 5.0);
    param
        .param_flow_item_list
        .push(ParamFlowItem::new("vip", 50.0));
    book.param_flow.push(param);
    sentinel.load_rule_book(book).unwrap();

    clock.set(T0 + 100);
    for _ in 0..3 {
        let entry = sentinel.entry("GET:/orders").unwrap();
        entry.set_error("boom");
    }
    clock.set(T0 + 500);
    let d = data(&sentinel, "").await;
    let b = &d["breakers"][0];
    assert_eq!(b["resource"], "GET:/orders");
    assert_eq!(b["state"], "open");
    assert_eq!(b["trips_on"], "errors > 2");
    assert_eq!(b["retry_in_ms"], 10_000 - 400);
    assert_eq!(d["breakers"].as_array().unwrap().len(), 1);

    clock.set(T0 + 1_000);
    let d = data(&sentinel, "").await;
    assert_eq!(d["resources"][0]["breaker"], "open");
    let r = &d["rules"];
    assert_eq!(r["flow"]["items"][0]["headline"], "≤ 100 QPS");
    assert_eq!(
        r["flow"]["items"][0]["details"],
        serde_json::json!(["reject past the limit", "callers: all"])
    );
    assert_eq!(r["degrade"]["items"][0]["headline"], "errors > 2");
    assert_eq!(r["system"]["items"][0]["headline"], "CPU ≤ 80%, RT ≤ 50 ms");
    assert_eq!(r["authority"]["items"][0]["headline"], "only ops, cron");
    assert_eq!(
        r["param_flow"]["items"][0]["headline"],
        "arg 0: ≤ 5 per s per value"
    );
    assert!(
        r["param_flow"]["items"][0]["details"]
            .as_array()
            .unwrap()
            .contains(&"vip → 50".into())
    );
    for kind in ["flow", "degrade", "system", "authority", "param_flow"] {
        assert_eq!(r[kind]["total"], 1, "{kind}");
    }
    assert_eq!(r["adaptive"]["total"], 0);
    let capped = data(&sentinel, "?rules=0").await;
    assert_eq!(capped["rules"]["flow"]["total"], 1);
    assert_eq!(capped["rules"]["flow"]["items"], serde_json::json!([]));
}

#[tokio::test]
async fn a_bad_query_is_refused_with_every_problem() {
    let (sentinel, _clock) = instance();
    let (status, body) = get(&sentinel, "/live/data?limit=0&rules=-1&sort=name").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        body,
        "limit: must be a whole number from 1 to 1000, got \"0\"\n\
         rules: must be a whole number from 0 to 1000, got \"-1\"\n\
         sort: unknown parameter (known: resource, q, limit, rules, token)\n"
    );
    let (status, _) = get(&sentinel, "/live/data?token=abc").await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the token is the access control's, not ours"
    );
}

#[tokio::test]
async fn the_page_and_its_assets() {
    let (sentinel, _clock) = instance();
    let app = sentinel_flow_transport::live_page(Arc::clone(&sentinel));
    let response = app
        .clone()
        .oneshot(Request::get("/?token=t%2B1").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers();
    assert_eq!(headers["content-type"], "text/html; charset=utf-8");
    let policy = headers["content-security-policy"].to_str().unwrap();
    assert!(policy.contains("default-src 'none'") && policy.contains("script-src 'self';"));
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let html = String::from_utf8(body.to_vec()).unwrap();
    assert!(html.contains("<canvas id=\"chart\""));
    assert!(
        html.contains("src=\"live/live.js?token=t%2B1\""),
        "the token goes on"
    );

    let (status, js) = get(&sentinel, "/live/live.js").await;
    assert_eq!(status, StatusCode::OK);
    assert!(js.contains("'live/data?'") && js.contains("q.set('token', token)"));
    let (status, css) = get(&sentinel, "/live/live.css").await;
    assert_eq!(status, StatusCode::OK);
    assert!(css.contains("prefers-color-scheme: dark"));
    let response = app
        .oneshot(Request::get("/live/live.js").body(Body::empty()).unwrap())
        .await
        .unwrap();
    assert_eq!(
        response.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
}

/// Not a check: how long one answer takes with 6 000 busy resources
/// (`cargo test --release -p sentinel-flow-transport --test live_page_data -- --ignored --nocapture`).
#[tokio::test]
#[ignore]
async fn cost_with_6000_resources() {
    let clock = ManualClock::new(T0);
    let sentinel = Arc::new(
        Sentinel::builder()
            .clock(clock.clone())
            .max_resources(10_000)
            .build(),
    );
    for second in 0..60 {
        clock.set(T0 + second * 1_000 + 10);
        for i in 0..6_000 {
            drop(sentinel.entry(&format!("GET:/r{i}")).unwrap());
        }
    }
    clock.set(T0 + 60_500);
    let mut times = Vec::new();
    for _ in 0..21 {
        let started = Instant::now();
        let d = data(&sentinel, "?resource=GET:/r1").await;
        times.push(started.elapsed());
        assert_eq!(d["totals"]["shown"], 50);
    }
    times.sort();
    let body = get(&sentinel, "/live/data?resource=GET:/r1").await.1;
    println!(
        "6000 resources, 60 s of traffic: median {:?} per answer (min {:?}, max {:?}), {} bytes",
        times[10],
        times[0],
        times[20],
        body.len()
    );
}
