//! A fake Sentinel dashboard: it receives our heartbeats at
//! `/registry/machine`, reads `v` as the dashboard does, and then calls our
//! commands exactly as `SentinelApiClient` and `MetricFetcher` do (method,
//! path, parameters, form body and Content-Type by version). Rules pushed
//! this way take effect on entries of the instance.

mod common;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::any;
use common::{T0, get, send};
use hyper::Method;
use sentinel_flow_core::log::MetricLogConfig;
use sentinel_flow_core::{BlockKind, EntryType, ManualClock, ParamValue, Sentinel};
use sentinel_flow_transport::CommandCenter;
use tokio::sync::mpsc;

type Heartbeats = mpsc::UnboundedSender<HashMap<String, String>>;

/// The dashboard's registry: the heartbeat's parameters, from the query
/// and the form body, answered as the dashboard answers.
async fn registry(State(tx): State<Heartbeats>, uri: axum::http::Uri, body: Bytes) -> String {
    let mut params: HashMap<String, String> = HashMap::new();
    if let Some(q) = uri.query() {
        params.extend(form_urlencoded::parse(q.as_bytes()).into_owned());
    }
    params.extend(form_urlencoded::parse(&body).into_owned());
    let _ = tx.send(params);
    r#"{"success":true,"code":0,"msg":"success","data":null}"#.into()
}

async fn fake_dashboard() -> (SocketAddr, mpsc::UnboundedReceiver<HashMap<String, String>>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = axum::Router::new()
        .route("/registry/machine", any(registry))
        .with_state(tx);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, rx)
}

/// The dashboard's `VersionUtils.parseVersion`: `x.y.z[-suffix]`.
fn parse_version(v: &str) -> Option<(u32, u32, u32)> {
    let core = v.split('-').next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u32>().ok());
    Some((
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
        parts.next().flatten().unwrap_or(0),
    ))
}

/// What the dashboard learnt from a heartbeat.
struct Machine {
    addr: SocketAddr,
    version: (u32, u32, u32),
}

impl Machine {
    /// `SentinelApiClient.executeCommand` with an app: parameters as a POST
    /// form from 1.6.0 (a GET query before), the form's own Content-Type
    /// from 1.7.1 (an explicit one before).
    async fn command(&self, api: &str, params: &[(&str, &str)]) -> common::Answer {
        let encoded = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(params)
            .finish();
        if self.version < (1, 6, 0) {
            return get(self.addr, &format!("/{api}?{encoded}")).await;
        }
        let content_type = if self.version >= (1, 7, 1) {
            "application/x-www-form-urlencoded; charset=UTF-8"
        } else {
            "application/x-www-form-urlencoded"
        };
        send(
            Method::POST,
            self.addr,
            &format!("/{api}"),
            &[("content-type", content_type)],
            Some(encoded),
        )
        .await
    }

    /// `fetchItems`: no app, so always a GET.
    async fn fetch(&self, api: &str, kind: Option<&str>) -> serde_json::Value {
        let path = match kind {
            Some(kind) => format!("/{api}?type={kind}"),
            None => format!("/{api}"),
        };
        let answer = get(self.addr, &path).await;
        assert_eq!(answer.status, 200, "{path}: {}", answer.body);
        answer.json()
    }
}

/// `MetricNode.fromThinString`, as `MetricFetcher` reads each line.
#[derive(Debug, PartialEq)]
struct ThinNode {
    timestamp: u64,
    resource: String,
    pass: u64,
    block: u64,
    success: u64,
    exception: u64,
    rt: u64,
    occupied_pass: u64,
    concurrency: u64,
    classification: i32,
}

fn from_thin_string(line: &str) -> ThinNode {
    let s: Vec<&str> = line.split('|').collect();
    let n = |i: usize| s[i].parse::<u64>().unwrap();
    ThinNode {
        timestamp: n(0),
        resource: s[1].to_owned(),
        pass: n(2),
        block: n(3),
        success: n(4),
        exception: n(5),
        rt: n(6),
        occupied_pass: if s.len() >= 8 { n(7) } else { 0 },
        concurrency: if s.len() >= 9 { n(8) } else { 0 },
        classification: if s.len() == 10 {
            s[9].parse().unwrap()
        } else {
            0
        },
    }
}

