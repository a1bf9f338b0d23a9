//! `EtcdSource`: rules kept in etcd v3, read and watched through its JSON
//! gateway (`/v3/kv/range`, `/v3/watch`, `/v3/kv/txn`) over HTTP/1.1.
//!
//! The keys are read one range each, all at the revision of the first
//! (one consistent snapshot), and watched on one stream from the
//! revision after the last one read: a change made while the stream was
//! down is told as soon as it is back. A start revision etcd has
//! compacted away cancels the watch: the keys are then read again whole
//! and watched from the present. A write is a transaction that puts the
//! key only if its `mod_revision` is still the one last read (0: the key
//! must not exist); a failed comparison is a conflict, and nothing is
//! written.
//!
//! Everything is blocking, on the watcher's thread (writes on the
//! caller's), with std's `TcpStream`: see the bounds on [`EtcdSource`].

mod base64;
mod http;
mod watch;

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::{Value, json};

use super::{Fnv, KeyValue, RuleSource, RuleWriter, SourceError, Values, WriteFailure};
use http::{Connection, read_capped};
use watch::{Message, Watch};

/// The default for [`EtcdSource::timeout`].
pub const DEFAULT_ETCD_TIMEOUT: Duration = Duration::from_secs(2);

/// Room kept for a range answer's JSON around the value: the header, the
/// key twice over in base64, the revisions and the field names.
const ENVELOPE: usize = 16 * 1024;

/// How long reading one answer may take in all, its oversized rest
/// included, however the server trickles it.
const ANSWER_DEADLINE: Duration = Duration::from_secs(30);

/// Rules in etcd v3 (see the module's documentation), through the JSON
/// gateway etcd serves on its client URL (`/v3/`, etcd 3.4 and later).
///
/// Bounds on what comes from the server:
/// - connecting, each read and each write wait at most
///   [`timeout`](Self::timeout) (default 2 s); one answer is read within
///   30 s in all;
/// - a range answer is kept up to the base64 of the watcher's
///   `max_size` (4 MiB by default) plus 16 KiB; a longer one (a value
///   over the limit) is read to its end without being kept, its value's
///   length counted, and the key is `TooLarge`, never decoded;
/// - of each watch message at most 4 KiB is kept (a longer one is an
///   event, word of a change); status and header lines at most 8 KiB, at
///   most 64 headers, chunk-size lines at most 1 KiB.
///
/// etcd itself refuses a request over its `--max-request-bytes` (1.5 MiB
/// by default): raise it to store larger rule sets.
///
/// ```no_run
/// use sentinel_flow_rules::source::{EtcdSource, RuleFormat, SentinelKeys, SourceWatcher};
///
/// let source = EtcdSource::open("http://127.0.0.1:2379")?;
/// let handle = SourceWatcher::new(source, RuleFormat::sentinel_json(SentinelKeys::for_app("orders")))
///     .last_known_good("/var/lib/orders/rules.lkg.json")
///     .start(sentinel_flow_core::global())?;
/// println!("{:?}", handle.state());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct EtcdSource {
    /// `host:port`.
    authority: String,
    name: String,
    timeout: Duration,
    /// Ranges, kept alive between reads.
    commands: Option<Connection>,
    watch: Option<Watch>,
    /// The keys watched.
    keys: Vec<String>,
    /// The revision of the last read: the watch resumes after it.
    revision: Option<i64>,
    /// Word of a change taken while connecting, told by the next wait.
    pending: bool,
    /// Each key's `mod_revision` and value as last read, for the writer.
    seen: Arc<Mutex<HashMap<String, Seen>>>,
}

/// A key as last read: its `mod_revision` (0: absent) and a hash of its
/// value, to know whether a write's expected value is the one read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Seen {
    mod_revision: i64,
    value: Option<(u64, usize)>,
}

fn fingerprint(value: &[u8]) -> (u64, usize) {
    let mut hash = Fnv::default();
    hash.eat(value);
    (hash.0, value.len())
}

