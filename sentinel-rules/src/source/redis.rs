//! `RedisSource`: rules kept in Redis string keys, followed through
//! pub/sub.
//!
//! A change is told on a channel per key (by default the key's own name,
//! as Sentinel's `RedisDataSource` is usually set up); the message is only
//! word of a change: the key is read again, so a message lost while
//! disconnected costs nothing (every reconnection reads the keys too). A
//! write is `WATCH key`, `GET key` compared with what the instance last
//! read, then `MULTI`, `SET key value`, `PUBLISH channel value`, `EXEC`:
//! a writer that came in between makes `EXEC` fail, told as a conflict.
//! The published message is the value itself, so Java instances running
//! Sentinel's `RedisDataSource` on the same key and channel take it too.
//!
//! The subscription blocks on a connection of its own, on a thread of its
//! own; dropping the source (or reconnecting) tells that thread to end,
//! which it does within `SUBSCRIBER_TICK` (250 ms), not joined.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::Duration;

use parking_lot::Mutex;
use redis::{Client, Connection, Value};

use super::{KeyValue, RuleSource, RuleWriter, SourceError, Values, WriteFailure};

/// How long a command to Redis may take before the connection is taken
/// for lost.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);

/// Rules in Redis: string keys read with `GET`, changes told on pub/sub
/// channels (see the module's documentation).
///
/// ```no_run
/// use sentinel_flow_rules::source::{RedisSource, RuleFormat, SentinelKeys, SourceWatcher};
///
/// let source = RedisSource::open("redis://127.0.0.1:6379/")?;
/// let handle = SourceWatcher::new(source, RuleFormat::sentinel_json(SentinelKeys::for_app("orders")))
///     .last_known_good("/var/lib/orders/rules.lkg.json")
///     .start(sentinel_flow_core::global())?;
/// println!("{:?}", handle.state());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RedisSource {
    client: Client,
    name: String,
    /// The channel of a key, from its name.
    channel: Arc<dyn Fn(&str) -> String + Send + Sync>,
    /// Commands (`STRLEN`, `GET`).
    commands: Option<Connection>,
    /// Subscribed to the keys' channels.
    subscriber: Option<Subscription>,
}

impl RedisSource {
    /// A source on the Redis at `url` (`redis://host:port/db`); nothing is
    /// connected until the watcher starts.
    pub fn open(url: &str) -> Result<Self, SourceError> {
        let client =
            Client::open(url).map_err(|e| SourceError::new(format!("bad Redis URL {url}: {e}")))?;
        let info = client.get_connection_info();
        let name = format!("redis://{}/{}", info.addr, info.redis.db);
        Ok(RedisSource {
            client,
            name,
            channel: Arc::new(str::to_owned),
            commands: None,
            subscriber: None,
        })
    }

    /// The channel a change of a key is told on, from the key's name
    /// (default: the key's own name).
    pub fn channel(mut self, channel: impl Fn(&str) -> String + Send + Sync + 'static) -> Self {
        self.channel = Arc::new(channel);
        self
    }

    fn connection(&self) -> Result<Connection, SourceError> {
        let connection = self
            .client
            .get_connection_with_timeout(COMMAND_TIMEOUT)
            .map_err(|e| lost(&e))?;
        connection
            .set_read_timeout(Some(COMMAND_TIMEOUT))
            .and_then(|()| connection.set_write_timeout(Some(COMMAND_TIMEOUT)))
            .map_err(|e| lost(&e))?;
        Ok(connection)
    }
}

impl std::fmt::Debug for RedisSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisSource")
            .field("name", &self.name)
            .field("connected", &self.commands.is_some())
            .finish_non_exhaustive()
    }
}

fn lost(error: &redis::RedisError) -> SourceError {
    SourceError::new(format!("redis: {error}"))
}

impl RuleSource for RedisSource {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn connect(&mut self, keys: &[String]) -> Result<(), SourceError> {
        self.commands = None;
        self.subscriber = None;
        // Subscribed before the keys are read: no change falls between.
        let channels = keys.iter().map(|key| (self.channel)(key)).collect();
        let subscriber = Subscription::start(self.connection()?, channels)?;
        self.commands = Some(self.connection()?);
        self.subscriber = Some(subscriber);
        Ok(())
    }

