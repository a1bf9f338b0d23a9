//! `ZooKeeperSource`: rules kept in ZooKeeper nodes, followed through
//! watches.
//!
//! Keys are node paths (`/sentinel/orders-flow-rules`), or names under a
//! root node ([`ZooKeeperSource::root`]: `/{groupId}/{dataId}`, as
//! Sentinel's `ZookeeperDataSource` keeps its JSON). A read asks each
//! node's `Stat` with `exists` (which sets a watch, on its creation when
//! it is missing), then the data of those within the size limit with
//! `getData` (a watch too): a node over the limit is never fetched. A
//! watch fires once; the read that follows sets it again, so a flood of
//! changes gives one read per round trip, the latest value winning. A
//! missing node reads as absent. The revision in the source's state is
//! `zxid:0x...`: the server's latest transaction when the values were
//! read.
//!
//! The client is ZooKeeper's wire protocol written here (no dependency),
//! blocking, on the watcher's thread: one connection, one session, pinged
//! every third of the session timeout. A lost connection, a silent server
//! or an expired session is an error: the watcher reconnects with its
//! backoff on a new session, `sync`s the server it reached with the
//! ensemble's leader (a follower that lagged does not give older rules
//! than those in force), reads the nodes again and so sets the watches
//! again (a change made meanwhile is not missed).
//!
//! A write is `setData` with the version of the node this source last
//! read (a `BadVersion` from the server is a conflict), or `create` when
//! the writer expects the node not to exist (a `NodeExists` is a
//! conflict); a missing parent is created first.

mod wire;
mod writer;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::{Fnv, KeyValue, RuleSource, RuleWriter, SourceError, Values};
use wire::{Connection, Reader, Record, Reply};
use writer::ZooKeeperWriter;

/// The session timeout asked of the server by default; the server grants
/// one within its bounds (by default 4 s to 40 s).
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Rules in ZooKeeper: node paths read with `exists` and `getData`,
/// changes told by watches (see the module's documentation).
///
/// Bounds: a node's data over the watcher's
/// [`LoadOptions::max_size`](crate::LoadOptions::max_size) is refused
/// unread; no frame from the server is kept past that limit plus 1 KiB of
/// header; opening a TCP connection may take 2 s per address, a reply 2 s
/// (a frame, once begun, must arrive whole within that too); a server
/// silent for two thirds of the session timeout is taken for lost. Host
/// names are resolved by the system's resolver, under its own timeouts.
///
/// ```no_run
/// use sentinel_flow_rules::source::{RuleFormat, SentinelKeys, SourceWatcher, ZooKeeperSource};
///
/// let source = ZooKeeperSource::open("zk1:2181,zk2:2181")?;
/// let keys = SentinelKeys::none().key("flow", "/sentinel/orders-flow-rules");
/// let handle = SourceWatcher::new(source, RuleFormat::sentinel_json(keys))
///     .last_known_good("/var/lib/orders/rules.lkg.json")
///     .start(sentinel_flow_core::global())?;
/// println!("{:?}", handle.state());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct ZooKeeperSource {
    hosts: Arc<[String]>,
    /// The node keys are read under, if any (`/sentinel`).
    root: Option<Arc<str>>,
    name: String,
    session_timeout: Duration,
    connection: Option<Connection>,
    /// The host tried first at the next connect: the one after the last
    /// that failed.
    next_host: usize,
    /// The version of each node as last read, for the writers.
    seen: Arc<Mutex<HashMap<String, Seen>>>,
}

/// A node as last read: its version and a fingerprint of its data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    version: i32,
    fingerprint: (usize, u64),
}

fn fingerprint(data: &[u8]) -> (usize, u64) {
    let mut hash = Fnv::default();
    hash.eat(data);
    (data.len(), hash.0)
}

