//! `cargo run --release -p dashboard [-- [--port N] [--bind IP] [--rules FILE]
//! [--dashboard HOST:PORT] [--token T] [--seconds N]]`
//! (default: port 8719 on 127.0.0.1, rules in code, no dashboard, until
//! killed)
//!
//! The command API and the live page of an instance with simulated
//! traffic: what the Sentinel dashboard (or a browser) sees of a service.
//!
//! Serves Sentinel's commands and the live page on 127.0.0.1:8719 (or the
//! next free port) for the global instance, while four threads call three
//! resources: `GET:/orders` (limited to 50 QPS), `GET:/inventory` (slow
//! now and then, behind a circuit breaker) and `POST:/checkout` (two
//! origins, one failing call in ten). Writes are on, so a dashboard can
//! push rules; with `--rules FILE` they are written back to that file.
//! With `--dashboard`, it sends the dashboard a heartbeat every few
//! seconds, and the dashboard reads the metric log this example writes
//! (to a temporary directory) through the command API.
//!
//! A tracing subscriber prints the library's warnings on stderr, such as
//! the heartbeat's when the dashboard cannot be reached (WARN and above:
//! at INFO the block log adds a line per blocked resource every second).

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sentinel_flow::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow::flow::FlowRule;
use sentinel_flow::log::MetricLogConfig;
use sentinel_flow::rules::RuleWatcher;
use sentinel_flow::transport::CommandCenter;
use sentinel_flow::{EntryType, Sentinel};

struct Args {
    port: u16,
    rules: Option<PathBuf>,
    dashboard: Option<String>,
    token: Option<String>,
    seconds: Option<u64>,
    bind: IpAddr,
}

fn args() -> Args {
    let mut args = Args {
        port: sentinel_flow::transport::DEFAULT_PORT,
        rules: None,
        dashboard: None,
        token: None,
        seconds: None,
        bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next().unwrap_or_else(|| {
                eprintln!("{flag} needs a value");
                std::process::exit(2)
            })
        };
        match flag.as_str() {
            "--port" => args.port = value().parse().expect("--port: a port number"),
            "--rules" => args.rules = Some(PathBuf::from(value())),
            "--dashboard" => args.dashboard = Some(value()),
            "--token" => args.token = Some(value()),
            "--seconds" => args.seconds = Some(value().parse().expect("--seconds: a number")),
            "--bind" => args.bind = value().parse().expect("--bind: an IP address"),
            other => {
                eprintln!(
                    "unknown argument {other}; see the top of examples/dashboard/src/main.rs"
                );
                std::process::exit(2);
            }
        }
    }
    args
}

/// One simulated caller: a call every few milliseconds, spread over the
/// three resources.
fn traffic(sentinel: &'static Sentinel, worker: u64, stop: &AtomicBool) {
    let mut n = worker;
    while !stop.load(Ordering::Relaxed) {
        n = n
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let roll = (n >> 33) % 100;
        let (resource, origin) = match roll {
            0..50 => ("GET:/orders", "web"),
            50..75 => ("GET:/inventory", "web"),
            75..90 => ("POST:/checkout", "web"),
            _ => ("POST:/checkout", "partner"),
        };
        let entry = sentinel
            .entry_builder(resource)
            .entry_type(EntryType::Inbound)
            .origin(origin)
            .enter();
        if let Ok(entry) = entry {
            let slow = resource == "GET:/inventory" && roll % 7 == 0;
            std::thread::sleep(Duration::from_millis(if slow { 120 } else { 2 + roll % 8 }));
            if resource == "POST:/checkout" && roll % 10 == 0 {
                entry.set_error(&std::io::Error::other("payment declined"));
            }
            drop(entry);
        }
        std::thread::sleep(Duration::from_millis(3));
    }
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::WARN)
        .with_writer(std::io::stderr)
        .init();
    let args = args();
    let sentinel = sentinel_flow::global();
    let logs = tempfile::tempdir().expect("a temp dir for the metric log");
    let log = MetricLogConfig::new("transport-example").dir(logs.path());
    let _writer = sentinel
        .metric_writer(log.clone())
        .start(sentinel)
        .expect("the metric log writer");

    let mut center = CommandCenter::new(sentinel)
        .port(args.port)
        .bind(args.bind)
        .metric_log(&log)
        .allow_writes(true);
    let _watch = match &args.rules {
        Some(path) => {
            let handle = RuleWatcher::new(path)
                .on_failure(|e| eprintln!("rule file refused, the rules in force stay:\n{e}"))
                .start(sentinel)
                .unwrap_or_else(|e| {
                    eprintln!("cannot load {}:\n{e}", path.display());
                    std::process::exit(1)
                });
            center = center.rule_file(handle.store());
            Some(handle)
        }
        None => {
            sentinel
                .flow_rules()
                .load(vec![FlowRule::new("GET:/orders", 50.0)])
                .unwrap();
            let breaker = DegradeRule {
                slow_ratio_threshold: 0.3,
                time_window_sec: 5,
                ..DegradeRule::new("GET:/inventory", DegradeGrade::SlowRequestRatio, 100.0)
            };
            sentinel.degrade_rules().load(vec![breaker]).unwrap();
            None
        }
    };
    if let Some(dashboard) = &args.dashboard {
        center = center.dashboard(dashboard.clone());
    }
    if let Some(token) = &args.token {
        center = center.token(token.clone());
    }
    let server = center.start().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let addr = server.local_addr();
    println!("live page:   http://{addr}/");
    println!("command API: http://{addr}/api   (e.g. /getRules?type=flow, /jsonTree)");
    if let Some(path) = &args.rules {
        println!("rules:       {} (setRules writes it back)", path.display());
    }

    let stop = Arc::new(AtomicBool::new(false));
    let first_second = sentinel.now_ms() / 1_000;
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || traffic(sentinel, w + 1, &stop))
        })
        .collect();
    match args.seconds {
        Some(seconds) => tokio::time::sleep(Duration::from_secs(seconds)).await,
        None => std::future::pending::<()>().await,
    }
    stop.store(true, Ordering::Relaxed);
    for worker in workers {
        let _ = worker.join();
    }
    let now = sentinel.now_ms();
    if let Some(orders) = sentinel.resource_node("GET:/orders") {
        println!(
            "done: GET:/orders passed {} and blocked {} in the last minute \
             (the traffic touched {} seconds of the clock{})",
            orders.stats().total_pass(now),
            orders.stats().total_block(now),
            (now / 1_000 - first_second + 1).min(60),
            if args.rules.is_none() {
                "; the rule in code admits 50 in each"
            } else {
                ""
            }
        );
    }
    server.shutdown().await;
}
