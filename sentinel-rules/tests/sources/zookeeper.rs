//! ZooKeeper for the source tests: a real standalone server (Debian's
//! `zookeeperd`, run with `java` and its jars from /usr/share/java) on a
//! free loopback port with its own temp dir, killed on drop; a small
//! client of its own for what an operator's script writes; and the cases
//! only ZooKeeper has (sessions, watches on missing nodes, versions).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::{ManualClock, Sentinel};
use sentinel_flow_rules::source::{
    KeyValue, RuleFormat, RuleSource, SentinelKeys, SourceWatcher, WriteFailure, ZooKeeperSource,
};
use sentinel_flow_rules::{LoadOptions, RuleChange};

use crate::contract::Backend;

/// The jars a standalone server needs (SLF4J's no-op binding: quiet).
const CLASSPATH: [&str; 4] = [
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "slf4j-nop.jar",
];

/// The server's tick: sessions it grants last 2 to 20 ticks (1 s to 10 s).
const TICK_MS: u64 = 500;

/// The session timeout the tests' sources ask for.
const SESSION: Duration = Duration::from_secs(2);

/// A ZooKeeper server the test started.
#[derive(Debug)]
pub(crate) struct ZooKeeperBackend {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

impl ZooKeeperBackend {
    /// `127.0.0.1:port`.
    pub(crate) fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) {
        let config = self.dir.path().join("zoo.cfg");
        let data = self.dir.path().join("data");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(
            &config,
            format!(
                "tickTime={TICK_MS}\ndataDir={}\nclientPort={}\nclientPortAddress=127.0.0.1\n\
                 admin.enableServer=false\n4lw.commands.whitelist=\nmaxClientCnxns=0\n",
                data.display(),
                self.port
            ),
        )
        .unwrap();
        let classpath: Vec<PathBuf> = CLASSPATH
            .iter()
            .map(|jar| PathBuf::from("/usr/share/java").join(jar))
            .collect();
        assert!(
            classpath.iter().all(|jar| jar.exists()),
            "ZooKeeper's jars are installed (apt-get install -y zookeeperd)"
        );
        let log = std::fs::File::create(self.dir.path().join("server.log")).unwrap();
        let child = Command::new("java")
            // A small, quick JVM; room for a 10 MB node (the default limit
            // of a request is 1 MiB).
            .args(["-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"])
            .arg("-Djute.maxbuffer=16777216")
            .arg("-Dzookeeper.jmx.log4j.disable=true")
            .arg("-cp")
            .arg(std::env::join_paths(&classpath).unwrap())
            .arg("org.apache.zookeeper.server.ZooKeeperServerMain")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("java is installed (apt-get install -y zookeeperd)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if Client::open(&self.address()).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let log = std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
        panic!(
            "ZooKeeper on port {} did not answer within 10 s:\n{log}",
            self.port
        );
    }

    /// Stops the server's process (SIGSTOP) or lets it go on (SIGCONT).
    pub(crate) fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().unwrap().id().to_string();
        let status = Command::new("kill").args([signal, &pid]).status().unwrap();
        assert!(status.success());
    }

    fn client(&self) -> Client {
        Client::open(&self.address()).unwrap()
    }

    /// Deletes `key` (no-op when missing).
    pub(crate) fn delete(&self, key: &str) {
        let mut client = self.client();
        let (err, _) = client.call(2, &record().string(key).int(-1));
        assert!(err == 0 || err == -101, "delete {key}: {err}");
    }
}

impl Backend for ZooKeeperBackend {
    const NAME: &'static str = "zookeeper";
    type Source = ZooKeeperSource;

    fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut server = ZooKeeperBackend {
            port,
            dir: tempfile::tempdir().unwrap(),
            child: None,
        };
        server.spawn();
        server
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// `setData` with any version; when the node is missing, its parents
    /// and then itself are created.
    fn put(&self, key: &str, value: &[u8]) {
        let mut client = self.client();
        loop {
            match client.call(5, &record().string(key).bytes(value).int(-1)).0 {
                0 => return,
                -101 => {}
                err => panic!("setData {key}: {err}"),
            }
            let mut at = 0;
            while let Some(slash) = key[at + 1..].find('/') {
                at += 1 + slash;
                client.create(&key[..at], b"");
            }
            if client.create(key, value) == 0 {
                return;
            }
        }
    }

    fn source(&self) -> ZooKeeperSource {
        ZooKeeperSource::open(&self.address())
            .unwrap()
            .session_timeout(SESSION)
    }
}