impl ZooKeeperSource {
    /// A source on the ensemble `hosts` (`host:port`, several separated by
    /// commas, tried in turn); nothing is connected until the watcher
    /// starts. A chroot suffix (`host:port/app`) is not supported: write
    /// the full paths as keys.
    pub fn open(hosts: &str) -> Result<Self, SourceError> {
        let mut list = Vec::new();
        for host in hosts.split(',').map(str::trim) {
            let port = host.rsplit_once(':').map(|(_, port)| port);
            if host.contains('/') || port.is_none_or(|p| p.parse::<u16>().is_err()) {
                return Err(SourceError::new(format!(
                    "bad ZooKeeper address {host:?} in {hosts:?}: expected host:port[,host:port...]"
                )));
            }
            list.push(host.to_owned());
        }
        Ok(ZooKeeperSource {
            name: format!("zookeeper://{}", list.join(",")),
            hosts: list.into(),
            root: None,
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            connection: None,
            next_host: 0,
            seen: Arc::default(),
        })
    }

    /// The session timeout to ask for (default
    /// [`DEFAULT_SESSION_TIMEOUT`]); the server grants one within its
    /// bounds (`minSessionTimeout`, `maxSessionTimeout`). Pings go every
    /// third of it, and a server silent for two thirds of it is taken for
    /// lost.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// Keys are names under the node `root` rather than whole paths:
    /// with `root("/SENTINEL_GROUP")`, the key `orders-flow-rules` is the
    /// node `/SENTINEL_GROUP/orders-flow-rules`, the path Sentinel's
    /// `ZookeeperDataSource` keeps a group's rules at (`/{groupId}/{dataId}`),
    /// so [`SentinelKeys::for_app`](super::SentinelKeys::for_app) names
    /// them. `root` must be a node path.
    pub fn root(mut self, root: &str) -> Result<Self, SourceError> {
        if let Some(why) = bad_path(root) {
            return Err(SourceError::new(format!(
                "bad ZooKeeper root {root:?}: {why}"
            )));
        }
        let root = (root != "/").then(|| Arc::from(root));
        self.name = format!(
            "zookeeper://{}{}",
            self.hosts.join(","),
            root.as_deref().unwrap_or("")
        );
        self.root = root;
        Ok(self)
    }

    fn lost(&mut self, why: String) -> SourceError {
        self.connection = None;
        SourceError::new(format!("zookeeper: {why}"))
    }
}

impl fmt::Debug for ZooKeeperSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ZooKeeperSource")
            .field("name", &self.name)
            .field("session_timeout", &self.session_timeout)
            .field("connected", &self.connection.is_some())
            .finish_non_exhaustive()
    }
}

/// Connects to the first of `hosts` that answers, from `first`; returns
/// the connection and the index after it.
fn connect_any(
    hosts: &[String],
    first: usize,
    session_timeout: Duration,
) -> Result<(Connection, usize), String> {
    let mut errors = Vec::new();
    for i in 0..hosts.len() {
        let at = (first + i) % hosts.len();
        match Connection::open(&hosts[at], session_timeout) {
            Ok(connection) => return Ok((connection, at)),
            Err(e) => errors.push(e),
        }
    }
    Err(errors.join("; "))
}

/// Why `key` is not a node path ZooKeeper takes, if it is not.
fn bad_path(key: &str) -> Option<&'static str> {
    if !key.starts_with('/') {
        return Some("a node path starts with /");
    }
    if key.len() > 1 && key.ends_with('/') {
        return Some("a node path does not end with /");
    }
    if key.contains('\0') {
        return Some("a node path holds no NUL character");
    }
    if key.len() > 1
        && key[1..]
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..")
    {
        return Some("a node path has no empty, . or .. part");
    }
    None
}

/// Has the server catch up with the leader before anything is read.
fn sync(connection: &mut Connection) -> Result<(), String> {
    match connection.call(wire::OP_SYNC, path("/"))? {
        Reply::Done(_) => Ok(()),
        Reply::Failed(code) => Err(format!("sync: {}", wire::code_name(code))),
        Reply::Oversized(_) => Err("a sync reply over the frame limit".into()),
    }
}

