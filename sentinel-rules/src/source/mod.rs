//! Rule sources: rules kept in a configuration store (etcd, Redis,
//! ZooKeeper, or any store a [`RuleSource`] is written for) and followed
//! as they change.
//!
//! A source delivers the values of the keys its [`RuleFormat`] names; a
//! [`SourceWatcher`] reads them, validates the whole rule set and puts it
//! in force in one swap (the last good rules stay on any error, every
//! problem told with its key and place), keeps a [`SourceState`] for
//! operators, reconnects with capped backoff, and may keep a
//! last-known-good copy on local disk to start from while the store is
//! unreachable. A source that can be written gives a [`SourceStore`], the
//! destination of the command API's `setRules`.
//!
//! Files:
//! - `format.rs`: which keys hold which kinds, and how their values read
//!   (our YAML under one key, or Sentinel's JSON one key per kind);
//! - `state.rs`: the state per source and its Prometheus text;
//! - `backup.rs`: the last-known-good copy;
//! - `shared.rs`: what the watcher's thread and the stores share (the
//!   values in force, one apply at a time);
//! - `watcher.rs`: the builder and the handle; `run.rs`: the thread's loop
//!   with its backoff;
//! - `store.rs`: writes guarded by the values last read;
//! - `redis.rs` (feature `redis`): the Redis source;
//! - `etcd/` (feature `etcd`): the etcd v3 source, through etcd's JSON
//!   gateway (`http.rs` its bounded HTTP/1.1 client, `range.rs` reads,
//!   `watch.rs` the watch stream, `writer.rs` transactions, `base64.rs`
//!   the gateway's encoding of keys and values).
//! - `zookeeper.rs` (feature `zookeeper`): the ZooKeeper source, its wire
//!   protocol in `zookeeper/wire.rs`, its writer in `zookeeper/writer.rs`.
//! - `file/`: the rule file as a source, polled (what
//!   [`RuleWatcher`](crate::RuleWatcher) runs).

mod backup;
#[cfg(feature = "etcd")]
mod etcd;
mod file;
mod format;
#[cfg(feature = "redis")]
mod redis;
mod run;
mod shared;
mod state;
mod store;
mod watcher;
#[cfg(feature = "zookeeper")]
mod zookeeper;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "etcd")]
pub use etcd::{DEFAULT_ETCD_TIMEOUT, DEFAULT_WATCH_REFRESH, EtcdSource};
pub(crate) use file::{FileSource, Known, file_values};
pub use format::{RuleFormat, SentinelKeys};
#[cfg(feature = "redis")]
pub use redis::RedisSource;
pub use state::SourceState;
pub use store::{SourceStore, SourceWriteError};
#[cfg(test)]
pub(crate) use watcher::Stepped;
pub use watcher::{DEFAULT_MAX_BACKOFF, DEFAULT_MIN_BACKOFF, SourceHandle, SourceWatcher};
#[cfg(feature = "zookeeper")]
pub use zookeeper::{DEFAULT_SESSION_TIMEOUT, ZooKeeperSource};

/// A configuration store rules are read from: connects, reads the values
/// of keys, and waits for word that they changed. The [`SourceWatcher`]
/// calls it from one thread; every call may block for I/O, `wait` no
/// longer than its timeout.
pub trait RuleSource: Send + 'static {
    /// The store, in logs, errors and metrics: `redis://127.0.0.1:6379/0`.
    fn name(&self) -> String;

    /// Connects (again, after an error) and starts listening for changes
    /// to `keys`, so that a change made after this returns is told by
    /// [`wait`](Self::wait). Called before every [`read`](Self::read)
    /// that follows a failure.
    fn connect(&mut self, keys: &[String]) -> Result<(), SourceError>;

    /// The current value of each of `keys`, in order. A value longer than
    /// `max_size` bytes is [`KeyValue::TooLarge`], not read.
    fn read(&mut self, keys: &[String], max_size: usize) -> Result<Values, SourceError>;

    /// Waits at most `timeout` for word that a key may have changed:
    /// `Ok(true)` when some came (all word that came meanwhile taken with
    /// it, so a flood of changes gives one read), `Ok(false)` when none
    /// did, `Err` when the connection is lost.
    fn wait(&mut self, timeout: Duration) -> Result<bool, SourceError>;

    /// A writer of the store, when it can be written.
    fn writer(&self) -> Option<Arc<dyn RuleWriter>> {
        None
    }

    /// `Some(interval)` for a store that tells of no change and is polled
    /// (a file): the watcher then pauses `interval` between calls to
    /// [`wait`](Self::wait), which checks without blocking (its timeout
    /// is zero). `None` (the default): `wait` blocks until word comes.
    fn poll_interval(&self) -> Option<Duration> {
        None
    }
}

