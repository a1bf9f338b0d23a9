//! Rule sources against real configuration servers, each started by the
//! test on 127.0.0.1 in a temp dir: one contract (`contract.rs`) every
//! backend passes, and each backend's own cases in its file.

#[cfg(any(feature = "redis", feature = "etcd", feature = "zookeeper"))]
#[macro_use]
mod contract;

#[cfg(feature = "redis")]
mod redis;

#[cfg(feature = "redis")]
contract_tests!(redis_contract, crate::redis::RedisBackend);

#[cfg(feature = "etcd")]
mod etcd;

#[cfg(feature = "etcd")]
contract_tests!(etcd_contract, crate::etcd::EtcdBackend);

#[cfg(feature = "zookeeper")]
mod zookeeper;

#[cfg(feature = "zookeeper")]
contract_tests!(zookeeper_contract, crate::zookeeper::ZooKeeperBackend);
