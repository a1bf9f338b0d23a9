//! The dashboard's cluster pages against this machine, with and without
//! an attached cluster client: every cluster request `SentinelApiClient`
//! (1.8.9) sends to a machine, written as its Apache client writes it
//! (GETs with the parameters in the query; POSTs as a UTF-8 form for a
//! machine announcing 1.7.1 or later), and every answer read as the
//! dashboard reads it: a 2xx body parsed by fastjson into the dashboard's
//! class (`ClusterClientInfoVO`: a `String` and three `Integer`s, unknown
//! fields ignored) or compared with `success`; a 400 whose body holds
//! `Unknown command` as a command the machine lacks; any other failure as
//! the command's failure, its body the reason shown.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::{dashboard_exchange, instance, writable_server};
use sentinel_flow_core::flow::{ClusterEndpoint, ClusterFlow, ClusterTokens, TokenAnswer};
use serde_json::{Map, Value, json};

/// What `SentinelApiClient.executeCommand` completes its future with.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// 2xx: the body.
    Body(String),
    /// `CommandNotFoundException`: shown as an unsupported version.
    NotFound,
    /// `CommandFailedException(body)`.
    Failed(String),
}

/// One request on its own connection, as Apache's client writes it,
/// its answer read as `executeCommand` reads it.
async fn exchange(addr: SocketAddr, head: &str, body: &str) -> Outcome {
    let (status, body) = dashboard_exchange(addr, head, body).await;
    match status {
        200..=299 => Outcome::Body(body),
        400 if body.contains("Unknown command") => Outcome::NotFound,
        _ => Outcome::Failed(body),
    }
}

/// `executeCommand(ip, port, api, params, false)`: a GET, the parameters
/// in the query.
async fn get(addr: SocketAddr, api: &str, params: &[(&str, &str)]) -> Outcome {
    let mut path = format!("/{api}");
    if !params.is_empty() {
        path.push('?');
        path.push_str(
            &form_urlencoded::Serializer::new(String::new())
                .extend_pairs(params)
                .finish(),
        );
    }
    exchange(addr, &format!("GET {path} HTTP/1.1"), "").await
}

/// `executeCommand(app, ip, port, api, params, true)` to a 1.7.1+ machine:
/// a UTF-8 form POST.
async fn post(addr: SocketAddr, api: &str, params: &[(&str, &str)]) -> Outcome {
    let form = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(params)
        .finish();
    let head = format!(
        "POST /{api} HTTP/1.1\r\nContent-Length: {}\r\nContent-Type: application/x-www-form-urlencoded; charset=UTF-8",
        form.len()
    );
    exchange(addr, &head, &form).await
}

/// `JSON.parseObject(body, ClusterClientInfoVO.class)`: its four fields
/// (`serverHost` a string, the others Java `Integer`s), each `null` when
/// absent; unknown fields ignored; anything else a parse error.
fn client_info_vo(body: &str) -> Value {
    let object: Map<String, Value> = serde_json::from_str(body).expect("a JSON object");
    let int = |name: &str| match object.get(name) {
        None | Some(Value::Null) => Value::Null,
        Some(Value::Number(n)) => {
            let n = n.as_i64().expect("an integer");
            assert!(i32::try_from(n).is_ok(), "{name} overflows Integer: {n}");
            json!(n)
        }
        Some(other) => panic!("{name} is not an Integer: {other}"),
    };
    let host = match object.get("serverHost") {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(s)) => json!(s),
        Some(other) => panic!("serverHost is not a String: {other}"),
    };
    json!({
        "serverHost": host,
        "serverPort": int("serverPort"),
        "clientState": int("clientState"),
        "requestTimeout": int("requestTimeout"),
    })
}

/// A connected Redis client as the core sees it: grants, answers or not
/// as told, and says where it asks.
#[derive(Debug)]
struct Client {
    down: AtomicBool,
    endpoint: Option<ClusterEndpoint>,
}

impl Client {
    fn at(endpoint: Option<ClusterEndpoint>) -> Arc<Self> {
        Arc::new(Client {
            down: AtomicBool::new(false),
            endpoint,
        })
    }
}

impl ClusterTokens for Client {
    fn acquire(&self, _: &ClusterFlow, _: u32, _: u64) -> TokenAnswer {
        TokenAnswer::Granted
    }

    fn is_available(&self) -> bool {
        !self.down.load(Ordering::SeqCst)
    }

    fn endpoint(&self) -> Option<ClusterEndpoint> {
        self.endpoint.clone()
    }
}

