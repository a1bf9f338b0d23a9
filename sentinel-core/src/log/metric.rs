//! The metric log writer: once per second, one line per resource that had
//! traffic in the second just completed.
//!
//! What is written is decided by the instance clock alone: the writer keeps
//! the start of the first second not written yet and, on each poll, writes
//! every completed second of the minute window from there on, in order, so
//! that a late writer catches up (as long as it is less than a minute late)
//! and no second is written twice. The background thread only decides when
//! to poll.

use std::borrow::Borrow;
use std::fmt::{self, Write as _};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use super::blocks::BlockLedger;
use super::blocks::BlockLog;
use super::files::{self, RollingFiles};
use super::line::MetricLine;
use crate::Sentinel;

/// The default directory of log files.
pub const DEFAULT_LOG_DIR: &str = "./logs/sentinel/";
/// The default size past which a metric log file is rolled: 50 MiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 50 * 1024 * 1024;
/// The default number of metric log files kept per app.
pub const DEFAULT_MAX_FILES: usize = 6;

/// Where and how the metric log is written.
///
/// ```
/// use sentinel_flow_core::log::MetricLogConfig;
///
/// let config = MetricLogConfig::new("orders")
///     .dir("/var/log/sentinel")
///     .max_file_size(10 * 1024 * 1024)
///     .max_files(3);
/// assert_eq!(config.app(), "orders");
/// ```
#[derive(Clone, Debug)]
pub struct MetricLogConfig {
    dir: PathBuf,
    app: String,
    max_file_size: u64,
    max_files: usize,
    poll_interval: Duration,
    block_file: bool,
    block_events: Option<tracing::Level>,
}

impl MetricLogConfig {
    /// Files of app `app` (`${app}-metrics.log.${yyyy-MM-dd}[.n]`) in
    /// [`DEFAULT_LOG_DIR`](super::DEFAULT_LOG_DIR), rolled past 50 MiB,
    /// 6 kept.
    pub fn new(app: impl Into<String>) -> Self {
        MetricLogConfig {
            dir: PathBuf::from(DEFAULT_LOG_DIR),
            app: app.into(),
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            max_files: DEFAULT_MAX_FILES,
            poll_interval: Duration::from_millis(200),
            block_file: true,
            block_events: Some(tracing::Level::INFO),
        }
    }

    /// The directory of the files (made when missing).
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = dir.into();
        self
    }

    /// The size in bytes past which a new file is started (at least 1). A
    /// second's lines are never split, so a file may pass it by one second's
    /// lines when it was empty.
    pub fn max_file_size(mut self, bytes: u64) -> Self {
        self.max_file_size = bytes.max(1);
        self
    }

    /// How many files of the app are kept (at least 1); the oldest are
    /// deleted.
    pub fn max_files(mut self, count: usize) -> Self {
        self.max_files = count.max(1);
        self
    }

    /// How long the background thread waits between polls of the clock
    /// (default 200 ms).
    pub fn poll_interval(mut self, interval: Duration) -> Self {
        self.poll_interval = interval;
        self
    }

    /// Whether the block log file (`${app}-block.log.${yyyy-MM-dd}[.n]`,
    /// beside the metric log, rolled the same way) is written (default
    /// yes). See [`BlockLine`](super::BlockLine) for its lines.
    pub fn block_log(mut self, write: bool) -> Self {
        self.block_file = write;
        self
    }

    /// The level of the `tracing` event sent once per second per resource,
    /// kind, rule and origin that blocked in that second, or `None` for no
    /// event (default `INFO`).
    pub fn block_events(mut self, level: Option<tracing::Level>) -> Self {
        self.block_events = level;
        self
    }

    /// The app name in file names.
    pub fn app(&self) -> &str {
        &self.app
    }

    /// The directory of the files.
    pub fn directory(&self) -> &Path {
        &self.dir
    }
}

impl Default for MetricLogConfig {
    /// App `sentinel`.
    fn default() -> Self {
        MetricLogConfig::new("sentinel")
    }
}

/// Writes the metric log of an instance; made by
/// [`Sentinel::metric_writer`], run in the background by
/// [`start`](Self::start) or polled by hand with
/// [`write_pending`](Self::write_pending) (tests drive it with a
/// [`ManualClock`](crate::ManualClock)).
///
/// Run one writer per instance and directory.
pub struct MetricWriter {
    config: MetricLogConfig,
    /// Every second starting before this was written, or was before the
    /// writer was made.
    next_ms: u64,
    files: RollingFiles,
    /// The blocks of each second, once complete.
    blocks: BlockLog,
    /// The last error logged, so that a lasting one is logged once.
    last_error: Option<String>,
    /// After an error, no write is tried before this time.
    retry_at_ms: u64,
}

impl MetricWriter {
    /// A writer for an instance whose clock reads `now`, writing the
    /// seconds from the current one on; its block log takes the blocks of
    /// instance `uid` from `ledger`.
    pub(crate) fn new(config: MetricLogConfig, ledger: &BlockLedger, uid: u64, now: u64) -> Self {
        let files = RollingFiles::new(
            config.dir.clone(),
            config.app.clone(),
            files::METRICS,
            config.max_file_size,
            config.max_files,
        );
        let block_files = config.block_file.then(|| {
            RollingFiles::new(
                config.dir.clone(),
                config.app.clone(),
                files::BLOCK,
                config.max_file_size,
                config.max_files,
            )
        });
        let blocks = BlockLog::new(ledger, uid, now, block_files, config.block_events);
        MetricWriter {
            config,
            next_ms: now - now % 1_000,
            files,
            blocks,
            last_error: None,
            retry_at_ms: 0,
        }
    }
}

