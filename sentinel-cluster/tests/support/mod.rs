//! A real `redis-server` for tests: its own free port on 127.0.0.1, its own
//! temporary directory, no persistence; killed when dropped.
#![allow(dead_code, unreachable_pub)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` the test started.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts one on a free loopback port and waits (at most 10 s) until
    /// it answers PING.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// As [`start`](Self::start), with more arguments (`--cluster-enabled yes`).
    pub fn start_with(extra: &[&str]) -> Self {
        let port = free_port();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut server = RedisServer {
            port,
            dir,
            child: None,
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(self.dir.path())
            .args(["--save", "", "--appendonly", "no"])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed (apt-get install -y redis-server)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.command(&["PING"]).as_deref() == Some("+PONG") {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!(
            "redis-server on port {} did not answer within 10 s",
            self.port
        );
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A blocking connection to the server.
    pub fn connect(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|client| client.get_connection())
            .expect("a connection to the test's redis-server")
    }

    /// Kills the server at once (SIGKILL), as a crash would.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port (empty: nothing was saved).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Sends one command (inline protocol) and returns the first line of
    /// the reply, `None` if the server cannot be reached within 1 s.
    pub fn command(&self, args: &[&str]) -> Option<String> {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
        let mut request = String::new();
        request.push_str(&format!("*{}\r\n", args.len()));
        for arg in args {
            request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        stream.write_all(request.as_bytes()).ok()?;
        let mut reply = Vec::new();
        let mut byte = [0u8; 1];
        while stream.read(&mut byte).ok()? == 1 {
            if byte[0] == b'\n' {
                break;
            }
            reply.push(byte[0]);
        }
        let line = String::from_utf8_lossy(&reply).trim_end().to_owned();
        (!line.is_empty()).then_some(line)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// What an offered load got.
#[derive(Debug, Default)]
pub struct Load {
    /// Unix ms of each admitted entry.
    pub admitted: Vec<u64>,
    /// Unix ms and decision time of every entry.
    pub decisions: Vec<(u64, Duration)>,
}

impl Load {
    /// The longest decision.
    pub fn max_decision(&self) -> Duration {
        self.decisions
            .iter()
            .map(|(_, d)| *d)
            .max()
            .unwrap_or_default()
    }

    /// The longest decision of the entries in `from..to` (unix ms).
    pub fn max_decision_in(&self, from: u64, to: u64) -> Duration {
        self.decisions
            .iter()
            .filter(|(at, _)| (from..to).contains(at))
            .map(|(_, d)| *d)
            .max()
            .unwrap_or_default()
    }

    /// Admitted entries in `from..to` (unix ms).
    pub fn admitted_in(&self, from: u64, to: u64) -> usize {
        self.admitted
            .iter()
            .filter(|at| (from..to).contains(*at))
            .count()
    }
}

pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

std::thread_local! {
    static LAST_READING: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The system time, read precisely at each call, with the last reading
/// this thread made kept for [`offer`]: an instance built on it has each
/// admission counted in the second its own decision read, not in the
/// second the test happened to read before or after it (the default
/// clock is a ticker's cached millisecond, which may lag a loaded
/// machine's time across a second's boundary).
#[derive(Debug, Clone, Copy, Default)]
pub struct StampClock;

impl sentinel_flow_core::Clock for StampClock {
    fn now_ms(&self) -> u64 {
        let ms = unix_ms();
        LAST_READING.with(|last| last.set(ms));
        ms
    }

    fn now_nanos(&self) -> u64 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64;
        LAST_READING.with(|last| last.set(nanos / 1_000_000));
        nanos
    }
}

/// Offers `qps` entries a second of `resource` to `sentinel` for
/// `duration`, evenly spaced (a late entry does not push the later ones),
/// each held for no time.
pub fn offer(
    sentinel: &sentinel_flow_core::Sentinel,
    resource: &str,
    qps: u32,
    duration: Duration,
) -> Load {
    let mut load = Load::default();
    let start = Instant::now();
    let period = Duration::from_secs(1) / qps;
    let mut i: u32 = 0;
    loop {
        let due = start + period * i;
        if due >= start + duration {
            return load;
        }
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        LAST_READING.with(|last| last.set(0));
        let asked = unix_ms();
        let before = Instant::now();
        let entry = sentinel.entry(resource);
        let took = before.elapsed();
        // The instance's own reading when it runs on a `StampClock`.
        let at = match LAST_READING.with(|last| last.get()) {
            0 => asked,
            read => read,
        };
        load.decisions.push((at, took));
        if entry.is_ok() {
            load.admitted.push(at);
        }
        drop(entry);
        i += 1;
    }
}

/// Admitted entries per whole unix second, over all loads.
pub fn per_second(
    admitted: impl IntoIterator<Item = u64>,
) -> std::collections::BTreeMap<u64, usize> {
    let mut seconds = std::collections::BTreeMap::new();
    for at in admitted {
        *seconds.entry(at / 1_000).or_insert(0) += 1;
    }
    seconds
}

/// Offers `qps_each` entries a second of each of `values` (as the entry's
/// one argument) to `sentinel` for `duration`, in turn and evenly spaced;
/// what each value got, in the order of `values`.
pub fn offer_values(
    sentinel: &sentinel_flow_core::Sentinel,
    resource: &str,
    values: &[sentinel_flow_core::ParamValue],
    qps_each: u32,
    duration: Duration,
) -> Vec<Load> {
    let mut loads: Vec<Load> = values.iter().map(|_| Load::default()).collect();
    let start = Instant::now();
    let period = Duration::from_secs(1) / (qps_each * values.len() as u32);
    let mut i: u32 = 0;
    loop {
        let due = start + period * i;
        if due >= start + duration {
            return loads;
        }
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let which = i as usize % values.len();
        LAST_READING.with(|last| last.set(0));
        let asked = unix_ms();
        let before = Instant::now();
        let entry = sentinel
            .entry_builder(resource)
            .args(std::slice::from_ref(&values[which]))
            .enter();
        let took = before.elapsed();
        let at = match LAST_READING.with(|last| last.get()) {
            0 => asked,
            read => read,
        };
        loads[which].decisions.push((at, took));
        if entry.is_ok() {
            loads[which].admitted.push(at);
        }
        drop(entry);
        i += 1;
    }
}
