//! Redis: the contract's backend (a real `redis-server` each test starts
//! on 127.0.0.1 in a temp dir), and the cases only Redis has.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sentinel_flow_rules::source::{RedisSource, RuleFormat};

use crate::contract::{Backend, RULES, eventually, flow_count, instance, watch, yaml};

/// A `redis-server` on a free loopback port, with its own temp dir and no
/// persistence (a kill loses the keys; the contract does not rely on
/// them surviving); killed when dropped.
pub(crate) struct RedisBackend {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// The operator's connection, opened on first use after each start.
    operator: Mutex<Option<redis::Connection>>,
}

impl RedisBackend {
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed (apt-get install -y redis-server)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.ping() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "redis-server on port {} did not answer within 10 s",
            self.port
        );
    }

    /// Whether the server answers PING within 1 s.
    fn ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        if stream.write_all(b"*1\r\n$4\r\nPING\r\n").is_err() {
            return false;
        }
        let mut reply = [0u8; 7];
        stream.read_exact(&mut reply).is_ok() && &reply == b"+PONG\r\n"
    }

    fn connect(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .unwrap()
            .get_connection()
            .unwrap()
    }
}

impl Backend for RedisBackend {
    const NAME: &'static str = "redis";
    type Source = RedisSource;

    fn start() -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("a free port");
        let mut backend = RedisBackend {
            port,
            dir: tempfile::tempdir().expect("a temporary directory"),
            child: None,
            operator: Mutex::new(None),
        };
        backend.spawn();
        backend
    }

    /// Kills the server at once (SIGKILL), as a crash would.
    fn kill(&mut self) {
        *self.operator.lock().unwrap() = None;
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// `SET` and `PUBLISH` on the key's channel in one transaction.
    fn put(&self, key: &str, value: &[u8]) {
        let mut operator = self.operator.lock().unwrap();
        let conn = operator.get_or_insert_with(|| self.connect());
        redis::pipe()
            .atomic()
            .cmd("SET")
            .arg(key)
            .arg(value)
            .ignore()
            .cmd("PUBLISH")
            .arg(key)
            .arg("changed")
            .ignore()
            .exec(conn)
            .unwrap();
    }

    fn source(&self) -> RedisSource {
        RedisSource::open(&self.url()).unwrap()
    }
}

impl Drop for RedisBackend {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Redis keeps no revision: the state's revision is a hash of the values,
/// the same for the same values.
#[test]
fn the_revision_of_redis_values_is_a_hash_of_them() {
    let backend = RedisBackend::start();
    backend.put(RULES, yaml(1).as_bytes());
    let (a, b) = (instance(), instance());
    let ha = watch(&backend, RuleFormat::yaml(RULES), &a);
    let hb = watch(&backend, RuleFormat::yaml(RULES), &b);
    let revision = ha.state().revision.unwrap();
    assert!(revision.starts_with("h:"), "{revision}");
    assert_eq!(hb.state().revision.as_deref(), Some(revision.as_str()));
    backend.put(RULES, yaml(2).as_bytes());
    // The state is updated just after the rules are put in force.
    assert!(eventually(Duration::from_secs(2), || ha.state().applies == 2));
    assert_ne!(ha.state().revision.unwrap(), revision);
    let name = ha.state().name;
    assert!(name.starts_with("redis://127.0.0.1:"), "{name}");
}

/// A change told on a channel named by `RedisSource::channel`, not the
/// key's own, is taken.
#[test]
fn a_change_is_told_on_the_channel_the_source_names() {
    let backend = RedisBackend::start();
    let mut conn = backend.connect();
    let _: () = redis::cmd("SET")
        .arg(RULES)
        .arg(yaml(1))
        .query(&mut conn)
        .unwrap();
    let sentinel = instance();
    let source = RedisSource::open(&backend.url())
        .unwrap()
        .channel(|key| format!("{key}/changed"));
    let _handle = sentinel_flow_rules::source::SourceWatcher::new(source, RuleFormat::yaml(RULES))
        .start(sentinel.clone())
        .unwrap();
    assert_eq!(flow_count(&sentinel), Some(1.0));
    let _: () = redis::cmd("SET")
        .arg(RULES)
        .arg(yaml(2))
        .query(&mut conn)
        .unwrap();
    let _: i64 = redis::cmd("PUBLISH")
        .arg(format!("{RULES}/changed"))
        .arg("x")
        .query(&mut conn)
        .unwrap();
    assert!(eventually(Duration::from_secs(2), || flow_count(&sentinel)
        == Some(2.0)));
}