/// The node of `key`: the key itself, or the key under `root`.
fn node_path(root: Option<&str>, key: &str) -> String {
    match root {
        Some(root) => format!("{root}/{key}"),
        None => key.to_owned(),
    }
}

/// A node path as a record's string.
fn path(key: &str) -> Record {
    Record::default().bytes(key.as_bytes())
}

impl RuleSource for ZooKeeperSource {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn connect(&mut self, _keys: &[String]) -> Result<(), SourceError> {
        self.connection = None;
        match connect_any(&self.hosts, self.next_host, self.session_timeout) {
            Ok((mut connection, at)) => {
                if let Err(why) = sync(&mut connection) {
                    self.next_host = (at + 1) % self.hosts.len();
                    return Err(SourceError::new(format!("zookeeper: {why}")));
                }
                tracing::debug!(source = %self.name, server = %self.hosts[at], session_timeout = ?connection.session_timeout(), "sentinel-flow-rules: ZooKeeper session opened");
                self.next_host = at;
                self.connection = Some(connection);
                Ok(())
            }
            Err(why) => {
                self.next_host = (self.next_host + 1) % self.hosts.len();
                Err(SourceError::new(format!("zookeeper: {why}")))
            }
        }
    }

    fn read(&mut self, keys: &[String], max_size: usize) -> Result<Values, SourceError> {
        let Some(connection) = self.connection.as_mut() else {
            return Err(SourceError::new("zookeeper: not connected"));
        };
        connection.set_data_cap(max_size);
        let nodes: Vec<(&String, String)> = keys
            .iter()
            .map(|key| (key, node_path(self.root.as_deref(), key)))
            .collect();
        match read_nodes(connection, &nodes, max_size) {
            Ok((values, seen)) => {
                let mut known = self.seen.lock();
                for (key, _) in &values.entries {
                    match seen.get(key.as_str()) {
                        Some(s) => known.insert(key.clone(), *s),
                        None => known.remove(key),
                    };
                }
                Ok(values)
            }
            Err(why) => Err(self.lost(why)),
        }
    }

    fn wait(&mut self, timeout: Duration) -> Result<bool, SourceError> {
        let Some(connection) = self.connection.as_mut() else {
            return Err(SourceError::new("zookeeper: not connected"));
        };
        connection.wait(timeout).map_err(|why| self.lost(why))
    }

    fn writer(&self) -> Option<Arc<dyn RuleWriter>> {
        Some(Arc::new(ZooKeeperWriter {
            hosts: self.hosts.clone(),
            root: self.root.clone(),
            session_timeout: self.session_timeout,
            connection: Mutex::new(None),
            seen: self.seen.clone(),
        }))
    }
}