/// Writes to a store, each guarded by the value the writer expects the key
/// to hold (what the instance last read): a writer that read an older
/// value gets a conflict and nothing is written.
pub trait RuleWriter: Send + Sync + 'static {
    /// Sets `key` to `value` (and tells the store's listeners) if it still
    /// holds `expected` (`None`: absent).
    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        value: &[u8],
    ) -> Result<(), WriteFailure>;
}

/// Why a [`RuleWriter`] did not write.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WriteFailure {
    /// The key no longer holds the expected value: someone else wrote it.
    Conflict(String),
    /// The store could not be reached or refused the write.
    Unavailable(String),
}

/// What a key holds.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyValue {
    /// Nothing: the key does not exist.
    Missing,
    /// The value's bytes.
    Present(Vec<u8>),
    /// A value longer than the size limit, not read: its length.
    TooLarge(u64),
    /// The key holds something that is not a value (a Redis list, say).
    Unreadable(String),
    /// A value that may be caught while it is being written (a file
    /// rewritten in place, read once): nothing is taken, the rules in
    /// force stay, and the source tells of a change again at its next
    /// [`wait`](RuleSource::wait) to have it read once more.
    Unsettled,
}

/// The values of the keys a source was asked for, in order, with the
/// store's revision of them when it has one (etcd's `mod_revision`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Values {
    /// The store's revision, if it keeps one.
    pub revision: Option<String>,
    /// Each key and what it holds.
    pub entries: Vec<(String, KeyValue)>,
}

impl Values {
    /// What `key` holds (`Missing` when it was not read).
    pub fn get(&self, key: &str) -> &KeyValue {
        self.entries
            .iter()
            .find(|(k, _)| k == key)
            .map_or(&KeyValue::Missing, |(_, v)| v)
    }

    /// A revision for the values: the store's, or a hash of the entries
    /// (`h:` and 16 hex digits) for a store without revisions.
    pub(crate) fn revision_or_hash(&self) -> String {
        if let Some(revision) = &self.revision {
            return revision.clone();
        }
        let mut hash = Fnv::default();
        let mut eat = |bytes: &[u8]| hash.eat(bytes);
        for (key, value) in &self.entries {
            eat(key.as_bytes());
            match value {
                KeyValue::Present(bytes) => {
                    eat(&[1]);
                    eat(&(bytes.len() as u64).to_le_bytes());
                    eat(bytes);
                }
                KeyValue::Missing => eat(&[0]),
                KeyValue::TooLarge(len) => {
                    eat(&[2]);
                    eat(&len.to_le_bytes());
                }
                KeyValue::Unreadable(why) => {
                    eat(&[3]);
                    eat(why.as_bytes());
                }
                KeyValue::Unsettled => eat(&[4]),
            }
        }
        hash.revision()
    }
}

/// FNV-1a, 64 bits: a revision for content from a store without
/// revisions, stable across processes and releases (unlike std's hasher).
pub(crate) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    pub(crate) fn eat(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// `h:` and 16 hex digits.
    pub(crate) fn revision(&self) -> String {
        format!("h:{:016x}", self.0)
    }
}

/// A store that cannot be reached or answered with an error: the rules in
/// force stay, and the watcher reconnects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceError(String);

impl SourceError {
    /// An error saying `message`.
    pub fn new(message: impl Into<String>) -> Self {
        SourceError(message.into())
    }
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SourceError {}

#[cfg(test)]
mod tests;