impl Drop for ZooKeeperBackend {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A jute record being written.
struct Rec(Vec<u8>);

fn record() -> Rec {
    Rec(Vec::new())
}

impl Rec {
    fn int(mut self, v: i32) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn long(mut self, v: i64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn bytes(self, v: &[u8]) -> Self {
        let mut this = self.int(v.len() as i32);
        this.0.extend_from_slice(v);
        this
    }
    fn string(self, v: &str) -> Self {
        self.bytes(v.as_bytes())
    }
}

/// The operator's side: a session, requests one at a time, no watches.
struct Client {
    stream: TcpStream,
    xid: i32,
}

impl Client {
    fn open(address: &str) -> std::io::Result<Self> {
        let stream = TcpStream::connect_timeout(&address.parse().unwrap(), Duration::from_secs(1))?;
        stream.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut client = Client { stream, xid: 1 };
        let connect = record().int(0).long(0).int(10_000).long(0).bytes(&[0; 16]);
        client.send(&connect.0)?;
        client.frame()?;
        Ok(client)
    }

    fn send(&mut self, payload: &[u8]) -> std::io::Result<()> {
        let mut frame = (payload.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(payload);
        self.stream.write_all(&frame)
    }

    fn frame(&mut self) -> std::io::Result<Vec<u8>> {
        let mut len = [0; 4];
        self.stream.read_exact(&mut len)?;
        let mut body = vec![0; i32::from_be_bytes(len) as usize];
        self.stream.read_exact(&mut body)?;
        Ok(body)
    }

    /// The reply's error code and record.
    fn call(&mut self, op: i32, body: &Rec) -> (i32, Vec<u8>) {
        self.xid += 1;
        let mut payload = record().int(self.xid).int(op).0;
        payload.extend_from_slice(&body.0);
        self.send(&payload).unwrap();
        loop {
            let reply = self.frame().unwrap();
            let xid = i32::from_be_bytes(reply[0..4].try_into().unwrap());
            if xid == self.xid {
                let err = i32::from_be_bytes(reply[12..16].try_into().unwrap());
                return (err, reply[16..].to_vec());
            }
        }
    }

    /// Creates `key` (open ACL, persistent); the error code.
    fn create(&mut self, key: &str, value: &[u8]) -> i32 {
        let acl = record()
            .string(key)
            .bytes(value)
            .int(1)
            .int(31)
            .string("world")
            .string("anyone")
            .int(0);
        self.call(1, &acl).0
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let close = record().int(self.xid + 1).int(-11);
        let _ = self.send(&close.0);
    }
}

fn instance() -> Arc<Sentinel> {
    Arc::new(
        Sentinel::builder()
            .clock(ManualClock::new(1_700_000_000_000))
            .build(),
    )
}

fn eventually(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    done()
}

fn flow_count(sentinel: &Sentinel) -> Option<f64> {
    sentinel.rule_book().flow.first().map(|r| r.count)
}

const KEY: &str = "/sentinel/app-flow-rules";

fn json(count: u32) -> String {
    format!(r#"[{{"resource":"a","count":{count}}}]"#)
}

fn json_format() -> RuleFormat {
    RuleFormat::sentinel_json(SentinelKeys::none().key("flow", KEY))
}

/// Without the pings every third of the session timeout, the server
/// expires an idle session and the source loses its watches.
#[test]
fn a_quiet_spell_longer_than_the_session_timeout_keeps_the_session() {
    let server = ZooKeeperBackend::start();
    server.put(KEY, json(1).as_bytes());
    let sentinel = instance();
    let handle = SourceWatcher::new(server.source(), json_format())
        .start(sentinel.clone())
        .unwrap();
    std::thread::sleep(SESSION * 2);
    server.put(KEY, json(2).as_bytes());
    assert!(eventually(Duration::from_secs(2), || flow_count(&sentinel)
        == Some(2.0)));
    let state = handle.state();
    assert!(state.connected && state.disconnects == 0, "{state:?}");
}

/// A server that stops answering (paused past the session timeout, which
/// then expires the session): the source takes the silence for a lost
/// connection, keeps the rules, and on a new session reads the node again
/// and takes a change made meanwhile.
#[test]
fn a_server_paused_past_the_session_timeout_is_lost_then_followed_on_a_new_session() {
    let server = ZooKeeperBackend::start();
    server.put(KEY, json(1).as_bytes());
    let sentinel = instance();
    let handle = SourceWatcher::new(server.source(), json_format())
        .backoff(Duration::from_millis(20), Duration::from_millis(200))
        .start(sentinel.clone())
        .unwrap();
    server.signal("-STOP");
    let paused = Instant::now();
    assert!(eventually(SESSION * 2, || !handle.state().connected));
    assert!(paused.elapsed() < SESSION, "{:?}", paused.elapsed());
    let state = handle.state();
    assert!(
        state.last_error.as_deref().unwrap().contains("zookeeper"),
        "{state:?}"
    );
    assert_eq!(flow_count(&sentinel), Some(1.0));
    std::thread::sleep(SESSION);
    server.signal("-CONT");
    server.put(KEY, json(5).as_bytes());
    assert!(eventually(Duration::from_secs(3), || flow_count(&sentinel)
        == Some(5.0)));
    assert!(eventually(Duration::from_secs(1), || handle
        .state()
        .connected));
    assert_eq!(handle.state().disconnects, 1);
}

/// `getData` sets no watch on a missing node; `exists` does, and its
/// creation is told.
#[test]
fn a_missing_node_reads_as_absent_and_its_creation_is_followed() {
    let server = ZooKeeperBackend::start();
    let sentinel = instance();
    let handle = SourceWatcher::new(server.source(), json_format())
        .start(sentinel.clone())
        .unwrap();
    assert_eq!(flow_count(&sentinel), None);
    assert!(handle.state().connected);
    server.put(KEY, json(3).as_bytes());
    assert!(eventually(Duration::from_secs(2), || flow_count(&sentinel)
        == Some(3.0)));
    server.delete(KEY);
    assert!(eventually(Duration::from_secs(2), || flow_count(&sentinel).is_none()));
    server.put(KEY, json(4).as_bytes());
    assert!(eventually(Duration::from_secs(2), || flow_count(&sentinel)
        == Some(4.0)));
}

/// The version guards the write, not the bytes: a node changed and set
/// back to the value read is a conflict still.
#[test]
fn a_write_on_a_stale_version_is_a_conflict_even_when_the_value_came_back() {
    let server = ZooKeeperBackend::start();
    server.put(KEY, b"a");
    let mut source = server.source();
    let keys = vec![KEY.to_owned()];
    source.connect(&keys).unwrap();
    let read = source.read(&keys, 1024).unwrap();
    assert_eq!(read.get(KEY), &KeyValue::Present(b"a".to_vec()));
    let writer = source.writer().unwrap();
    server.put(KEY, b"b");
    server.put(KEY, b"a");
    let stale = writer.compare_and_set(KEY, Some(b"a"), b"c");
    assert!(
        matches!(&stale, Err(WriteFailure::Conflict(why)) if why.contains("version")),
        "{stale:?}"
    );
    // Read again: the version is the new one, and the write goes.
    source.read(&keys, 1024).unwrap();
    writer.compare_and_set(KEY, Some(b"a"), b"c").unwrap();
    assert_eq!(
        source.read(&keys, 1024).unwrap().get(KEY),
        &KeyValue::Present(b"c".to_vec())
    );
    // Written twice in a row by the same writer: its own write is the
    // version it knows.
    writer.compare_and_set(KEY, Some(b"c"), b"d").unwrap();
}

/// "Must not exist" is `create`: with its parents when they are missing;
/// a node another writer created first is a conflict.
#[test]
fn a_write_to_a_missing_node_creates_it_and_a_second_create_is_a_conflict() {
    let server = ZooKeeperBackend::start();
    let writer = server.source().writer().unwrap();
    let key = "/sentinel/deep/app-flow-rules";
    writer.compare_and_set(key, None, b"first").unwrap();
    let second = writer.compare_and_set(key, None, b"second");
    assert!(
        matches!(&second, Err(WriteFailure::Conflict(why)) if why.contains("exists")),
        "{second:?}"
    );
    let mut source = server.source();
    let keys = vec![key.to_owned()];
    source.connect(&keys).unwrap();
    assert_eq!(
        source.read(&keys, 1024).unwrap().get(key),
        &KeyValue::Present(b"first".to_vec())
    );
    // A writer that never read compares the bytes, then the version.
    let other = server.source().writer().unwrap();
    let stale = other.compare_and_set(key, Some(b"zzz"), b"x");
    assert!(matches!(stale, Err(WriteFailure::Conflict(_))), "{stale:?}");
    other.compare_and_set(key, Some(b"first"), b"x").unwrap();
}

/// A node over the watcher's limit is refused unread (`exists` tells its
/// length; `getData` is not sent), naming the key; the last good stays.
#[test]
fn a_node_over_the_max_size_is_refused_unread() {
    let server = ZooKeeperBackend::start();
    server.put(KEY, json(1).as_bytes());
    let mut source = server.source();
    let keys = vec![KEY.to_owned()];
    source.connect(&keys).unwrap();
    server.put(KEY, &[b' '; 5000]);
    assert_eq!(
        source.read(&keys, 1000).unwrap().get(KEY),
        &KeyValue::TooLarge(5000)
    );
    let errors = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = errors.clone();
    server.put(KEY, json(1).as_bytes());
    let sentinel = instance();
    let handle = SourceWatcher::new(server.source(), json_format())
        .options(LoadOptions::default().max_size(1000))
        .on_failure(move |e| seen.lock().unwrap().push(e.to_string()))
        .start(sentinel.clone())
        .unwrap();
    server.put(KEY, &[b' '; 5000]);
    let expected =
        format!("key {KEY}: the value is 5000 bytes, over the limit of 1000 bytes; refused unread");
    assert!(
        eventually(Duration::from_secs(2), || errors
            .lock()
            .unwrap()
            .iter()
            .any(|e| e.contains(&expected))),
        "{:?}",
        errors.lock().unwrap()
    );
    assert_eq!(flow_count(&sentinel), Some(1.0));
    assert!(handle.state().connected);
    // The watch set by `exists` on the node over the limit tells its
    // next change.
    server.put(KEY, json(2).as_bytes());
    assert!(eventually(Duration::from_secs(2), || flow_count(&sentinel)
        == Some(2.0)));
}

/// A key that is not a node path is refused naming it, not sent.
#[test]
fn a_key_that_is_not_a_node_path_is_refused_naming_it() {
    let server = ZooKeeperBackend::start();
    let mut source = server.source();
    let keys = vec!["app-flow-rules".to_owned()];
    source.connect(&keys).unwrap();
    let read = source.read(&keys, 1024).unwrap();
    assert!(
        matches!(read.get("app-flow-rules"), KeyValue::Unreadable(why) if why.contains("starts with /")),
        "{read:?}"
    );
    let error = SourceWatcher::new(
        server.source(),
        RuleFormat::sentinel_json(SentinelKeys::none().key("flow", "app-flow-rules")),
    )
    .start(instance())
    .unwrap_err();
    assert!(error.to_string().contains("key app-flow-rules"), "{error}");
}

/// An ensemble's servers are tried in turn: one that does not answer is
/// passed over.
#[test]
fn a_server_of_the_ensemble_that_does_not_answer_is_passed_over() {
    let server = ZooKeeperBackend::start();
    server.put(KEY, json(8).as_bytes());
    let dead = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let source = ZooKeeperSource::open(&format!("127.0.0.1:{dead},{}", server.address()))
        .unwrap()
        .session_timeout(SESSION);
    let sentinel = instance();
    let handle = SourceWatcher::new(source, json_format())
        .start(sentinel.clone())
        .unwrap();
    assert_eq!(flow_count(&sentinel), Some(8.0));
    assert!(handle.state().connected);
}

/// Under a root, Sentinel's key names are the nodes Java's
/// `ZookeeperDataSource` reads (`/{groupId}/{dataId}`); a write through
/// the store lands there.
#[test]
fn under_a_root_sentinel_key_names_are_the_nodes_java_instances_read() {
    let server = ZooKeeperBackend::start();
    server.put("/SENTINEL_GROUP/orders-flow-rules", json(3).as_bytes());
    let source = server.source().root("/SENTINEL_GROUP").unwrap();
    assert!(
        source.name().ends_with("/SENTINEL_GROUP"),
        "{}",
        source.name()
    );
    let sentinel = instance();
    let handle = SourceWatcher::new(
        source,
        RuleFormat::sentinel_json(SentinelKeys::for_app("orders")),
    )
    .start(sentinel.clone())
    .unwrap();
    assert_eq!(flow_count(&sentinel), Some(3.0));
    handle
        .store()
        .unwrap()
        .replace(&sentinel, RuleChange::Flow(vec![FlowRule::new("a", 11.0)]))
        .unwrap();
    // A missing node of another kind is written with `create`.
    handle
        .store()
        .unwrap()
        .replace(&sentinel, RuleChange::Degrade(Vec::new()))
        .unwrap();
    let mut reader = server.source();
    let keys = vec![
        "/SENTINEL_GROUP/orders-flow-rules".to_owned(),
        "/SENTINEL_GROUP/orders-degrade-rules".to_owned(),
    ];
    reader.connect(&keys).unwrap();
    let values = reader.read(&keys, 1 << 20).unwrap();
    let KeyValue::Present(flow) = values.get(&keys[0]) else {
        panic!("{values:?}");
    };
    assert!(
        String::from_utf8_lossy(flow).contains("\"count\":11"),
        "{values:?}"
    );
    assert_eq!(values.get(&keys[1]), &KeyValue::Present(b"[]".to_vec()));
}
