//! `getClusterMode` answers as Sentinel's `FetchClusterModeCommandHandler`:
//! client mode while a cluster service is attached and answers, not
//! started otherwise (none attached, or one that cannot answer).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::{T0, center, get, instance};
use sentinel_flow_core::flow::{ClusterFlow, ClusterTokens, TokenAnswer};
use serde_json::json;

/// A service that grants, and answers or not as told (a client connected
/// to its cluster or not).
#[derive(Debug, Default)]
struct Client {
    down: AtomicBool,
}

impl ClusterTokens for Client {
    fn acquire(&self, _: &ClusterFlow, _: u32, _: u64) -> TokenAnswer {
        TokenAnswer::Granted
    }

    fn is_available(&self) -> bool {
        !self.down.load(Ordering::SeqCst)
    }
}

#[tokio::test]
async fn get_cluster_mode_says_client_while_an_attached_cluster_answers() {
    let (sentinel, clock) = instance();
    let server = center(&sentinel).start().unwrap();
    let mode = || async { get(server.local_addr(), "/getClusterMode").await.json() };
    let not_started = |last_modified: i64| {
        json!({
            "mode": -1,
            "lastModified": last_modified,
            "clientAvailable": false,
            "serverAvailable": false,
        })
    };
    assert_eq!(mode().await, not_started(-1));

    clock.advance_ms(250);
    let client = Arc::new(Client::default());
    sentinel.set_cluster_tokens(Some(client.clone()));
    let attached_at = (T0 + 250) as i64;
    assert_eq!(
        mode().await,
        json!({
            "mode": 0,
            "lastModified": attached_at,
            "clientAvailable": true,
            "serverAvailable": false,
        })
    );

    // Attached but not connected: not started.
    client.down.store(true, Ordering::SeqCst);
    assert_eq!(mode().await, not_started(attached_at));
    client.down.store(false, Ordering::SeqCst);
    assert_eq!(mode().await["mode"], 0);

    clock.advance_ms(250);
    sentinel.set_cluster_tokens(None);
    assert_eq!(mode().await, not_started((T0 + 500) as i64));
}
