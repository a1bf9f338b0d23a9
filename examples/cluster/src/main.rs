//! `cargo run --release -p cluster [-- SECONDS]` (default 4 seconds per phase;
//! needs `redis-server` on the PATH)
//!
//! Two instances sharing one cluster flow limit through Redis, then Redis
//! killed and each instance falling back to its share of the limit, then
//! Redis back.
//!
//! The example starts a `redis-server` of its own on 127.0.0.1, on a free
//! port, with a temporary directory and no persistence, and kills it on
//! exit. The two instances are two `Sentinel`s built in this one process,
//! each with its own `RedisCluster` client (instance ids `a` and `b`): to
//! Redis they are two services, as two processes would be. Both load the
//! same cluster-mode flow rule on `POST:/pay`, 100 QPS in all (flow id 1),
//! and a thread per instance offers 300 calls a second to it.
//!
//! Each row is one whole second of the clock: the calls each instance
//! admitted (its resource node's count of that second) and their total, and
//! whether each instance was limiting through the cluster or falling back.
//! Three phases of SECONDS each:
//!
//! 1. Redis up: the total holds the shared limit, about 100, split between
//!    the instances. A call finding its instance's lease empty waits for
//!    Redis at most the budget (2 ms); past it the fallback decides, within
//!    the instance's share of the limit (50) counted together with what
//!    the cluster granted it, and the next call to Redis charges what it
//!    admitted to the shared window. The last lines count these calls
//!    ("over budget").
//! 2. Redis killed: each client notices at its next call (a failed call or
//!    one past its 250 ms timeout) and switches its cluster rules to the
//!    fallback, which admits each instance's share of the count locally
//!    (100 / 2 live instances): 50 per instance, 100 in total. The library
//!    logs the switch as a warning.
//! 3. Redis restarted on the same port: the clients reconnect (backing off
//!    from 100 ms to at most 1 s here; the default reaches 5 s) and the
//!    total is 100 again. The first call to Redis charges what the
//!    fallback admitted in the window, so the second of the switch holds
//!    about 100 too.
//!
//! A tracing subscriber prints the library's log on stderr: the client
//! starting, Redis reached, Redis unavailable (WARN), Redis back.
//!
//! If `redis-server` is not installed, it says how to install it and exits
//! with status 1.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sentinel_flow::Sentinel;
use sentinel_flow::cluster::{ClusterConfig, RedisCluster};
use sentinel_flow::flow::{ClusterFlowConfig, FlowRule};

const RESOURCE: &str = "POST:/pay";
/// The cluster-wide limit (in fallback each instance admits its share:
/// half of it).
const LIMIT: f64 = 100.0;
/// Calls a second each instance offers.
const OFFERED: u32 = 300;