/// A service whose `endpoint` panics (a bug in it).
#[derive(Debug)]
struct Panicking;

impl ClusterTokens for Panicking {
    fn acquire(&self, _: &ClusterFlow, _: u32, _: u64) -> TokenAnswer {
        TokenAnswer::Granted
    }

    fn endpoint(&self) -> Option<ClusterEndpoint> {
        panic!("endpoint");
    }
}

fn redis_endpoint() -> ClusterEndpoint {
    ClusterEndpoint::new("10.0.0.7", 6380, Duration::from_millis(2))
        .with_connect_timeout(Duration::from_secs(1))
}

#[tokio::test]
async fn fetch_config_answers_the_redis_endpoint_while_a_client_is_attached() {
    let (sentinel, _clock) = instance();
    let server = writable_server(&sentinel);
    let addr = server.local_addr();
    let client = Client::at(Some(redis_endpoint()));
    sentinel.set_cluster_tokens(Some(client.clone()));

    // `getClusterUniversalState`: the mode first, the client's config
    // only when `clientAvailable`.
    let Outcome::Body(mode) = get(addr, "getClusterMode", &[]).await else {
        panic!("getClusterMode failed");
    };
    let mode: Value = serde_json::from_str(&mode).unwrap();
    assert_eq!(mode["clientAvailable"], true);
    let Outcome::Body(body) = get(addr, "cluster/client/fetchConfig", &[]).await else {
        panic!("fetchConfig failed");
    };
    assert_eq!(
        body,
        r#"{"clientState":2,"connectTimeout":1000,"requestTimeout":2,"serverHost":"10.0.0.7","serverPort":6380}"#
    );
    assert_eq!(
        client_info_vo(&body),
        json!({"serverHost": "10.0.0.7", "serverPort": 6380, "clientState": 2, "requestTimeout": 2})
    );

    // Attached, Redis not answering: pending (reconnecting), same endpoint.
    client.down.store(true, Ordering::SeqCst);
    let Outcome::Body(body) = get(addr, "cluster/client/fetchConfig", &[]).await else {
        panic!("fetchConfig failed");
    };
    assert_eq!(client_info_vo(&body)["clientState"], 1);
    assert_eq!(client_info_vo(&body)["serverPort"], 6380);
}