/// Every node's `Stat` with a watch (one pipelined round trip), then the
/// data of those within the limit with a watch (another): data over the
/// limit is never fetched. `nodes` are the keys and their node paths. The
/// revision is the highest transaction id the server reported by then.
fn read_nodes(
    connection: &mut Connection,
    nodes: &[(&String, String)],
    max_size: usize,
) -> Result<(Values, HashMap<String, Seen>), String> {
    let mut entries: Vec<(String, KeyValue)> = Vec::with_capacity(nodes.len());
    let mut asked = Vec::new();
    for (key, node) in nodes {
        match bad_path(node) {
            Some(why) => entries.push((
                (*key).clone(),
                KeyValue::Unreadable(format!("{node:?} is not a ZooKeeper node path: {why}")),
            )),
            None => {
                let xid = connection.send(wire::OP_EXISTS, path(node).boolean(true))?;
                asked.push((entries.len(), xid));
                entries.push(((*key).clone(), KeyValue::Missing));
            }
        }
    }
    let mut wanted = Vec::new();
    for (index, xid) in asked {
        match connection.receive(xid)? {
            Reply::Done(body) => {
                let stat = Reader::new(&body).stat()?;
                let len = u64::try_from(stat.data_length).unwrap_or(0);
                if usize::try_from(len).map_or(true, |len| len > max_size) {
                    entries[index].1 = KeyValue::TooLarge(len);
                } else {
                    wanted.push(index);
                }
            }
            Reply::Failed(wire::NO_NODE) => {}
            Reply::Failed(code) => entries[index].1 = per_node(code)?,
            Reply::Oversized(_) => return Err("an exists reply over the frame limit".into()),
        }
    }
    let mut sent = Vec::with_capacity(wanted.len());
    for index in wanted {
        let node = &nodes[index].1;
        let xid = connection.send(wire::OP_GET_DATA, path(node).boolean(true))?;
        sent.push((index, xid));
    }
    let mut seen = HashMap::new();
    for (index, xid) in sent {
        entries[index].1 = match connection.receive(xid)? {
            Reply::Done(body) => {
                let mut reply = Reader::new(&body);
                let data = reply.bytes()?;
                let stat = reply.stat()?;
                if data.len() > max_size {
                    KeyValue::TooLarge(data.len() as u64)
                } else {
                    seen.insert(
                        entries[index].0.clone(),
                        Seen {
                            version: stat.version,
                            fingerprint: fingerprint(data),
                        },
                    );
                    KeyValue::Present(data.to_vec())
                }
            }
            // Deleted since its `exists`, whose watch tells of it.
            Reply::Failed(wire::NO_NODE) => KeyValue::Missing,
            Reply::Failed(code) => per_node(code)?,
            // Grown past the limit since its `exists`.
            Reply::Oversized(len) => KeyValue::TooLarge(len),
        };
    }
    let values = Values {
        revision: Some(format!("zxid:{:#x}", connection.zxid())),
        entries,
    };
    Ok((values, seen))
}

/// An error code about one node (`NoAuth`, say) is what that key holds; a
/// code about the session or the connection loses it.
fn per_node(code: i32) -> Result<KeyValue, String> {
    if code <= -100 && code != -112 && code != -118 {
        Ok(KeyValue::Unreadable(format!(
            "the server refused to read it: {}",
            wire::code_name(code)
        )))
    } else {
        Err(format!("the server answered {}", wire::code_name(code)))
    }
}

#[cfg(test)]
mod tests {
    use super::{ZooKeeperSource, bad_path};

    #[test]
    fn addresses_are_host_and_port_each() {
        let source = ZooKeeperSource::open("zk1:2181, zk2:2182").unwrap();
        assert_eq!(source.name, "zookeeper://zk1:2181,zk2:2182");
        let source = source.root("/SENTINEL_GROUP").unwrap();
        assert_eq!(source.name, "zookeeper://zk1:2181,zk2:2182/SENTINEL_GROUP");
        for bad in ["SENTINEL_GROUP", "/a/", "/a//b"] {
            let source = ZooKeeperSource::open("zk1:2181").unwrap();
            let error = source.root(bad).unwrap_err();
            assert!(
                error.to_string().contains("bad ZooKeeper root"),
                "{bad}: {error}"
            );
        }
        for bad in ["zk1", "zk1:2181,", "zk1:port", "zk1:2181/app", ""] {
            let error = ZooKeeperSource::open(bad).unwrap_err();
            assert!(
                error.to_string().contains("bad ZooKeeper address"),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn node_paths_are_checked_as_zookeeper_checks_them() {
        assert_eq!(bad_path("/sentinel/app-flow-rules"), None);
        assert_eq!(bad_path("/"), None);
        assert!(bad_path("app-flow-rules").is_some());
        assert!(bad_path("/sentinel/").is_some());
        assert!(bad_path("/a//b").is_some());
        assert!(bad_path("/a/./b").is_some());
        assert!(bad_path("/a/../b").is_some());
        assert!(bad_path("/a\0b").is_some());
    }
}