/// A `redis-server` this example started; killed when dropped.
struct RedisServer {
    port: u16,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts one on `port` with its data in `dir`, and waits (at most
    /// 10 s) until it answers `PING`.
    fn start(port: u16, dir: &Path) -> Result<Self, String> {
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(dir)
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|error| match error.kind() {
                std::io::ErrorKind::NotFound => {
                    "redis-server is not installed (or not on the PATH). \
                     Install it, e.g. `sudo apt-get install redis-server` (Debian, Ubuntu), \
                     `sudo dnf install redis` (Fedora), `brew install redis` (macOS), \
                     then run this example again."
                        .to_owned()
                }
                _ => format!("cannot start redis-server: {error}"),
            })?;
        let mut server = RedisServer {
            port,
            child: Some(child),
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if server.ping() {
                return Ok(server);
            }
            if let Some(Ok(Some(status))) = server.child.as_mut().map(Child::try_wait) {
                return Err(format!("redis-server exited at start: {status}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        server.kill();
        Err(format!(
            "redis-server on port {port} did not answer within 10 s"
        ))
    }

    /// Whether the server answers `PING` within a second.
    fn ping(&self) -> bool {
        let answer = || -> std::io::Result<bool> {
            let mut stream = TcpStream::connect(("127.0.0.1", self.port))?;
            stream.set_read_timeout(Some(Duration::from_secs(1)))?;
            stream.write_all(b"PING\r\n")?;
            let mut reply = [0u8; 7];
            stream.read_exact(&mut reply)?;
            Ok(&reply == b"+PONG\r\n")
        };
        answer().unwrap_or(false)
    }

    /// Kills the server at once (SIGKILL), as a crash would.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One instance: a `Sentinel` with its own Redis client attached.
struct Instance {
    name: &'static str,
    sentinel: Sentinel,
    cluster: RedisCluster,
}

impl Instance {
    fn start(name: &'static str, url: &str) -> Self {
        let sentinel = Sentinel::builder().build();
        let config = ClusterConfig::new(url)
            .instance_id(name)
            .backoff(Duration::from_millis(100), Duration::from_secs(1));
        let cluster = RedisCluster::start(config).expect("a valid cluster configuration");
        cluster.attach(&sentinel);
        let rule = FlowRule {
            cluster_mode: true,
            cluster_config: ClusterFlowConfig {
                flow_id: Some(1),
                fallback_to_local_when_fail: true,
                ..ClusterFlowConfig::default()
            },
            ..FlowRule::new(RESOURCE, LIMIT)
        };
        sentinel
            .flow_rules()
            .load(vec![rule])
            .expect("a valid rule");
        Instance {
            name,
            sentinel,
            cluster,
        }
    }

    /// Calls admitted in the whole second starting at `second_ms`, read
    /// once that second is over.
    fn admitted_in(&self, second_ms: u64) -> u64 {
        let Some(node) = self.sentinel.resource_node(RESOURCE) else {
            return 0;
        };
        node.stats()
            .metrics_since(second_ms, self.sentinel.now_ms())
            .into_iter()
            .find(|m| m.timestamp_ms == second_ms)
            .map_or(0, |m| m.pass)
    }

    fn mode(&self) -> &'static str {
        if self.cluster.is_fallback() {
            "fallback"
        } else {
            "cluster"
        }
    }

    /// Offers `OFFERED` calls a second, evenly spaced, until `stop`.
    fn offer(&self, stop: &AtomicBool) {
        let period = Duration::from_secs(1) / OFFERED;
        let start = Instant::now();
        let mut next = start;
        while !stop.load(Ordering::Relaxed) {
            next += period;
            drop(self.sentinel.entry(RESOURCE));
            if let Some(wait) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
    }
}

/// Waits until `done` holds, at most `limit`; whether it did.
fn wait_until(limit: Duration, done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    done()
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .with_writer(std::io::stderr)
        .init();
    let seconds: u64 = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .unwrap_or(4)
        .clamp(1, 60);

    let dir = tempfile::tempdir().expect("a temporary directory");
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port");
    let mut redis = match RedisServer::start(port, dir.path()) {
        Ok(server) => server,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::FAILURE;
        }
    };
    let url = format!("redis://127.0.0.1:{port}/");
    println!("redis-server on {url} (data in {})", dir.path().display());

    let instances = [Instance::start("a", &url), Instance::start("b", &url)];
    let connected = wait_until(Duration::from_secs(5), || {
        instances.iter().all(|i| !i.cluster.is_fallback())
    });
    if !connected {
        eprintln!("the instances did not reach redis-server within 5 s");
        return ExitCode::FAILURE;
    }
    println!(
        "instances a and b each offer {OFFERED} calls/s to {RESOURCE}; one cluster flow rule \
         (flow id 1) admits {LIMIT} a second for both together, and its share ({}) per instance \
         when it falls back to local limits.\n",
        LIMIT / 2.0
    );
    println!(
        "{:>4} {:>6} {:>6} {:>6}   {:<9} {:<9}",
        "sec", "a", "b", "total", "a mode", "b mode"
    );

    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        for instance in &instances {
            let stop = &stop;
            scope.spawn(move || instance.offer(stop));
        }
        let clock = &instances[0].sentinel;
        // The first whole second after the threads started.
        let mut second = clock.now_ms() / 1_000 + 1;
        let mut row = 0;
        let switches = || {
            instances
                .each_ref()
                .map(|i| i.cluster.snapshot().fallback_switches)
        };
        let mut switched_before = switches();
        // One whole second after another: the row is printed 100 ms after
        // the second ends, once its bucket is complete.
        let mut rows = |count: u64, row: &mut u64| {
            for _ in 0..count {
                let read_at = (second + 1) * 1_000 + 100;
                std::thread::sleep(Duration::from_millis(
                    read_at.saturating_sub(clock.now_ms()),
                ));
                let [a, b] = instances.each_ref().map(|i| i.admitted_in(second * 1_000));
                let switched = switches();
                *row += 1;
                println!(
                    "{:>4} {a:>6} {b:>6} {:>6}   {:<9} {:<9}{}",
                    row,
                    a + b,
                    instances[0].mode(),
                    instances[1].mode(),
                    match (
                        switched != switched_before,
                        instances[0].cluster.is_fallback()
                    ) {
                        (false, _) => "",
                        (true, true) =>
                            "  (fell back in this second: each admits its share locally)",
                        (true, false) => {
                            "  (back in this second: the fallback's passes charged to the cluster's 100)"
                        }
                    }
                );
                switched_before = switched;
                second += 1;
            }
        };
        rows(seconds, &mut row);

        redis.kill();
        println!("-- redis-server killed (SIGKILL)");
        let switched = wait_until(Duration::from_secs(3), || {
            instances.iter().all(|i| i.cluster.is_fallback())
        });
        if !switched {
            println!("-- not every instance switched to fallback within 3 s");
        }
        rows(seconds, &mut row);

        match RedisServer::start(port, dir.path()) {
            Ok(server) => {
                redis = server;
                println!("-- redis-server started again on the same port (empty)");
                rows(seconds, &mut row);
            }
            Err(message) => println!("-- cannot restart redis-server: {message}"),
        }
        stop.store(true, Ordering::Relaxed);
    });

    println!();
    for instance in &instances {
        let snapshot = instance.cluster.snapshot();
        println!(
            "instance {}: {} switches between cluster and fallback, {} calls decided by the \
             fallback ({} of them over budget), {} connections to Redis",
            instance.name,
            snapshot.fallback_switches,
            snapshot.fallback_decisions,
            snapshot.over_budget,
            snapshot.connects
        );
    }
    println!("(each client, dropped on exit, logs at INFO that it stopped)");
    drop(redis);
    ExitCode::SUCCESS
}