#[tokio::test]
async fn fetch_config_without_a_client_answers_as_java_with_no_client_config() {
    let (sentinel, _clock) = instance();
    let server = writable_server(&sentinel);
    let addr = server.local_addr();
    let java_unconfigured = r#"{"clientState":0,"requestTimeout":20}"#;
    assert_eq!(
        get(addr, "cluster/client/fetchConfig", &[]).await,
        Outcome::Body(java_unconfigured.into())
    );
    assert_eq!(
        client_info_vo(java_unconfigured),
        json!({"serverHost": null, "serverPort": null, "clientState": 0, "requestTimeout": 20})
    );

    // A service that does not say where it asks: started, Java's defaults.
    sentinel.set_cluster_tokens(Some(Client::at(None)));
    assert_eq!(
        get(addr, "cluster/client/fetchConfig", &[]).await,
        Outcome::Body(r#"{"clientState":2,"requestTimeout":20}"#.into())
    );
}

#[tokio::test]
async fn fetch_config_survives_a_service_whose_endpoint_panics() {
    let (sentinel, _clock) = instance();
    let server = writable_server(&sentinel);
    sentinel.set_cluster_tokens(Some(Arc::new(Panicking)));
    assert_eq!(
        get(server.local_addr(), "cluster/client/fetchConfig", &[]).await,
        Outcome::Body(r#"{"clientState":2,"requestTimeout":20}"#.into())
    );
}

#[test]
fn a_sub_millisecond_request_timeout_reads_as_one_ms() {
    let rt = common::runtime();
    rt.block_on(async {
        let (sentinel, _clock) = instance();
        let server = writable_server(&sentinel);
        let endpoint = ClusterEndpoint::new("redis", 6379, Duration::from_micros(500));
        sentinel.set_cluster_tokens(Some(Client::at(Some(endpoint))));
        let Outcome::Body(body) = get(server.local_addr(), "cluster/client/fetchConfig", &[]).await
        else {
            panic!("fetchConfig failed");
        };
        assert_eq!(client_info_vo(&body)["requestTimeout"], 1);
    });
}

#[tokio::test]
async fn set_cluster_mode_succeeds_only_for_the_mode_the_machine_is_in() {
    let (sentinel, _clock) = instance();
    let server = writable_server(&sentinel);
    let addr = server.local_addr();
    let set =
        |mode: &'static str| async move { get(addr, "setClusterMode", &[("mode", mode)]).await };
    let no_client = Outcome::Failed("token client mode not available: no SPI found".into());
    let no_server = Outcome::Failed("token server mode not available: no SPI found".into());
    let success = Outcome::Body("success".into());

    // `modifyClusterMode` succeeds on the body `success` alone.
    assert_eq!(set("0").await, no_client);
    assert_eq!(set("1").await, no_server);
    assert_eq!(set("-1").await, success);
    assert_eq!(
        get(addr, "setClusterMode", &[]).await,
        Outcome::Failed("invalid parameter".into())
    );
    assert_eq!(
        set("client").await,
        Outcome::Failed("invalid parameter".into())
    );
    assert!(matches!(set("7").await, Outcome::Failed(why) if why.contains("mode")));

    sentinel.set_cluster_tokens(Some(Client::at(Some(redis_endpoint()))));
    assert_eq!(set("0").await, success);
    assert_eq!(set("1").await, no_server);
    let Outcome::Failed(why) = set("-1").await else {
        panic!("leaving client mode is refused");
    };
    assert!(why.contains("attached by the application"), "{why}");
    assert!(sentinel.has_cluster_tokens());
}

#[tokio::test]
async fn modify_client_config_is_refused_and_changes_nothing() {
    let (sentinel, _clock) = instance();
    let server = writable_server(&sentinel);
    let addr = server.local_addr();
    sentinel.set_cluster_tokens(Some(Client::at(Some(redis_endpoint()))));
    // The dashboard's `ClusterClientConfig` as fastjson writes it.
    let config = r#"{"connectTimeout":10000,"requestTimeout":20,"serverHost":"192.168.1.9","serverPort":18730}"#;
    let Outcome::Failed(why) = post(addr, "cluster/client/modifyConfig", &[("data", config)]).await
    else {
        panic!("modifyConfig must fail");
    };
    assert!(why.contains("set by the application"), "{why}");
    assert_eq!(
        post(addr, "cluster/client/modifyConfig", &[]).await,
        Outcome::Failed("empty data".into())
    );
    let Outcome::Body(body) = get(addr, "cluster/client/fetchConfig", &[]).await else {
        panic!("fetchConfig failed");
    };
    assert_eq!(client_info_vo(&body)["serverHost"], "10.0.0.7");
}

#[tokio::test]
async fn token_server_commands_are_unknown_as_on_a_machine_without_the_server_module() {
    let (sentinel, _clock) = instance();
    let server = writable_server(&sentinel);
    let addr = server.local_addr();
    for attached in [false, true] {
        if attached {
            sentinel.set_cluster_tokens(Some(Client::at(Some(redis_endpoint()))));
        }
        assert_eq!(
            get(addr, "cluster/server/info", &[]).await,
            Outcome::NotFound
        );
        assert_eq!(
            get(
                addr,
                "cluster/server/modifyTransportConfig",
                &[("port", "18730"), ("idleSeconds", "600")]
            )
            .await,
            Outcome::NotFound
        );
        let flow_config = r#"{"exceedCount":1.0,"intervalMs":1000,"maxAllowedQps":30000.0,"maxOccupyRatio":1.0,"namespace":"app","sampleCount":10}"#;
        assert_eq!(
            post(
                addr,
                "cluster/server/modifyFlowConfig",
                &[("data", flow_config)]
            )
            .await,
            Outcome::NotFound
        );
        assert_eq!(
            post(
                addr,
                "cluster/server/modifyNamespaceSet",
                &[("data", r#"["app"]"#)]
            )
            .await,
            Outcome::NotFound
        );
    }
}

#[tokio::test]
async fn api_lists_the_cluster_client_commands() {
    let (sentinel, _clock) = instance();
    let server = writable_server(&sentinel);
    let Outcome::Body(body) = get(server.local_addr(), "api", &[]).await else {
        panic!("api failed");
    };
    let urls: Vec<Value> = serde_json::from_str::<Vec<Value>>(&body)
        .unwrap()
        .into_iter()
        .map(|c| c["url"].clone())
        .collect();
    for url in [
        "/getClusterMode",
        "/setClusterMode",
        "/cluster/client/fetchConfig",
        "/cluster/client/modifyConfig",
    ] {
        assert!(urls.contains(&json!(url)), "{url} not in {urls:?}");
    }
}