impl EtcdSource {
    /// A source on the etcd whose client URL is `url`
    /// (`http://host:port`, port 2379 when left out); nothing is
    /// connected until the watcher starts. TLS is not supported.
    pub fn open(url: &str) -> Result<Self, SourceError> {
        let bad = |why: &str| SourceError::new(format!("bad etcd URL {url}: {why}"));
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("it must start with http:// (TLS is not supported)"))?;
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        if !path.is_empty() {
            return Err(bad("it must have no path"));
        }
        if authority.is_empty() || authority.contains('@') {
            return Err(bad("it must name a host (and no user)"));
        }
        let port = if let Some(v6) = authority.strip_prefix('[') {
            let (_, after) = v6
                .split_once(']')
                .ok_or_else(|| bad("an unclosed [ in its host"))?;
            after.strip_prefix(':')
        } else {
            authority.split_once(':').map(|(_, port)| port)
        };
        let authority = match port {
            Some(port) if port.parse::<u16>().is_err() => {
                return Err(bad("its port is not a number"));
            }
            Some(_) => authority.to_owned(),
            None => format!("{authority}:2379"),
        };
        Ok(EtcdSource {
            name: format!("etcd://{authority}"),
            authority,
            timeout: DEFAULT_ETCD_TIMEOUT,
            commands: None,
            watch: None,
            keys: Vec::new(),
            revision: None,
            pending: false,
            seen: Arc::new(Mutex::new(HashMap::new())),
        })
    }

    /// How long connecting, and each read or write on a connection, may
    /// wait before the store is taken for lost (default 2 s, at least
    /// 1 ms).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout.max(Duration::from_millis(1));
        self
    }

    fn lost(&mut self, error: &io::Error) -> SourceError {
        self.commands = None;
        self.watch = None;
        SourceError::new(format!("etcd: {error}"))
    }

    /// Opens the watch from `start` and waits until every key's watch is
    /// created.
    fn open_watch(&mut self, start: Option<i64>) -> Result<(), SourceError> {
        self.watch = None;
        let mut watch = Watch::open(&self.authority, self.timeout, &self.keys, start)
            .map_err(|e| self.lost(&e))?;
        let mut created = 0;
        while created < self.keys.len() {
            match watch.next(self.timeout).map_err(|e| self.lost(&e))? {
                None => {
                    return Err(SourceError::new(format!(
                        "etcd: the watch was not created within {:?}",
                        self.timeout
                    )));
                }
                Some(Message::Created) => created += 1,
                Some(Message::Changed) => self.pending = true,
                Some(Message::Compacted) => return self.compacted(),
                Some(Message::Ended(why)) => return Err(SourceError::new(format!("etcd: {why}"))),
                Some(Message::Other) => {}
            }
        }
        self.watch = Some(watch);
        Ok(())
    }

    /// The revision after the last read is compacted away: the keys are
    /// read again whole, and watched from now.
    fn compacted(&mut self) -> Result<(), SourceError> {
        tracing::info!(source = %self.name, "sentinel-flow-rules: the etcd revision to watch from is compacted; reading the keys again");
        self.revision = None;
        self.pending = true;
        self.open_watch(None)
    }

    /// `POST path` on the kept-alive connection (a new one when it was
    /// closed meanwhile), and the answer's body kept up to `cap`.
    fn post(&mut self, path: &str, body: &[u8], cap: usize) -> io::Result<Answer> {
        let reused = self.commands.as_ref().is_some_and(Connection::reusable);
        let first = self.post_once(path, body, cap, reused);
        match first {
            Err(e) if reused && !matches!(e.kind(), io::ErrorKind::Other) => {
                self.post_once(path, body, cap, false)
            }
            other => other,
        }
    }

    fn post_once(
        &mut self,
        path: &str,
        body: &[u8],
        cap: usize,
        reuse: bool,
    ) -> io::Result<Answer> {
        if !reuse {
            self.commands = Some(Connection::open(&self.authority, self.timeout)?);
        }
        let Some(connection) = self.commands.as_mut() else {
            return Err(io::ErrorKind::NotConnected.into());
        };
        connection.set_read_timeout(self.timeout)?;
        let answer = answer(connection, &self.authority, path, body, cap);
        if answer.is_err() || !connection.reusable() {
            self.commands = None;
        }
        answer
    }

    /// One key at `revision` (`None`: the latest).
    fn range(
        &mut self,
        key: &str,
        revision: Option<i64>,
        max_size: usize,
    ) -> Result<(i64, Seen, KeyValue), SourceError> {
        let mut request = json!({ "key": base64::encode(key.as_bytes()) });
        if let Some(revision) = revision {
            request["revision"] = json!(revision.to_string());
        }
        let cap = base64::encoded_len(max_size)
            .saturating_add(ENVELOPE)
            .saturating_add(2 * base64::encoded_len(key.len()));
        let answer = self
            .post("/v3/kv/range", request.to_string().as_bytes(), cap)
            .map_err(|e| self.lost(&e))?;
        let bad = |why: String| SourceError::new(format!("etcd: a range answer for {key} {why}"));
        match answer {
            Answer::Whole(body) => {
                let value: Value =
                    serde_json::from_slice(&body).map_err(|e| bad(format!("is not JSON: {e}")))?;
                let header = int(value.pointer("/header/revision"))
                    .ok_or_else(|| bad("has no header revision".into()))?;
                let Some(kv) = value.pointer("/kvs/0") else {
                    let seen = Seen {
                        mod_revision: 0,
                        value: None,
                    };
                    return Ok((header, seen, KeyValue::Missing));
                };
                let mod_revision = int(kv.get("mod_revision")).unwrap_or(0);
                let text = kv.get("value").and_then(Value::as_str).unwrap_or("");
                let bytes =
                    base64::decode(text).map_err(|e| bad(format!("holds bad base64: {e}")))?;
                let value = if bytes.len() > max_size {
                    KeyValue::TooLarge(bytes.len() as u64)
                } else {
                    KeyValue::Present(bytes)
                };
                let fingerprint = match &value {
                    KeyValue::Present(bytes) => Some(fingerprint(bytes)),
                    _ => None,
                };
                let seen = Seen {
                    mod_revision,
                    value: fingerprint,
                };
                Ok((header, seen, value))
            }
            Answer::Over { prefix, value_len } => {
                let text = String::from_utf8_lossy(&prefix);
                let header = scan_int(&text, "\"revision\":\"")
                    .ok_or_else(|| bad("has no header revision".into()))?;
                let mod_revision = scan_int(&text, "\"mod_revision\":\"").unwrap_or(0);
                let seen = Seen {
                    mod_revision,
                    value: None,
                };
                Ok((header, seen, KeyValue::TooLarge(value_len)))
            }
        }
    }
}

