//! The ZooKeeper source's writer: `setData` guarded by the version last
//! read, `create` for a node expected missing.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::wire::{self, Connection, Reader, Reply};
use super::{Seen, bad_path, connect_any, fingerprint, node_path, path};
use crate::source::{RuleWriter, WriteFailure};

/// Writes on a connection of its own, opened when first needed and again
/// when it has been idle past its session's silence limit.
pub(super) struct ZooKeeperWriter {
    pub(super) hosts: Arc<[String]>,
    pub(super) root: Option<Arc<str>>,
    pub(super) session_timeout: Duration,
    pub(super) connection: Mutex<Option<Connection>>,
    pub(super) seen: Arc<Mutex<HashMap<String, Seen>>>,
}

impl RuleWriter for ZooKeeperWriter {
    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        value: &[u8],
    ) -> Result<(), WriteFailure> {
        let node = node_path(self.root.as_deref(), key);
        if let Some(why) = bad_path(&node) {
            return Err(WriteFailure::Unavailable(format!(
                "zookeeper: {node:?} is not a node path: {why}"
            )));
        }
        let mut slot = self.connection.lock();
        if slot.as_ref().is_none_or(Connection::is_stale) {
            *slot = None;
            let (connection, _) = connect_any(&self.hosts, 0, self.session_timeout)
                .map_err(|e| WriteFailure::Unavailable(format!("zookeeper: {e}")))?;
            *slot = Some(connection);
        }
        let Some(connection) = slot.as_mut() else {
            return Err(WriteFailure::Unavailable("zookeeper: not connected".into()));
        };
        let result = match expected {
            None => create(connection, &node, value),
            Some(expected) => {
                let seen = self.seen.lock().get(key).copied();
                set(connection, &node, seen, expected, value)
            }
        };
        match result {
            Ok(Ok(version)) => {
                self.seen.lock().insert(
                    key.to_owned(),
                    Seen {
                        version,
                        fingerprint: fingerprint(value),
                    },
                );
                Ok(())
            }
            Ok(Err(conflict)) => Err(WriteFailure::Conflict(conflict)),
            Err(why) => {
                *slot = None;
                Err(WriteFailure::Unavailable(format!("zookeeper: {why}")))
            }
        }
    }
}

/// Outer `Err`: the connection failed; inner: the write is a conflict;
/// `Ok(Ok(version))`: the node's new version.
type Written = Result<Result<i32, String>, String>;

/// Creates `key` holding `value`, its missing parents first (empty).
fn create(connection: &mut Connection, key: &str, value: &[u8]) -> Written {
    connection.set_data_cap(0);
    let mut at = 0;
    while let Some(slash) = key[at + 1..].find('/') {
        at += 1 + slash;
        let record = path(&key[..at]).bytes(&[]).open_acl().int(0);
        match connection.call(wire::OP_CREATE, record)? {
            Reply::Done(_) | Reply::Failed(wire::NODE_EXISTS) => {}
            Reply::Failed(code) => {
                return Err(format!(
                    "cannot create the parent {}: {}",
                    &key[..at],
                    wire::code_name(code)
                ));
            }
            Reply::Oversized(_) => return Err("a create reply over the frame limit".into()),
        }
    }
    let record = path(key).bytes(value).open_acl().int(0);
    match connection.call(wire::OP_CREATE, record)? {
        Reply::Done(_) => Ok(Ok(0)),
        Reply::Failed(wire::NODE_EXISTS) => Ok(Err(
            "the node exists: another writer created it since it was read as missing".into(),
        )),
        Reply::Failed(code) => Err(format!("create {key}: {}", wire::code_name(code))),
        Reply::Oversized(_) => Err("a create reply over the frame limit".into()),
    }
}

/// Sets `key` to `value` if it still holds `expected` at the version last
/// read (`seen`, when its data was `expected`; otherwise the version read
/// now, if its data is `expected`).
fn set(
    connection: &mut Connection,
    key: &str,
    seen: Option<Seen>,
    expected: &[u8],
    value: &[u8],
) -> Written {
    let version = match seen.filter(|s| s.fingerprint == fingerprint(expected)) {
        Some(seen) => seen.version,
        None => {
            connection.set_data_cap(expected.len());
            match connection.call(wire::OP_GET_DATA, path(key).boolean(false))? {
                Reply::Done(body) => {
                    let mut reply = Reader::new(&body);
                    if reply.bytes()? != expected {
                        return Ok(Err("the node holds another value".into()));
                    }
                    reply.stat()?.version
                }
                Reply::Failed(wire::NO_NODE) => {
                    return Ok(Err("the node no longer exists".into()));
                }
                Reply::Failed(code) => {
                    return Err(format!("getData {key}: {}", wire::code_name(code)));
                }
                Reply::Oversized(_) => return Ok(Err("the node holds another value".into())),
            }
        }
    };
    connection.set_data_cap(0);
    let record = path(key).bytes(value).int(version);
    match connection.call(wire::OP_SET_DATA, record)? {
        Reply::Done(body) => Ok(Ok(Reader::new(&body).stat()?.version)),
        Reply::Failed(wire::BAD_VERSION) => Ok(Err(format!(
            "the node's version is no longer {version}, the one read: another writer changed it"
        ))),
        Reply::Failed(wire::NO_NODE) => Ok(Err("the node no longer exists".into())),
        Reply::Failed(code) => Err(format!("setData {key}: {}", wire::code_name(code))),
        Reply::Oversized(_) => Err("a setData reply over the frame limit".into()),
    }
}
