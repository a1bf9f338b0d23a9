//! A server that cannot be starved: slow and silent clients are closed
//! within their deadlines and never keep a normal request waiting, an
//! announced oversized body is refused before it is read, and a command
//! that panics answers 500 while the server keeps serving.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{center, get, instance, post_form, raw_status, writable_server};
use sentinel_flow_core::flow::FlowRule;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Half a request head, as a slowloris client sends it, then nothing.
const HALF_A_HEAD: &[u8] = b"GET /version HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";

/// Opens `n` connections that each send half a request head.
async fn slowloris(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut open = Vec::with_capacity(n);
    for _ in 0..n {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(HALF_A_HEAD).await.unwrap();
        open.push(stream);
    }
    open
}

/// Waits until the server closes `stream` (end of stream or a reset);
/// false if it is still open after `within`.
async fn closed_within(mut stream: TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 1024];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_slowloris_connections_neither_delay_a_request_nor_outlive_their_deadline() {
    let (sentinel, _) = instance();
    let header_timeout = Duration::from_secs(2);
    let server = center(&sentinel)
        .header_read_timeout(header_timeout)
        .start()
        .unwrap();
    let addr = server.local_addr();
    let slow = slowloris(addr, 1_000).await;
    let asked = std::time::Instant::now();
    let answer = get(addr, "/version").await;
    let took = asked.elapsed();
    assert_eq!(answer.status, 200);
    assert!(
        took < Duration::from_millis(100),
        "a normal request took {took:?} beside 1 000 slowloris connections"
    );
    // Every one is closed: past the connection cap by a newer connection,
    // the others when their head's deadline passes (plus a margin for a
    // loaded machine).
    let waits: Vec<_> = slow
        .into_iter()
        .map(|s| tokio::spawn(closed_within(s, header_timeout + Duration::from_secs(2))))
        .collect();
    let mut open = 0;
    for wait in waits {
        if !wait.await.unwrap() {
            open += 1;
        }
    }
    assert_eq!(
        open, 0,
        "{open} slowloris connections outlived their deadline"
    );
}

#[tokio::test]
async fn past_the_connection_cap_the_longest_idle_connection_makes_room() {
    let (sentinel, _) = instance();
    let server = center(&sentinel)
        .max_connections(16)
        // Long, so that only the cap can close the slow connections soon.
        .header_read_timeout(Duration::from_secs(60))
        .start()
        .unwrap();
    let addr = server.local_addr();
    let slow = slowloris(addr, 100).await;
    let asked = std::time::Instant::now();
    let answer = get(addr, "/version").await;
    let took = asked.elapsed();
    assert_eq!(answer.status, 200);
    assert!(took < Duration::from_millis(100), "{took:?}");
    let waits: Vec<_> = slow
        .into_iter()
        .map(|s| tokio::spawn(closed_within(s, Duration::from_secs(1))))
        .collect();
    let mut closed = 0;
    for wait in waits {
        if wait.await.unwrap() {
            closed += 1;
        }
    }
    // 100 slow connections and the normal one, at most 16 open at once.
    assert!(closed >= 100 - 16, "only {closed} of 100 closed");
}

#[tokio::test]
async fn an_announced_body_over_the_cap_is_refused_before_it_is_sent() {
    let (sentinel, _) = instance();
    let server = writable_server(&sentinel);
    let head = b"POST /setRules HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 104857600\r\n\r\n";
    let status = raw_status(server.local_addr(), head).await;
    assert!(status.contains(" 413 "), "{status}");
    assert!(sentinel.flow_rules().rules().is_empty());
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_answered_408() {
    let (sentinel, _) = instance();
    let server = center(&sentinel)
        .allow_writes(true)
        .body_read_timeout(Duration::from_millis(300))
        .start()
        .unwrap();
    let head = b"POST /setSwitch HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 11\r\n\r\nvalue=";
    let status = raw_status(server.local_addr(), head).await;
    assert!(status.contains(" 408 "), "{status}");
    assert!(sentinel.is_enabled());
}

#[tokio::test]
async fn a_command_that_panics_answers_500_and_the_server_keeps_serving() {
    let (sentinel, _) = instance();
    sentinel.flow_rules().on_change(|rules| {
        if rules.iter().any(|r| r.resource == "boom") {
            panic!("this listener refuses boom");
        }
    });
    let server = writable_server(&sentinel);
    let addr = server.local_addr();
    let good = r#"[{"resource":"kept","count":5}]"#;
    let set = post_form(addr, "/setRules", &[("type", "flow"), ("data", good)]).await;
    assert_eq!(set.status, 200, "{}", set.body);
    let boom = r#"[{"resource":"boom","count":1}]"#;
    let set = post_form(addr, "/setRules", &[("type", "flow"), ("data", boom)]).await;
    assert_eq!(set.status, 500, "{}", set.body);
    assert!(
        set.body.contains("this listener refuses boom"),
        "{}",
        set.body
    );
    // Still serving, and the rules in force are one whole list.
    assert_eq!(get(addr, "/version").await.status, 200);
    let rules = sentinel.flow_rules().rules();
    assert!(
        rules == vec![FlowRule::new("boom", 1.0)] || rules == vec![FlowRule::new("kept", 5.0)],
        "{rules:?}"
    );
    let set = post_form(addr, "/setRules", &[("type", "flow"), ("data", good)]).await;
    assert_eq!(set.status, 200, "{}", set.body);
    assert_eq!(
        sentinel.flow_rules().rules(),
        vec![FlowRule::new("kept", 5.0)]
    );
}