#[tokio::test]
async fn the_dashboard_registers_us_and_its_rules_take_effect() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(T0);
    let sentinel = Arc::new(Sentinel::builder().clock(clock.clone()).build());
    let log = MetricLogConfig::new("dash-app").dir(dir.path());
    let mut writer = sentinel.metric_writer(log.clone());
    let (dashboard, mut heartbeats) = fake_dashboard().await;
    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .dashboard(dashboard.to_string())
        .heartbeat_interval(Duration::from_millis(50))
        .metric_log(&log)
        .allow_writes(true)
        .start()
        .unwrap();

    // The heartbeat, read as the dashboard's MachineRegistryController does.
    let beat = tokio::time::timeout(Duration::from_secs(10), heartbeats.recv())
        .await
        .expect("no heartbeat in 10 s")
        .unwrap();
    assert_eq!(beat["app"], "dash-app");
    assert_eq!(beat["app_type"], "0");
    assert!(!beat["hostname"].is_empty());
    let ip: IpAddr = beat["ip"].parse().expect("ip must be an IP literal");
    let port: u16 = beat["port"].parse().expect("port must be a real port");
    assert_eq!(port, server.port());
    assert_eq!(beat["version"], T0.to_string());
    assert_eq!(beat["timestamp"], T0.to_string());
    assert_eq!(beat["pid"], std::process::id().to_string());
    let version = parse_version(&beat["v"]).expect("v must parse as x.y.z[-suffix]");
    assert!(
        version >= (1, 7, 1),
        "{version:?}: rules would arrive as a GET"
    );
    let machine = Machine {
        addr: SocketAddr::new(ip, port),
        version,
    };
    // A second beat comes on the interval.
    tokio::time::timeout(Duration::from_secs(10), heartbeats.recv())
        .await
        .unwrap();

    // Flow: the rule list as fastjson writes the dashboard's FlowRule,
    // with a resource name that Java's double decoding would mangle.
    assert_eq!(
        machine.fetch("getRules", Some("flow")).await,
        serde_json::json!([])
    );
    let name = "GET:/search?q=a+b%20c";
    let flow = format!(
        r#"[{{"clusterMode":false,"controlBehavior":0,"count":0.0,"grade":1,"limitApp":"default","maxQueueingTimeMs":500,"resource":"{name}","strategy":0,"warmUpPeriodSec":10}}]"#
    );
    let set = machine
        .command("setRules", &[("type", "flow"), ("data", &flow)])
        .await;
    assert_eq!((set.status.as_u16(), set.body.as_str()), (200, "success"));
    let blocked = sentinel.entry(name).unwrap_err();
    assert_eq!(blocked.kind(), BlockKind::Flow);
    assert_eq!(
        machine.fetch("getRules", Some("flow")).await[0]["resource"],
        name
    );

    // Authority: a black list.
    let authority = r#"[{"resource":"GET:/admin","limitApp":"crawler","strategy":1}]"#;
    let set = machine
        .command("setRules", &[("type", "authority"), ("data", authority)])
        .await;
    assert_eq!(set.body, "success");
    let crawler = sentinel
        .entry_builder("GET:/admin")
        .origin("crawler")
        .enter();
    assert_eq!(crawler.unwrap_err().kind(), BlockKind::Authority);
    assert!(
        sentinel
            .entry_builder("GET:/admin")
            .origin("ops")
            .enter()
            .is_ok()
    );

    // Hot parameters: every value at 0 but "vip".
    let param = r#"[{"burstCount":0,"clusterMode":false,"controlBehavior":0,"count":0.0,"durationInSec":1,"grade":1,"limitApp":"default","maxQueueingTimeMs":0,"paramFlowItemList":[{"classType":"java.lang.String","count":5,"object":"vip"}],"paramIdx":0,"resource":"GET:/items"}]"#;
    let set = machine
        .command("setParamFlowRules", &[("data", param)])
        .await;
    assert_eq!(set.body, "success");
    let anon = [ParamValue::from("anon")];
    let vip = [ParamValue::from("vip")];
    let refused = sentinel.entry_builder("GET:/items").args(&anon).enter();
    assert_eq!(refused.unwrap_err().kind(), BlockKind::ParamFlow);
    assert!(
        sentinel
            .entry_builder("GET:/items")
            .args(&vip)
            .enter()
            .is_ok()
    );
    assert_eq!(
        machine.fetch("getParamFlowRules", None).await[0]["paramFlowItemList"][0]["object"],
        "vip"
    );

    // System and degrade: loaded and read back.
    let system = r#"[{"highestSystemLoad":-1.0,"highestCpuUsage":-1.0,"qps":0.0,"avgRt":-1,"maxThread":-1}]"#;
    assert_eq!(
        machine
            .command("setRules", &[("type", "system"), ("data", system)])
            .await
            .body,
        "success"
    );
    let inbound = sentinel
        .entry_builder("GET:/in")
        .entry_type(EntryType::Inbound)
        .enter();
    assert_eq!(inbound.unwrap_err().kind(), BlockKind::System);
    let degrade = r#"[{"resource":"GET:/pay","limitApp":"default","grade":2,"count":3,"timeWindow":10,"minRequestAmount":5,"slowRatioThreshold":1.0,"statIntervalMs":1000}]"#;
    assert_eq!(
        machine
            .command("setRules", &[("type", "degrade"), ("data", degrade)])
            .await
            .body,
        "success"
    );
    assert_eq!(
        machine.fetch("getRules", Some("degrade")).await[0]["count"],
        3.0
    );

    // Metrics: one second of traffic written to the log, then fetched as
    // MetricFetcher fetches (a window a few seconds back, refetch=false).
    for _ in 0..4 {
        let entry = sentinel.entry("GET:/a|b").unwrap();
        clock.advance_ms(5);
        drop(entry);
    }
    let _ = sentinel.entry(name);
    clock.set(T0 + 2_000);
    writer.write_pending(&sentinel).unwrap();
    let path = format!(
        "/metric?startTime={T0}&endTime={}&refetch=false",
        T0 + 1_999
    );
    let answer = get(machine.addr, &path).await;
    assert_eq!(answer.status, 200);
    let nodes: Vec<ThinNode> = answer.body.lines().map(from_thin_string).collect();
    let ab = nodes
        .iter()
        .find(|n| n.resource == "GET:/a_b")
        .expect("GET:/a|b as GET:/a_b");
    assert_eq!(
        (
            ab.timestamp,
            ab.pass,
            ab.block,
            ab.success,
            ab.exception,
            ab.rt
        ),
        (T0, 4, 0, 4, 0, 5)
    );
    assert_eq!(
        (ab.occupied_pass, ab.concurrency, ab.classification),
        (0, 0, 0)
    );
    let limited = nodes.iter().find(|n| n.resource == name).unwrap();
    assert!(limited.block >= 1, "{limited:?}");
    let one = get(machine.addr, &format!("{path}&identity=GET:/a%7Cb"))
        .await
        .body;
    assert_eq!(one.lines().count(), 1, "{one}");

    // The resource views the dashboard reads.
    let tree = machine.fetch("jsonTree", None).await;
    assert_eq!(tree[0]["resource"], "machine-root");
    let nodes = machine.fetch("clusterNode", Some("zero")).await;
    assert!(
        nodes
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["resource"] == "GET:/items")
    );
    let mode = machine.fetch("getClusterMode", None).await;
    assert_eq!(mode["mode"], -1);
}

