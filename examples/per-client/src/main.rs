//! `cargo run --release -p per-client [-- [SECONDS] [PATH]]`
//! (rules from `examples/per-client/rules.yaml`; after its demo it keeps
//! serving for SECONDS, default 0)
//!
//! An axum service behind a `GatewayLayer`: the rule file's
//! `api_definitions:` group `/orders/**` and `/items/<digits>` as the API
//! `orders`, and its `gateway:` rules allow each client IP 10 requests a
//! second on that group and each API key (`x-api-key`) 3 a second on
//! `/search`, the requests without a key sharing one count.
//!
//! The demo sends its requests over 127.0.0.1 from distinct source
//! addresses (all of 127.0.0.0/8 is the loopback), each burst inside one
//! second of the instance's clock, and prints what each client got:
//!
//! - three clients, 15 requests each over both paths of the group: 10
//!   pass and 5 are refused, for each client on its own;
//! - a client that sends a new `X-Forwarded-For` with every request: the
//!   layer trusts no proxy here, so the header is ignored and the client
//!   is limited by its own address;
//! - two API keys and requests without one, 5 each on `/search`: 3 pass
//!   each;
//! - the headers of a refused request (`Retry-After` and the IETF
//!   `RateLimit` headers, for the caller's own key).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use axum::Router;
use axum::extract::Path;
use axum::routing::get;
use sentinel_flow::Sentinel;
use sentinel_flow::rules::RuleWatcher;
use sentinel_flow::tower::gateway::{Gateway, GatewayLayer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

/// One request's answer: its status code and its head.
struct Answer {
    status: u16,
    head: String,
}

/// Sends `GET path` from `source` (a loopback address) to `server`.
async fn get_from(
    source: Ipv4Addr,
    server: SocketAddr,
    path: &str,
    headers: &str,
) -> std::io::Result<Answer> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(IpAddr::V4(source), 0))?;
    let mut stream = socket.connect(server).await?;
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {server}\r\n{headers}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut response))
        .await
        .map_err(|_| std::io::Error::other("no answer within 5 s"))??;
    let response = String::from_utf8_lossy(&response);
    let head = response
        .split("\r\n\r\n")
        .next()
        .unwrap_or_default()
        .to_owned();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    Ok(Answer { status, head })
}

/// A client's burst: each `(path, headers)` in turn from `source`; the
/// answers.
async fn burst(source: Ipv4Addr, server: SocketAddr, requests: &[(String, String)]) -> Vec<Answer> {
    let mut answers = Vec::with_capacity(requests.len());
    for (path, headers) in requests {
        match get_from(source, server, path, headers).await {
            Ok(answer) => answers.push(answer),
            Err(error) => {
                eprintln!("request from {source} failed: {error}");
                std::process::exit(1);
            }
        }
    }
    answers
}

/// Waits for the start of the instance clock's next second, plus 20 ms.
async fn next_second(sentinel: &Sentinel) {
    let now = sentinel.now_ms();
    let wait = 1_000 - now % 1_000 + 20;
    tokio::time::sleep(Duration::from_millis(wait)).await;
}

/// Runs `scenario` inside one second of the instance's clock: again in
/// the next second if it ran across a second's end.
async fn in_one_second<T, F, Fut>(sentinel: &Sentinel, mut scenario: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    loop {
        next_second(sentinel).await;
        let started = sentinel.now_ms() / 1_000;
        let result = scenario().await;
        if sentinel.now_ms() / 1_000 == started {
            return result;
        }
        println!("  (that burst ran across a second's end: once more, in the next second)");
    }
}

