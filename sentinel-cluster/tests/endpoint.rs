//! An attached `RedisCluster` tells the instance where it asks for
//! permits (what the command API's `cluster/client/fetchConfig` answers):
//! the Redis host and port, the entry budget, the connect timeout; and
//! still does while Redis does not answer.

use std::time::Duration;

use sentinel_flow_cluster::{ClusterConfig, RedisCluster};
use sentinel_flow_core::Sentinel;

#[test]
fn an_attached_redis_cluster_says_its_redis_endpoint() {
    let sentinel = Sentinel::builder().build();
    assert_eq!(sentinel.cluster_endpoint(), None);
    // Nothing listens on port 1: the client stays in fallback.
    let config = ClusterConfig::new("redis://:secret@127.0.0.1:1/")
        .budget(Duration::from_millis(3))
        .connect_timeout(Duration::from_millis(50));
    let cluster = RedisCluster::start(config).unwrap();
    cluster.attach(&sentinel);
    let endpoint = sentinel.cluster_endpoint().expect("an endpoint");
    assert_eq!((endpoint.host(), endpoint.port()), ("127.0.0.1", 1));
    assert_eq!(endpoint.request_timeout(), Duration::from_millis(3));
    assert_eq!(endpoint.connect_timeout(), Some(Duration::from_millis(50)));
}