#[tokio::test]
async fn an_old_dashboard_sending_rules_as_a_get_works_when_allowed() {
    let (sentinel, _) = common::instance();
    let server = common::center(&sentinel)
        .allow_writes(true)
        .allow_get_writes(true)
        .start()
        .unwrap();
    let machine = Machine {
        addr: server.local_addr(),
        version: (1, 5, 0),
    };
    let data = r#"[{"resource":"GET:/x","count":0,"grade":1}]"#;
    let set = machine
        .command("setRules", &[("type", "flow"), ("data", data)])
        .await;
    assert_eq!(set.body, "success");
    assert!(sentinel.entry("GET:/x").is_err());
}

#[tokio::test]
async fn a_dashboard_that_is_down_blocks_nothing() {
    // A port with nothing listening.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = closed.local_addr().unwrap();
    drop(closed);
    let (sentinel, _) = common::instance();
    let server = CommandCenter::new(sentinel)
        .port(0)
        .dashboard(dead.to_string())
        .heartbeat_interval(Duration::from_millis(10))
        .start()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(get(server.local_addr(), "/version").await.status, 200);
}

#[tokio::test]
async fn dropping_the_handle_stops_the_heartbeat() {
    let (dashboard, mut heartbeats) = fake_dashboard().await;
    let (sentinel, _) = common::instance();
    let server = CommandCenter::new(sentinel)
        .port(0)
        .dashboard(dashboard.to_string())
        .heartbeat_interval(Duration::from_millis(20))
        .start()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), heartbeats.recv())
        .await
        .unwrap();
    drop(server);
    // A beat already on the wire may still land; after that, none.
    tokio::time::sleep(Duration::from_millis(100)).await;
    while heartbeats.try_recv().is_ok() {}
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        heartbeats.try_recv().is_err(),
        "a heartbeat after the handle was dropped"
    );
}
