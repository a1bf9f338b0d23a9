//! Writing: a transaction that puts the key only if its `mod_revision`
//! is still the one read.

use parking_lot::Mutex;
use serde_json::{Value, json};

use super::range::{Answer, int};
use super::{ENVELOPE, EtcdSource, Seen, base64, fingerprint};
use crate::source::{RuleWriter, WriteFailure};

/// Writes with a transaction on the key's `mod_revision`, on a connection
/// of its own.
pub(super) struct EtcdWriter {
    /// The writer's own connection and the keys' revisions as read.
    pub(super) source: Mutex<EtcdSource>,
}

impl RuleWriter for EtcdWriter {
    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        value: &[u8],
    ) -> Result<(), WriteFailure> {
        let mut source = self.source.lock();
        let mod_revision = match expected {
            // Absent: the transaction compares with 0, which only an
            // absent key has.
            None => 0,
            Some(expected) => {
                let expected_seen = Some(fingerprint(expected));
                let known = source.seen.lock().get(key).copied();
                match known {
                    // The revision this instance read the expected value at.
                    Some(seen) if seen.value == expected_seen => seen.mod_revision,
                    // A value never read here: the key's revision now, if
                    // it holds the expected value.
                    _ => {
                        let (_, now, _) = source
                            .range(key, None, expected.len())
                            .map_err(|e| WriteFailure::Unavailable(e.to_string()))?;
                        if now.value != expected_seen {
                            return Err(WriteFailure::Conflict(
                                "the key holds another value than the one expected".into(),
                            ));
                        }
                        now.mod_revision
                    }
                }
            }
        };
        let key64 = base64::encode(key.as_bytes());
        let request = json!({
            "compare": [{
                "key": key64,
                "target": "MOD",
                "result": "EQUAL",
                "mod_revision": mod_revision.to_string(),
            }],
            "success": [{ "request_put": { "key": key64, "value": base64::encode(value) } }],
        });
        let answer = source
            .post("/v3/kv/txn", request.to_string().as_bytes(), ENVELOPE)
            .map_err(|e| WriteFailure::Unavailable(format!("etcd: {e}")))?;
        let Answer::Whole(body) = answer else {
            return Err(WriteFailure::Unavailable(
                "etcd: an oversized transaction answer".into(),
            ));
        };
        let answer: Value = serde_json::from_slice(&body).map_err(|e| {
            WriteFailure::Unavailable(format!("etcd: a transaction answer that is not JSON: {e}"))
        })?;
        if answer.get("succeeded").and_then(Value::as_bool) != Some(true) {
            return Err(WriteFailure::Conflict(format!(
                "another writer changed the key since it was read at mod_revision {mod_revision}"
            )));
        }
        if let Some(revision) = int(answer.pointer("/header/revision")) {
            let seen = Seen {
                mod_revision: revision,
                value: Some(fingerprint(value)),
            };
            source.seen.lock().insert(key.to_owned(), seen);
        }
        Ok(())
    }
}