impl MetricWriter {
    /// Writes every completed second not written yet that is still in the
    /// minute window, oldest first, one line per resource with traffic in
    /// that second; returns how many lines were written. On an error the
    /// seconds not written are tried again by the next call.
    pub fn write_pending(&mut self, sentinel: &Sentinel) -> io::Result<usize> {
        // One reading of the clock for every resource: a second is either
        // complete for all of them or for none.
        let now = sentinel.now_ms();
        let mut lines = Vec::new();
        for node in sentinel.resource_nodes() {
            let concurrency = node.stats().cur_concurrency();
            node.stats().for_each_metric_since(self.next_ms, now, |m| {
                lines.push(MetricLine {
                    timestamp_ms: m.timestamp_ms,
                    resource: node.name().to_owned(),
                    pass: m.pass,
                    block: m.block,
                    success: m.success,
                    exception: m.exception,
                    avg_rt: m.avg_rt(),
                    occupied_pass: m.occupied_pass,
                    concurrency,
                    classification: 0,
                })
            });
        }
        // Stable: within a second, resources keep their order.
        lines.sort_by_key(|line| line.timestamp_ms);
        let mut written = 0;
        let mut text = String::new();
        for second in lines.chunk_by(|a, b| a.timestamp_ms == b.timestamp_ms) {
            text.clear();
            for line in second {
                let _ = writeln!(text, "{line}");
            }
            let timestamp_ms = second[0].timestamp_ms;
            self.files.append(timestamp_ms, text.as_bytes())?;
            self.next_ms = timestamp_ms + 1;
            written += second.len();
        }
        Ok(written)
    }

    /// Writes the blocks of every second complete and not written yet (see
    /// [`BlockLine`](super::BlockLine)), and sends their `tracing` events;
    /// returns how many new lines there were. On an error the lines not
    /// written are kept and tried again first by the next call (their
    /// events are sent once).
    pub fn write_blocks(&mut self, sentinel: &Sentinel) -> io::Result<usize> {
        self.blocks.write(
            &sentinel.engine.parts.ledger,
            sentinel.uid(),
            sentinel.now_ms(),
            false,
        )
    }

    /// What the background thread does when stopped: a last
    /// [`tick`](Self::tick), then the blocks of the seconds still within
    /// their grace (the second under way included), which would otherwise
    /// be lost.
    pub fn finish(&mut self, sentinel: &Sentinel) {
        self.tick(sentinel);
        if let Err(error) = self.blocks.write(
            &sentinel.engine.parts.ledger,
            sentinel.uid(),
            sentinel.now_ms(),
            true,
        ) {
            tracing::warn!(
                dir = %self.config.dir.display(),
                %error,
                "sentinel: cannot write the last block log lines"
            );
        }
    }

    /// One poll, as the background thread does it: writes what is pending
    /// (metric and block lines), logs an error with `tracing` once (until it changes or writing works
    /// again) and waits a second before trying again.
    pub fn tick(&mut self, sentinel: &Sentinel) {
        let now = sentinel.now_ms();
        if now < self.retry_at_ms {
            return;
        }
        // Blocks are taken even when the metric log cannot be written:
        // their events need no disk.
        let metrics = self.write_pending(sentinel);
        let blocks = self.write_blocks(sentinel);
        let written = metrics.and(blocks);
        match written {
            Ok(_) => {
                if self.last_error.take().is_some() {
                    tracing::info!(dir = %self.config.dir.display(), "sentinel: metric log written again");
                }
            }
            Err(error) => {
                self.retry_at_ms = now.saturating_add(1_000);
                let message = error.to_string();
                if self.last_error.as_deref() != Some(&message) {
                    tracing::warn!(
                        dir = %self.config.dir.display(),
                        %error,
                        "sentinel: cannot write the metric log; retrying every second"
                    );
                    self.last_error = Some(message);
                }
            }
        }
    }

    /// The last error met, while writing still fails.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// Runs the writer on a thread of its own, polling `sentinel` (an
    /// `Arc<Sentinel>` or a `&'static Sentinel`) every
    /// [`poll_interval`](MetricLogConfig::poll_interval), until the handle
    /// is dropped.
    pub fn start<S>(mut self, sentinel: S) -> io::Result<MetricWriterHandle>
    where
        S: Borrow<Sentinel> + Send + 'static,
    {
        let (stop, stopped) = mpsc::channel::<()>();
        let poll = self.config.poll_interval;
        let thread = std::thread::Builder::new()
            .name("sentinel-metric-log".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(poll) {
                    self.tick(sentinel.borrow());
                }
                self.finish(sentinel.borrow());
            })?;
        Ok(MetricWriterHandle {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl fmt::Debug for MetricWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MetricWriter")
            .field("config", &self.config)
            .field("next_ms", &self.next_ms)
            .field("last_error", &self.last_error)
            .finish_non_exhaustive()
    }
}

/// A metric writer running in the background; dropping it stops the thread
/// (after a last poll) and waits for it.
#[derive(Debug)]
pub struct MetricWriterHandle {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for MetricWriterHandle {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