/// A range answer: whole, or over the cap (its first bytes and the
/// decoded length of the value it held).
enum Answer {
    Whole(Vec<u8>),
    Over { prefix: Vec<u8>, value_len: u64 },
}

/// Posts and reads the answer: whole within `cap`, else the rest read to
/// its end unkept, counting the base64 of the `"value"` field.
fn answer(
    connection: &mut Connection,
    authority: &str,
    path: &str,
    body: &[u8],
    cap: usize,
) -> io::Result<Answer> {
    let deadline = Instant::now() + ANSWER_DEADLINE;
    let mut answer = connection.post(authority, path, body)?;
    let (prefix, whole) = read_capped(connection, &mut answer, cap)?;
    if whole {
        return Ok(Answer::Whole(prefix));
    }
    const VALUE: &[u8] = b"\"value\":\"";
    let mut counting = prefix
        .windows(VALUE.len())
        .position(|w| w == VALUE)
        .map(|i| i + VALUE.len());
    let (mut chars, mut pad, mut total) = (0u64, 0u64, prefix.len() as u64);
    let mut count = |bytes: &[u8], counting: &mut Option<usize>| {
        if counting.is_none() {
            return;
        }
        for &b in bytes {
            if b == b'"' {
                *counting = None;
                return;
            }
            chars += 1;
            pad = if b == b'=' { pad + 1 } else { 0 };
        }
    };
    if let Some(start) = counting {
        count(&prefix[start..], &mut counting);
    }
    let mut buf = [0u8; 64 * 1024];
    loop {
        if Instant::now() > deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("an answer not read whole within {ANSWER_DEADLINE:?}"),
            ));
        }
        let n = connection.read_body(&mut answer, &mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        count(&buf[..n], &mut counting);
    }
    let value_len = if chars > 0 {
        base64::decoded_len(chars, pad)
    } else {
        total / 4 * 3
    };
    Ok(Answer::Over { prefix, value_len })
}