    fn read(&mut self, keys: &[String], max_size: usize) -> Result<Values, SourceError> {
        let Some(connection) = self.commands.as_mut() else {
            return Err(SourceError::new("redis: not connected"));
        };
        let result = read_keys(connection, keys, max_size);
        if result.is_err() {
            self.commands = None;
            self.subscriber = None;
        }
        result
    }

    fn wait(&mut self, timeout: Duration) -> Result<bool, SourceError> {
        let Some(subscription) = self.subscriber.as_ref() else {
            return Err(SourceError::new("redis: not connected"));
        };
        let result = match subscription.notices.recv_timeout(timeout) {
            Ok(Notice::Change) => Ok(true),
            Ok(Notice::Lost(why)) => Err(SourceError::new(why)),
            Err(RecvTimeoutError::Timeout) => Ok(false),
            Err(RecvTimeoutError::Disconnected) => {
                Err(SourceError::new("redis: the subscriber stopped"))
            }
        };
        if result.is_err() {
            self.commands = None;
            self.subscriber = None;
        }
        result
    }

    fn writer(&self) -> Option<Arc<dyn RuleWriter>> {
        Some(Arc::new(RedisWriter {
            client: self.client.clone(),
            channel: self.channel.clone(),
            connection: Mutex::new(None),
        }))
    }
}

/// Every key's length first (one round trip), then the values of those
/// within the limit (another): a value over the limit is never fetched.
fn read_keys(
    connection: &mut Connection,
    keys: &[String],
    max_size: usize,
) -> Result<Values, SourceError> {
    let mut lengths = redis::pipe();
    for key in keys {
        lengths.cmd("STRLEN").arg(key);
    }
    let lengths: Vec<Value> = lengths.query(connection).map_err(|e| lost(&e))?;
    let mut values = redis::pipe();
    let mut wanted = Vec::new();
    let mut entries = Vec::with_capacity(keys.len());
    for (key, length) in keys.iter().zip(&lengths) {
        let value = match length {
            Value::Int(0) => KeyValue::Missing,
            Value::Int(n) if usize::try_from(*n).is_ok_and(|n| n <= max_size) => {
                values.cmd("GET").arg(key);
                wanted.push(entries.len());
                KeyValue::Missing
            }
            Value::Int(n) => KeyValue::TooLarge(u64::try_from(*n).unwrap_or(0)),
            Value::ServerError(e) => KeyValue::Unreadable(format!("{e:?}")),
            other => KeyValue::Unreadable(format!("unexpected reply {other:?}")),
        };
        entries.push((key.clone(), value));
    }
    if !wanted.is_empty() {
        let got: Vec<Option<Vec<u8>>> = values.query(connection).map_err(|e| lost(&e))?;
        for (index, value) in wanted.into_iter().zip(got) {
            entries[index].1 = match value {
                // Grown past the limit between the two round trips.
                Some(bytes) if bytes.len() > max_size => KeyValue::TooLarge(bytes.len() as u64),
                Some(bytes) => KeyValue::Present(bytes),
                None => KeyValue::Missing,
            };
        }
    }
    Ok(Values {
        revision: None,
        entries,
    })
}

/// Word from the subscriber thread.
enum Notice {
    /// A message came on a channel.
    Change,
    /// The subscription's connection failed.
    Lost(String),
}

/// A thread subscribed to the keys' channels on a connection of its own,
/// blocking on it (a read timeout on a plain connection would make the
/// client skip the next reply). Its word goes through a channel of one
/// slot: word that comes while one is waiting is one with it.
struct Subscription {
    notices: Receiver<Notice>,
    stop: Arc<AtomicBool>,
}

/// How often the subscriber thread looks at its stop flag.
const SUBSCRIBER_TICK: Duration = Duration::from_millis(250);

