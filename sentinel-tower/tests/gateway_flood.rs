//! A flood of one million distinct client addresses through a per-IP
//! gateway rule: the rule's value table stays within its documented bound
//! (its capacity, `PARAM_VALUE_BYTES` a value), the process's memory does
//! not grow with the keys, and hot clients among the churn are still
//! limited exactly. Through the service itself (no sockets): a million
//! connections would measure the kernel, not the layer. In its own test
//! binary, so that the resident-memory reading is this test's alone.

mod common;

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use bytes::Bytes;
use common::sentinel;
use http::{Request, Response, StatusCode};
use http_body_util::Empty;
use sentinel_flow_core::param_flow::PARAM_VALUE_BYTES;
use sentinel_flow_tower::gateway::{
    ApiDefinition, ApiPredicate, Gateway, GatewayLayer, GatewayParamItem, GatewayRule,
};
use tower::{Layer, Service, ServiceExt};

const COLD_KEYS: u32 = 1_000_000;
const HOT_KEYS: u8 = 10;
const LIMIT: usize = 5;
/// A hot client calls once per this many cold ones.
const HOT_EVERY: u32 = 1_000;

/// This process's resident memory, in bytes (Linux; 0 elsewhere).
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|field| field.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn request(peer: Ipv4Addr) -> Request<()> {
    let mut request = Request::get("/flood").body(()).unwrap();
    request
        .extensions_mut()
        .insert(SocketAddr::new(IpAddr::V4(peer), 40_000));
    request
}

#[test]
fn a_million_distinct_clients_stay_within_the_table_bound_and_hot_clients_are_limited_exactly() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (sentinel, clock) = sentinel();
        let gateway = Gateway::new(sentinel);
        gateway
            .load(
                vec![ApiDefinition::new("all", vec![ApiPredicate::prefix("/**")])],
                vec![
                    GatewayRule::api_group("all", LIMIT as f64)
                        .param_item(GatewayParamItem::client_ip()),
                ],
            )
            .unwrap();
        let inner = tower::service_fn(|_: Request<()>| async {
            Ok::<_, Infallible>(Response::new(Empty::<Bytes>::new()))
        });
        let mut service = GatewayLayer::new(&gateway).layer(inner);
        let hot = |n: u8| Ipv4Addr::new(192, 0, 2, n);
        let mut call = async |peer| -> bool {
            let response = service.ready().await.unwrap().call(request(peer)).await;
            match response.unwrap().status() {
                StatusCode::OK => true,
                StatusCode::TOO_MANY_REQUESTS => false,
                other => panic!("unexpected status {other}"),
            }
        };
        let capacity = sentinel.gateway_rules().rules()[0].effective_capacity();
        let before = resident_bytes();
        let mut hot_admitted = [0usize; HOT_KEYS as usize];
        let mut cold_admitted = 0u64;
        for n in 0..COLD_KEYS {
            // 10.0.0.0/8 holds 16 million addresses: each cold key once.
            let cold = Ipv4Addr::from(0x0a00_0000 + n);
            cold_admitted += u64::from(call(cold).await);
            if n % HOT_EVERY == 0 {
                for key in 0..HOT_KEYS {
                    hot_admitted[usize::from(key)] += usize::from(call(hot(key)).await);
                }
            }
        }
        let grown = resident_bytes().saturating_sub(before);
        assert_eq!(hot_admitted, [LIMIT; HOT_KEYS as usize], "hot keys within the churn");
        let (_, table) = sentinel.gateway_rules().tables().remove(0);
        println!(
            "{COLD_KEYS} cold keys: {cold_admitted} admitted; table: {} values, {} bytes, {} evictions; resident memory grew {} KiB",
            table.values,
            table.bytes,
            table.evictions,
            grown / 1024
        );
        assert!(table.values <= capacity, "{} values", table.values);
        assert!(table.bytes <= capacity.div_ceil(8) * 8 * PARAM_VALUE_BYTES + 4096);
        assert!(table.evictions > 0);
        // Not the keys': a million of them would be tens of MiB.
        assert!(grown < 16 << 20, "resident memory grew {grown} bytes");
        // The next window: each hot key again exactly its limit.
        clock.advance_ms(1_001);
        for key in 0..HOT_KEYS {
            let mut admitted = 0;
            for _ in 0..3 * LIMIT {
                admitted += usize::from(call(hot(key)).await);
            }
            assert_eq!(admitted, LIMIT, "hot key {key} in the next second");
        }
    });
}
