//! A dashboard's `setRules` to one instance lands in a real etcd (started
//! by the test on 127.0.0.1 in a temp dir) and from there reaches another
//! instance that only watches the store.

mod common;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{instance, post_form};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_rules::source::{
    EtcdSource, KeyValue, RuleFormat, RuleSource, SentinelKeys, SourceWatcher,
};
use sentinel_flow_transport::CommandCenter;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// An `etcd` of its own, killed when dropped.
struct Etcd {
    client: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

impl Etcd {
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let client = free_port();
        let peer = format!("http://127.0.0.1:{}", free_port());
        let url = format!("http://127.0.0.1:{client}");
        let child = Command::new("etcd")
            .args(["--name", "test"])
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .args([
                "--listen-client-urls",
                &url,
                "--advertise-client-urls",
                &url,
            ])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("test={peer}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd is installed (apt-get install -y etcd-server)");
        let etcd = Etcd {
            client,
            child,
            _dir: dir,
        };
        // Ready when a source can read from it.
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let mut source = EtcdSource::open(&etcd.url()).unwrap();
            let keys = ["probe".to_owned()];
            if source.connect(&keys).is_ok() && source.read(&keys, 1024).is_ok() {
                return etcd;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("etcd on port {client} did not answer within 20 s");
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client)
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn eventually(limit: Duration, done: impl Fn() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    done()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dashboard_push_lands_in_etcd_and_reaches_every_instance() {
    let etcd = tokio::task::spawn_blocking(Etcd::start).await.unwrap();
    let format = || RuleFormat::sentinel_json(SentinelKeys::for_app("orders"));
    let watch = |sentinel: &Arc<sentinel_flow_core::Sentinel>| {
        SourceWatcher::new(EtcdSource::open(&etcd.url()).unwrap(), format())
            .backoff(Duration::from_millis(20), Duration::from_millis(200))
            .start(Arc::clone(sentinel))
            .unwrap()
    };
    let (pushed_to, _) = instance();
    let (other, _) = instance();
    let pushed_handle = watch(&pushed_to);
    let _other_handle = watch(&other);

    let server = CommandCenter::new(Arc::clone(&pushed_to))
        .port(0)
        .allow_writes(true)
        .rule_source(pushed_handle.store().unwrap())
        .start()
        .unwrap();
    let data = r#"[{"resource":"GET:/orders","count":50,"grade":1}]"#;
    let set = post_form(
        server.local_addr(),
        "/setRules",
        &[("type", "flow"), ("data", data)],
    )
    .await;
    assert_eq!((set.status.as_u16(), set.body.as_str()), (200, "success"));
    let expected = vec![FlowRule::new("GET:/orders", 50.0)];
    assert_eq!(pushed_to.flow_rules().rules(), expected);
    assert!(
        eventually(Duration::from_secs(2), || other.flow_rules().rules()
            == expected)
        .await,
        "the other instance has {:?}",
        other.flow_rules().rules()
    );

    // What etcd holds is what a Java instance reading the key would read.
    let mut reader = EtcdSource::open(&etcd.url()).unwrap();
    let keys = ["orders-flow-rules".to_owned()];
    reader.connect(&keys).unwrap();
    let values = reader.read(&keys, 1 << 20).unwrap();
    match values.get("orders-flow-rules") {
        KeyValue::Present(bytes) => {
            let text = String::from_utf8(bytes.clone()).unwrap();
            assert!(text.contains(r#""resource":"GET:/orders""#), "{text}");
        }
        other => panic!("orders-flow-rules: {other:?}"),
    }
}