impl Subscription {
    fn start(connection: Connection, channels: Vec<String>) -> Result<Self, SourceError> {
        let (ready, subscribed) = mpsc::channel::<Result<(), String>>();
        let (notify, notices) = mpsc::sync_channel::<Notice>(1);
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::Builder::new()
            .name("sentinel-rules-redis".into())
            .spawn(move || subscribe(connection, &channels, &ready, &notify, &stopped))
            .map_err(|e| SourceError::new(format!("cannot start the subscriber: {e}")))?;
        match subscribed.recv_timeout(COMMAND_TIMEOUT) {
            Ok(Ok(())) => Ok(Subscription { notices, stop }),
            Ok(Err(why)) => {
                stop.store(true, Ordering::Relaxed);
                Err(SourceError::new(why))
            }
            Err(_) => {
                stop.store(true, Ordering::Relaxed);
                Err(SourceError::new("redis: SUBSCRIBE was not answered"))
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The subscriber thread: subscribes, says so, then tells each message
/// until the connection fails or it is stopped.
fn subscribe(
    mut connection: Connection,
    channels: &[String],
    ready: &mpsc::Sender<Result<(), String>>,
    notify: &SyncSender<Notice>,
    stop: &AtomicBool,
) {
    let mut pubsub = connection.as_pubsub();
    let subscribed = pubsub
        .subscribe(channels)
        .and_then(|()| pubsub.set_read_timeout(Some(SUBSCRIBER_TICK)));
    if let Err(e) = subscribed {
        let _ = ready.send(Err(format!("redis: {e}")));
        return;
    }
    if ready.send(Ok(())).is_err() {
        return;
    }
    while !stop.load(Ordering::Relaxed) {
        match pubsub.get_message() {
            Ok(_) => match notify.try_send(Notice::Change) {
                Ok(()) | Err(TrySendError::Full(_)) => {}
                Err(TrySendError::Disconnected(_)) => return,
            },
            Err(e) if e.is_timeout() => {}
            Err(e) => {
                let _ = notify.send(Notice::Lost(format!("redis: {e}")));
                return;
            }
        }
    }
}

/// Writes with `WATCH`/`MULTI`/`EXEC` on a connection of its own.
struct RedisWriter {
    client: Client,
    channel: Arc<dyn Fn(&str) -> String + Send + Sync>,
    connection: Mutex<Option<Connection>>,
}

impl RuleWriter for RedisWriter {
    fn compare_and_set(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        value: &[u8],
    ) -> Result<(), WriteFailure> {
        let unavailable = |e: redis::RedisError| WriteFailure::Unavailable(format!("redis: {e}"));
        let mut slot = self.connection.lock();
        if slot.is_none() {
            let connection = self
                .client
                .get_connection_with_timeout(COMMAND_TIMEOUT)
                .map_err(unavailable)?;
            connection
                .set_read_timeout(Some(COMMAND_TIMEOUT))
                .map_err(unavailable)?;
            *slot = Some(connection);
        }
        let Some(connection) = slot.as_mut() else {
            return Err(WriteFailure::Unavailable("redis: not connected".into()));
        };
        let result = (|| {
            redis::cmd("WATCH").arg(key).exec(connection)?;
            let current: Option<Vec<u8>> = redis::cmd("GET").arg(key).query(connection)?;
            if current.as_deref() != expected {
                redis::cmd("UNWATCH").exec(connection)?;
                return Ok(Some("the key holds another value"));
            }
            let done: Option<(i64,)> = redis::pipe()
                .atomic()
                .cmd("SET")
                .arg(key)
                .arg(value)
                .ignore()
                .cmd("PUBLISH")
                .arg((self.channel)(key))
                .arg(value)
                .query(connection)?;
            Ok(done
                .is_none()
                .then_some("another writer changed the key meanwhile"))
        })();
        match result {
            Ok(None) => Ok(()),
            Ok(Some(reason)) => Err(WriteFailure::Conflict(reason.to_owned())),
            Err(e) => {
                *slot = None;
                Err(unavailable(e))
            }
        }
    }
}