/// An int64 as the gateway writes it (a string) or as a number.
fn int(value: Option<&Value>) -> Option<i64> {
    let value = value?;
    value
        .as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| value.as_i64())
}

/// The digits after the first `pattern` in `text`.
fn scan_int(text: &str, pattern: &str) -> Option<i64> {
    let at = text.find(pattern)? + pattern.len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

impl std::fmt::Debug for EtcdSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdSource")
            .field("name", &self.name)
            .field("timeout", &self.timeout)
            .field("revision", &self.revision)
            .field("watching", &self.watch.is_some())
            .finish_non_exhaustive()
    }
}

impl RuleSource for EtcdSource {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn connect(&mut self, keys: &[String]) -> Result<(), SourceError> {
        self.commands = None;
        self.keys = keys.to_vec();
        // From the revision after the last read: what changed while the
        // watch was down is told at once.
        let start = self.revision.map(|r| r.saturating_add(1));
        self.open_watch(start)
    }

    fn read(&mut self, keys: &[String], max_size: usize) -> Result<Values, SourceError> {
        if self.watch.is_none() {
            return Err(SourceError::new("etcd: not connected"));
        }
        let mut at = None;
        let mut entries = Vec::with_capacity(keys.len());
        let mut seen = Vec::with_capacity(keys.len());
        let mut newest = 0;
        for key in keys {
            let (header, key_seen, value) = self.range(key, at, max_size)?;
            at.get_or_insert(header);
            newest = newest.max(key_seen.mod_revision);
            seen.push((key.clone(), key_seen));
            entries.push((key.clone(), value));
        }
        self.revision = at.or(self.revision);
        self.seen.lock().extend(seen);
        Ok(Values {
            revision: Some(newest.to_string()),
            entries,
        })
    }

    fn wait(&mut self, timeout: Duration) -> Result<bool, SourceError> {
        let deadline = Instant::now() + timeout;
        let mut changed = std::mem::take(&mut self.pending);
        loop {
            let Some(watch) = self.watch.as_mut() else {
                return Err(SourceError::new("etcd: not connected"));
            };
            // After word of a change, only what has come already: a
            // flood is one read.
            let left = deadline.saturating_duration_since(Instant::now());
            let wait = if changed {
                Duration::from_millis(1)
            } else {
                left
            };
            if left.is_zero() && !changed {
                return Ok(false);
            }
            match watch.next(wait) {
                Ok(None) => return Ok(changed),
                Ok(Some(Message::Changed)) => changed = true,
                Ok(Some(Message::Compacted)) => {
                    self.compacted()?;
                    return Ok(true);
                }
                Ok(Some(Message::Ended(why))) => {
                    self.commands = None;
                    self.watch = None;
                    return Err(SourceError::new(format!("etcd: {why}")));
                }
                Ok(Some(Message::Created | Message::Other)) => {}
                Err(e) => return Err(self.lost(&e)),
            }
            if changed && left.is_zero() {
                return Ok(true);
            }
        }
    }

    fn writer(&self) -> Option<Arc<dyn RuleWriter>> {
        Some(Arc::new(EtcdWriter {
            source: Mutex::new(EtcdSource {
                commands: None,
                watch: None,
                keys: Vec::new(),
                revision: None,
                pending: false,
                authority: self.authority.clone(),
                name: self.name.clone(),
                timeout: self.timeout,
                seen: self.seen.clone(),
            }),
        }))
    }
}

/// Writes with a transaction on the key's `mod_revision`, on a connection
/// of its own.
struct EtcdWriter {
    /// The writer's own connection and the keys' revisions as read.
    source: Mutex<EtcdSource>,
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
