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
mod range;
mod watch;
mod writer;

use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::{Fnv, RuleSource, RuleWriter, SourceError, Values};
use http::Connection;
use watch::{Message, Watch};
use writer::EtcdWriter;

/// The default for [`EtcdSource::timeout`].
pub const DEFAULT_ETCD_TIMEOUT: Duration = Duration::from_secs(2);

/// The default for [`EtcdSource::watch_refresh`].
pub const DEFAULT_WATCH_REFRESH: Duration = Duration::from_secs(30);

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
/// - a watch silent for [`watch_refresh`](Self::watch_refresh) (30 s)
///   is made anew, so a connection that died without a word is found;
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
    /// When the watch last said anything.
    heard: Instant,
    /// How long the watch may stay silent before it is made anew.
    refresh: Duration,
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
            heard: Instant::now(),
            refresh: DEFAULT_WATCH_REFRESH,
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

    /// How long the watch may stay silent before it is made anew from the
    /// revision after the last read (default 30 s, at least 1 ms): a
    /// connection that died without a word (a host gone, a network
    /// partition) is found within this and the timeout, and nothing that
    /// changed meanwhile is missed.
    pub fn watch_refresh(mut self, refresh: Duration) -> Self {
        self.refresh = refresh.max(Duration::from_millis(1));
        self
    }

    pub(super) fn lost(&mut self, error: &io::Error) -> SourceError {
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
        self.heard = Instant::now();
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
        if self.watch.is_some() && self.heard.elapsed() >= self.refresh {
            self.open_watch(self.revision.map(|r| r.saturating_add(1)))?;
        }
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
            let next = watch.next(wait);
            if let Ok(Some(_)) = next {
                self.heard = Instant::now();
            }
            match next {
                Ok(None) => return Ok(changed),
                Ok(Some(Message::Changed)) => changed = true,
                Ok(Some(Message::Compacted)) => {
                    self.compacted()?;
                    self.pending = false;
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
                heard: Instant::now(),
                refresh: self.refresh,
                authority: self.authority.clone(),
                name: self.name.clone(),
                timeout: self.timeout,
                seen: self.seen.clone(),
            }),
        }))
    }
}
