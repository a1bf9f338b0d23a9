//! etcd: the contract's backend (a real `etcd` each test starts on
//! 127.0.0.1 with a temp data dir), and the cases only etcd has: the
//! watch resumed from a revision, compaction, writes guarded by
//! `mod_revision`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sentinel_flow_rules::source::{
    EtcdSource, KeyValue, RuleFormat, RuleSource, SourceWatcher, WriteFailure,
};

use crate::contract::{Backend, RULES, eventually, flow_count, instance, watch, yaml};

/// An `etcd` (Debian's `etcd-server`) on two free loopback ports, its data
/// in a temp dir that outlives a kill; killed when dropped.
pub(crate) struct EtcdBackend {
    client: u16,
    peer: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl EtcdBackend {
    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client)
    }

    fn spawn(&mut self) {
        let client = format!("http://127.0.0.1:{}", self.client);
        let peer = format!("http://127.0.0.1:{}", self.peer);
        let log = std::fs::File::create(self.dir.path().join("etcd.log")).unwrap();
        let child = Command::new("etcd")
            .args(["--name", "test"])
            .arg("--data-dir")
            .arg(self.dir.path().join("data"))
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("test={peer}")])
            // The contract stores a 10 MB value, over the 1.5 MiB default.
            .args(["--max-request-bytes", "16777216"])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("etcd is installed (apt-get install -y etcd-server)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.post("/v3/kv/range", r#"{"key":"AA=="}"#).is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("etcd on port {} did not answer within 20 s", self.client);
    }

    /// `POST path` with `body` on a connection of its own: the answer's
    /// body when the status is 200.
    pub(crate) fn post(&self, path: &str, body: &str) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.client)).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .ok()?;
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(request.as_bytes()).ok()?;
        stream.write_all(body.as_bytes()).ok()?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).ok()?;
        let answer = String::from_utf8(answer).ok()?;
        let (head, body) = answer.split_once("\r\n\r\n")?;
        if !head.starts_with("HTTP/1.1 200") {
            return None;
        }
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            return Some(dechunk(body));
        }
        Some(body.to_owned())
    }

    /// Compacts the store's history up to its current revision.
    pub(crate) fn compact(&self) {
        let answer = self.post("/v3/kv/range", r#"{"key":"AA=="}"#).unwrap();
        let at = answer.find("\"revision\":\"").unwrap() + 12;
        let revision: String = answer[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        self.post(
            "/v3/kv/compaction",
            &format!(r#"{{"revision":"{revision}","physical":true}}"#),
        )
        .expect("compaction");
    }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        if size == 0 {
            break;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
    out
}

/// Standard padded base64, as the gateway takes keys and values.
pub(crate) fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for group in bytes.chunks(3) {
        let mut b = [0u8; 3];
        b[..group.len()].copy_from_slice(group);
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= group.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

impl Backend for EtcdBackend {
    const NAME: &'static str = "etcd";
    type Source = EtcdSource;

    fn start() -> Self {
        let mut backend = EtcdBackend {
            client: free_port(),
            peer: free_port(),
            dir: tempfile::tempdir().expect("a temporary directory"),
            child: None,
        };
        backend.spawn();
        backend
    }

    /// Kills the server at once (SIGKILL), as a crash would.
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

    /// `PUT` through the gateway (etcd's watchers are told by etcd).
    fn put(&self, key: &str, value: &[u8]) {
        let body = format!(
            r#"{{"key":"{}","value":"{}"}}"#,
            base64(key.as_bytes()),
            base64(value)
        );
        self.post("/v3/kv/put", &body)
            .unwrap_or_else(|| panic!("etcd: put {key} ({} bytes) failed", value.len()));
    }

    fn source(&self) -> EtcdSource {
        EtcdSource::open(&self.url()).unwrap()
    }
}

impl Drop for EtcdBackend {
    fn drop(&mut self) {
        self.kill();
    }
}

fn keys() -> Vec<String> {
    vec![RULES.to_owned()]
}

/// A watch made anew after a lost stream starts from the revision after
/// the last read, so a change made meanwhile is told at once; a watch
/// from "now" would not tell it, and only the read on reconnection would
/// find it.
#[test]
fn a_change_made_while_the_watch_was_down_is_told_when_it_is_made_again() {
    let backend = EtcdBackend::start();
    backend.put(RULES, b"one");
    let mut source = backend.source();
    source.connect(&keys()).unwrap();
    let read = source.read(&keys(), 1 << 20).unwrap();
    assert_eq!(read.get(RULES), &KeyValue::Present(b"one".to_vec()));
    assert!(!source.wait(Duration::from_millis(200)).unwrap());
    // The stream is lost (as on a network failure) and, while it is
    // down, the key changes.
    backend.put(RULES, b"two");
    source.connect(&keys()).unwrap();
    assert!(source.wait(Duration::from_secs(2)).unwrap());
    let read = source.read(&keys(), 1 << 20).unwrap();
    assert_eq!(read.get(RULES), &KeyValue::Present(b"two".to_vec()));
    assert!(!source.wait(Duration::from_millis(200)).unwrap());
}

/// When the revision to resume from is compacted away, etcd cancels the
/// watch: the source reads everything again and watches from now, and
/// later changes are still told.
#[test]
fn a_compacted_revision_reads_everything_again_and_watches_on() {
    let backend = EtcdBackend::start();
    backend.put(RULES, b"one");
    let mut source = backend.source();
    source.connect(&keys()).unwrap();
    source.read(&keys(), 1 << 20).unwrap();
    for value in [&b"two"[..], b"three", b"four"] {
        backend.put(RULES, value);
    }
    backend.compact();
    source.connect(&keys()).unwrap();
    assert!(source.wait(Duration::from_secs(2)).unwrap());
    let read = source.read(&keys(), 1 << 20).unwrap();
    assert_eq!(read.get(RULES), &KeyValue::Present(b"four".to_vec()));
    // Drains word of the changes before the compaction, if any came.
    while source.wait(Duration::from_millis(200)).unwrap() {}
    backend.put(RULES, b"five");
    assert!(source.wait(Duration::from_secs(2)).unwrap());
    let read = source.read(&keys(), 1 << 20).unwrap();
    assert_eq!(read.get(RULES), &KeyValue::Present(b"five".to_vec()));
}

/// The watcher over the same case: rules kept across a compaction while
/// it was away, the latest taken.
#[test]
fn the_watcher_takes_the_latest_rules_across_a_compaction() {
    let backend = EtcdBackend::start();
    backend.put(RULES, yaml(1).as_bytes());
    let sentinel = instance();
    let handle = watch(&backend, RuleFormat::yaml(RULES), &sentinel);
    for count in 2..=4 {
        backend.put(RULES, yaml(count).as_bytes());
    }
    backend.compact();
    backend.put(RULES, yaml(5).as_bytes());
    assert!(eventually(Duration::from_secs(2), || flow_count(&sentinel)
        == Some(5.0)));
    // The state is updated just after the rules are put in force: the
    // highest mod_revision of the key, the sixth revision's.
    assert!(
        eventually(Duration::from_secs(1), || handle
            .state()
            .revision
            .as_deref()
            == Some("6")),
        "{:?}",
        handle.state()
    );
}

/// A write compares the key's `mod_revision` with the one read, not its
/// bytes: a value written over and back again since the read is a
/// conflict (Redis's value check cannot see this).
#[test]
fn a_value_rewritten_to_the_same_bytes_since_the_read_is_a_conflict() {
    let backend = EtcdBackend::start();
    backend.put(RULES, b"x");
    let mut source = backend.source();
    source.connect(&keys()).unwrap();
    source.read(&keys(), 1 << 20).unwrap();
    let writer = source.writer().unwrap();
    backend.put(RULES, b"y");
    backend.put(RULES, b"x");
    let write = writer.compare_and_set(RULES, Some(b"x"), b"z");
    assert!(matches!(write, Err(WriteFailure::Conflict(_))), "{write:?}");
    // After reading again, the write goes through, and the next one is
    // guarded by the revision it made.
    source.read(&keys(), 1 << 20).unwrap();
    writer.compare_and_set(RULES, Some(b"x"), b"z").unwrap();
    writer.compare_and_set(RULES, Some(b"z"), b"w").unwrap();
    let read = source.read(&keys(), 1 << 20).unwrap();
    assert_eq!(read.get(RULES), &KeyValue::Present(b"w".to_vec()));
}

/// A value over the limit is refused by its length without its base64
/// being kept or decoded, and the source goes on reading the next key on
/// the same connection.
#[test]
fn an_oversized_value_is_counted_not_kept_and_the_connection_goes_on() {
    let backend = EtcdBackend::start();
    let other = "/sentinel/other".to_owned();
    backend.put(RULES, &vec![b'#'; 3 << 20]);
    backend.put(&other, b"small");
    let keys = vec![RULES.to_owned(), other.clone()];
    let mut source = backend.source();
    source.connect(&keys).unwrap();
    let read = source.read(&keys, 1 << 20).unwrap();
    assert_eq!(read.get(RULES), &KeyValue::TooLarge(3 << 20));
    assert_eq!(read.get(&other), &KeyValue::Present(b"small".to_vec()));
    for len in [(1 << 20) + 1, (1 << 20) + 2, (1 << 20) + 3] {
        backend.put(RULES, &vec![b'a'; len]);
        let read = source.read(&keys, 1 << 20).unwrap();
        assert_eq!(read.get(RULES), &KeyValue::TooLarge(len as u64), "{len}");
    }
    backend.put(RULES, &vec![b'a'; 1 << 20]);
    let read = source.read(&keys, 1 << 20).unwrap();
    assert_eq!(read.get(RULES), &KeyValue::Present(vec![b'a'; 1 << 20]));
}

/// Not a URL of an etcd client port: refused with why.
#[test]
fn bad_urls_are_refused_with_why() {
    for (url, why) in [
        ("https://127.0.0.1:2379", "TLS is not supported"),
        ("127.0.0.1:2379", "must start with http://"),
        ("http://127.0.0.1:2379/v3", "no path"),
        ("http://127.0.0.1:x", "port is not a number"),
        ("http://", "must name a host"),
    ] {
        let error = EtcdSource::open(url).unwrap_err().to_string();
        assert!(error.contains(why), "{url}: {error}");
    }
    assert_eq!(
        EtcdSource::open("http://10.0.0.5").unwrap().name(),
        "etcd://10.0.0.5:2379"
    );
    assert_eq!(
        EtcdSource::open("http://[::1]:2380/").unwrap().name(),
        "etcd://[::1]:2380"
    );
    let _ = SourceWatcher::new(
        EtcdSource::open("http://[::1]").unwrap(),
        RuleFormat::yaml(RULES),
    );
}

/// A write through the store puts its rules in force at once, before the
/// store's revision of them is known: when the watcher then reads the
/// same values back, the state takes the store's revision instead of a
/// hash of the values.
#[test]
fn after_a_write_through_the_store_the_state_shows_the_stores_revision() {
    let backend = EtcdBackend::start();
    backend.put(RULES, yaml(1).as_bytes());
    let sentinel = instance();
    let handle = watch(&backend, RuleFormat::yaml(RULES), &sentinel);
    assert_eq!(handle.state().revision.as_deref(), Some("2"));
    handle
        .store()
        .unwrap()
        .replace(
            &sentinel,
            sentinel_flow_rules::RuleChange::Flow(vec![sentinel_flow_core::flow::FlowRule::new(
                "a", 9.0,
            )]),
        )
        .unwrap();
    assert_eq!(flow_count(&sentinel), Some(9.0));
    assert!(
        eventually(Duration::from_secs(2), || handle
            .state()
            .revision
            .as_deref()
            == Some("3")),
        "{:?}",
        handle.state()
    );
    assert_eq!(handle.state().applies, 2);
}

/// A TCP proxy to `port` that can be frozen: while frozen it forwards
/// nothing and answers no new connection, but closes none, as a host that
/// vanished from the network would.
struct FreezableProxy {
    port: u16,
    frozen: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl FreezableProxy {
    fn start(upstream: u16) -> Self {
        use std::sync::atomic::Ordering;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let frozen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = frozen.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                if flag.load(Ordering::Relaxed) {
                    held.push(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    let flag = flag.clone();
                    std::thread::spawn(move || {
                        let _ = from.set_read_timeout(Some(Duration::from_millis(20)));
                        let mut buf = [0u8; 16 * 1024];
                        loop {
                            if flag.load(Ordering::Relaxed) {
                                std::thread::sleep(Duration::from_millis(20));
                                continue;
                            }
                            match from.read(&mut buf) {
                                Ok(0) => return,
                                Ok(n) => {
                                    if to.write_all(&buf[..n]).is_err() {
                                        return;
                                    }
                                }
                                Err(e)
                                    if e.kind() == std::io::ErrorKind::WouldBlock
                                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                                Err(_) => return,
                            }
                        }
                    });
                }
            }
        });
        FreezableProxy { port, frozen }
    }

    fn freeze(&self) {
        self.frozen
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A watch connection that went silent without being closed (the host
/// vanished) is made anew after `watch_refresh`: the source finds the
/// store lost instead of waiting on the dead stream for ever.
#[test]
fn a_watch_gone_silent_is_made_anew_and_a_dead_connection_found() {
    let backend = EtcdBackend::start();
    backend.put(RULES, b"one");
    let proxy = FreezableProxy::start(backend.client);
    let mut source = EtcdSource::open(&format!("http://127.0.0.1:{}", proxy.port))
        .unwrap()
        .timeout(Duration::from_millis(300))
        .watch_refresh(Duration::from_millis(500));
    source.connect(&keys()).unwrap();
    source.read(&keys(), 1 << 20).unwrap();
    // Silent but alive: made anew, nothing told, nothing lost.
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1200) {
        assert!(!source.wait(Duration::from_millis(100)).unwrap());
    }
    backend.put(RULES, b"two");
    assert!(source.wait(Duration::from_secs(2)).unwrap());
    proxy.freeze();
    let start = Instant::now();
    let lost = loop {
        match source.wait(Duration::from_millis(100)) {
            Ok(_) if start.elapsed() < Duration::from_secs(5) => {}
            other => break other,
        }
    };
    assert!(lost.is_err(), "{lost:?}");
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
}
