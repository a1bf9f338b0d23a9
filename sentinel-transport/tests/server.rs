//! The server's life: unknown commands, the port search, stopping on drop,
//! a runtime of its own.

mod common;

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::Arc;
use std::time::Duration;

use common::{get, instance};
use sentinel_flow_transport::{CommandCenter, StartError};

/// Waits (bounded) until `port` can be bound again.
async fn port_frees(port: u16) -> bool {
    for _ in 0..200 {
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

#[tokio::test]
async fn unknown_commands_answer_400_as_sentinel_does() {
    let (sentinel, _) = instance();
    let server = CommandCenter::new(sentinel).port(0).start().unwrap();
    let answer = get(server.local_addr(), "/getClusterConfig").await;
    assert_eq!(answer.status, 400);
    assert!(
        answer.body.starts_with("Unknown command"),
        "{}",
        answer.body
    );
}

#[tokio::test]
async fn a_taken_port_moves_to_the_next_free_one() {
    // Find two free adjacent ports, hold the first.
    let (held, port) = loop {
        let probe = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let port = probe.local_addr().unwrap().port();
        if port < u16::MAX && TcpListener::bind((Ipv4Addr::LOCALHOST, port + 1)).is_ok() {
            break (probe, port);
        }
    };
    let (sentinel, _) = instance();
    let server = CommandCenter::new(sentinel).port(port).start().unwrap();
    assert_eq!(server.port(), port + 1);
    assert_eq!(get(server.local_addr(), "/version").await.status, 200);
    drop(held);
}

#[tokio::test]
async fn dropping_the_handle_frees_the_port() {
    let (sentinel, _) = instance();
    let server = CommandCenter::new(sentinel).port(0).start().unwrap();
    let port = server.port();
    assert!(TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_err());
    drop(server);
    assert!(port_frees(port).await, "port {port} still taken");
}

#[tokio::test]
async fn shutdown_waits_until_the_port_is_free() {
    let (sentinel, _) = instance();
    let server = CommandCenter::new(sentinel).port(0).start().unwrap();
    let port = server.port();
    tokio::time::timeout(Duration::from_secs(10), server.shutdown())
        .await
        .unwrap();
    assert!(TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok());
}

#[test]
fn start_outside_a_runtime_says_so() {
    let (sentinel, _) = instance();
    let error = CommandCenter::new(sentinel).port(0).start().unwrap_err();
    assert!(matches!(error, StartError::NoRuntime), "{error}");
}

#[test]
fn a_runtime_of_its_own_for_programs_without_tokio() {
    let (sentinel, _) = instance();
    let server = CommandCenter::new(Arc::clone(&sentinel))
        .port(0)
        .start_with_own_runtime()
        .unwrap();
    let addr: SocketAddr = server.local_addr();
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = client.block_on(get(addr, "/getSwitch"));
    assert_eq!(answer.body, "Sentinel switch value: true");
    drop(server);
    assert!(client.block_on(port_frees(addr.port())));
}