fn tally(answers: &[Answer]) -> String {
    let passed = answers.iter().filter(|a| a.status == 200).count();
    let refused = answers.iter().filter(|a| a.status == 429).count();
    let other = answers.len() - passed - refused;
    let mut line = format!("{passed} passed, {refused} refused (429)");
    if other > 0 {
        line.push_str(&format!(", {other} other"));
    }
    line
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .with_writer(std::io::stderr)
        .init();
    let mut seconds = 0u64;
    let mut path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/rules.yaml"));
    for arg in std::env::args().skip(1) {
        match arg.parse() {
            Ok(n) => seconds = n,
            Err(_) => path = PathBuf::from(arg),
        }
    }

    let sentinel = sentinel_flow::global();
    let watch = RuleWatcher::new(&path)
        .interval(Duration::from_millis(500))
        .on_success(|loaded| println!("rules loaded: {:?}", loaded.counts))
        .on_failure(|error| println!("rule file refused, the rules in force stay:\n{error}"));
    let _watch = match watch.start(sentinel) {
        Ok(handle) => handle,
        Err(error) => {
            eprintln!("cannot load the rules:\n{error}");
            std::process::exit(1);
        }
    };

    let gateway = Gateway::new(sentinel);
    let app = Router::new()
        .route(
            "/orders/{id}",
            get(|Path(id): Path<u64>| async move { format!("order {id}\n") }),
        )
        .route(
            "/items/{id}",
            get(|Path(id): Path<u64>| async move { format!("item {id}\n") }),
        )
        .route("/search", get(|| async { "results\n" }))
        .layer(GatewayLayer::new(&gateway));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = listener.local_addr().unwrap();
    println!("listening on http://{server} (rules: {})", path.display());
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap()
    });

    // 15 requests over both paths of the group, with `headers` on each.
    let group = |headers: &dyn Fn(usize) -> String| -> Vec<(String, String)> {
        (0..15)
            .map(|i| {
                let path = if i % 2 == 0 {
                    format!("/orders/{i}")
                } else {
                    format!("/items/{i}")
                };
                (path, headers(i))
            })
            .collect()
    };
    let plain = group(&|_| String::new());
    let spoofed = group(&|i| format!("X-Forwarded-For: 203.0.113.{i}\r\n"));

    println!(
        "\nthe API group `orders`, 10 a second per client IP; 15 requests from each client in one second:"
    );
    let clients = [
        Ipv4Addr::new(127, 0, 0, 2),
        Ipv4Addr::new(127, 0, 0, 3),
        Ipv4Addr::new(127, 0, 0, 4),
    ];
    let spoofer = Ipv4Addr::new(127, 0, 0, 5);
    let results = in_one_second(sentinel, || async {
        let mut results = Vec::new();
        for client in clients {
            results.push((client.to_string(), burst(client, server, &plain).await));
        }
        results.push((
            format!("{spoofer} (a new X-Forwarded-For each request)"),
            burst(spoofer, server, &spoofed).await,
        ));
        results
    })
    .await;
    for (client, answers) in &results {
        println!("  {client:<46} {}", tally(answers));
    }
    let refused = results
        .iter()
        .flat_map(|(_, answers)| answers)
        .find(|answer| answer.status == 429);

    println!("\n/search, 3 a second per API key (x-api-key); 5 requests each in one second:");
    let keyed = |key: Option<&str>| -> Vec<(String, String)> {
        let header = key.map_or_else(String::new, |key| format!("x-api-key: {key}\r\n"));
        (0..5)
            .map(|_| ("/search".to_owned(), header.clone()))
            .collect()
    };
    let source = Ipv4Addr::new(127, 0, 0, 6);
    let results = in_one_second(sentinel, || async {
        let mut results = Vec::new();
        for key in [Some("alice"), Some("bob"), None] {
            let who = key.map_or("no key (one shared count)".to_owned(), |k| {
                format!("key {k}")
            });
            results.push((who, burst(source, server, &keyed(key)).await));
        }
        results
    })
    .await;
    for (who, answers) in &results {
        println!("  {who:<46} {}", tally(answers));
    }

    if let Some(answer) = refused {
        println!("\na refused request's answer:");
        for line in answer.head.lines() {
            let lower = line.to_ascii_lowercase();
            if line.starts_with("HTTP/")
                || lower.starts_with("retry-after")
                || lower.starts_with("ratelimit")
            {
                println!("  {line}");
            }
        }
    }

    if seconds > 0 {
        println!(
            "\nserving for {seconds} s: try `curl -i http://{server}/orders/1` (edit {} to change the limits)",
            path.display()
        );
        tokio::time::sleep(Duration::from_secs(seconds)).await;
    }
}
