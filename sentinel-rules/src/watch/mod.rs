//! `RuleWatcher`: load a rule file, then follow it by polling.

mod fingerprint;
mod poller;
#[cfg(test)]
mod tests;

use std::fmt;
use std::ops::Deref;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use sentinel_flow_core::Sentinel;

use crate::error::FileError;
use crate::load::Reloaded;
use crate::options::LoadOptions;
use crate::source::SourceState;
use crate::store::RuleFileStore;
use poller::Poller;

/// How often the watched file is checked by default.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

/// The shortest interval a watcher accepts: each poll stats the file and
/// may read it whole (up to the size limit), so a shorter one would keep a
/// core busy for no gain.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);

/// Loads a rule file into a [`Sentinel`] and reloads it when it changes.
///
/// Every `interval` the watcher stats the path (following symlinks) and
/// reads the file again when its modification time, length, inode, device
/// or change time moved, or when it was modified in the last few seconds
/// (then its content decides). That catches an editor rewriting the
/// file in place, a write to a temporary file renamed over it, and a
/// symlink swapped by a config system (Kubernetes ConfigMap volumes swap
/// a `..data` directory link).
///
/// New content that arrived by a rename (or a swapped symlink: another
/// inode at the path) is taken at once. Content written into the file in
/// place is taken when two polls in a row, one interval apart, read the
/// same bytes: one read may catch a writer between its truncation and its
/// last write, and a partial file may well parse (a count cut short, a
/// list cut after a rule). A writer that stops for longer than an interval
/// halfway is read as done; write a temporary file and rename it over the
/// rule file to be safe from that.
///
/// A bad file is reported to [`on_failure`](Self::on_failure) and the
/// rules in force stay. A deleted file is reported once per deletion, the
/// rules in force stay, and the file is loaded again when it comes back.
/// Only a regular file is read: a named pipe, a device or a directory at
/// the path is reported without being read (nothing blocks on it), and at
/// most the size limit of [`LoadOptions`] is read. A panic while a file is
/// loaded (in a rule listener, say) is caught and reported like a bad
/// file; the watcher goes on with the next change.
///
/// ```no_run
/// use std::time::Duration;
///
/// let sentinel: &'static sentinel_flow_core::Sentinel = sentinel_flow_core::global();
/// let _watch = sentinel_flow_rules::RuleWatcher::new("/etc/myapp/rules.yaml")
///     .interval(Duration::from_millis(500))
///     .on_success(|loaded| println!("rules v{:?}: {:?}", loaded.version, loaded.counts))
///     .on_failure(|error| eprintln!("{error}"))
///     .start(sentinel)?;
/// // ... serve; the watcher stops when `_watch` is dropped.
/// # Ok::<(), sentinel_flow_rules::FileError>(())
/// ```
pub struct RuleWatcher {
    poller: Poller,
    interval: Duration,
}

impl RuleWatcher {
    /// A watcher of the file at `path`, checked every [`DEFAULT_INTERVAL`],
    /// read with the default [`LoadOptions`].
    pub fn new(path: impl Into<PathBuf>) -> Self {
        RuleWatcher {
            poller: Poller::new(path.into(), LoadOptions::default()),
            interval: DEFAULT_INTERVAL,
        }
    }

    /// How often the file is checked: at least [`MIN_INTERVAL`] (10 ms),
    /// or [`start`](Self::start) refuses it.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The limits the file is read under.
    pub fn options(mut self, options: LoadOptions) -> Self {
        self.poller.options = options;
        self
    }

    /// Called after each load put in force, the first one included, with
    /// the file's version and rule counts. Runs on the watcher's thread; a
    /// panic in it is caught and logged.
    pub fn on_success(mut self, listener: impl Fn(&Reloaded) + Send + Sync + 'static) -> Self {
        self.poller.on_success.push(Arc::new(listener));
        self
    }

    /// Called when a changed file is refused (every problem in it), cannot
    /// be read, is not a regular file, is deleted, or panics while it is
    /// loaded; the rules in force are kept. Each failure is told once
    /// while it lasts. Not called for the first load, whose error
    /// [`start`](Self::start) returns.
    pub fn on_failure(mut self, listener: impl Fn(&FileError) + Send + Sync + 'static) -> Self {
        self.poller.on_failure.push(Arc::new(listener));
        self
    }

    /// Loads the file into `sentinel` (a `&'static Sentinel`, an
    /// `Arc<Sentinel>`...), then watches it on a thread of its own until
    /// the returned handle is dropped. A file that cannot be loaded now, or
    /// an interval under [`MIN_INTERVAL`], is an error, and nothing is
    /// watched.
    pub fn start<S>(self, sentinel: S) -> Result<WatchHandle, FileError>
    where
        S: Deref<Target = Sentinel> + Send + 'static,
    {
        let RuleWatcher {
            mut poller,
            interval,
        } = self;
        if interval < MIN_INTERVAL {
            return Err(FileError::one(
                &poller.name,
                None,
                format!("the watch interval must be at least {MIN_INTERVAL:?}, got {interval:?}"),
            ));
        }
        poller.first(&sentinel)?;
        let name = poller.name.clone();
        let store = RuleFileStore::shared(
            poller.path.clone(),
            poller.options.clone(),
            poller.known.clone(),
        );
        let state = poller.state.clone();
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("sentinel-rules-watch".into())
            .spawn(move || {
                // A message or a dropped sender (the handle) stops it.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                    poller.poll(&sentinel);
                }
            })
            .map_err(|e| FileError::one(&name, None, format!("cannot start the watcher: {e}")))?;
        Ok(WatchHandle {
            file: name,
            state,
            store,
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl fmt::Debug for RuleWatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleWatcher")
            .field("path", &self.poller.path)
            .field("interval", &self.interval)
            .field("options", &self.poller.options)
            .field("on_success", &self.poller.on_success.len())
            .field("on_failure", &self.poller.on_failure.len())
            .finish()
    }
}

/// A running watcher: dropping it (or [`stop`](Self::stop)) stops the
/// thread and waits for it. The rules it loaded stay in force.
#[derive(Debug)]
pub struct WatchHandle {
    file: String,
    state: Arc<parking_lot::Mutex<SourceState>>,
    store: RuleFileStore,
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl WatchHandle {
    /// The watched file, as named in errors.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The file's state, as a rule source's (see
    /// [`SourceState`]): connected while the file can be read, the
    /// revision in force (`h:` and a hash of the content), when it was
    /// applied, the last error, counts of loads, refusals and losses (a
    /// deletion, an unreadable file).
    pub fn state(&self) -> SourceState {
        self.state.lock().clone()
    }

    /// A store of the watched file that shares the watcher's view of it:
    /// a rule change written through it is not taken by the watcher for
    /// an outside edit (its next poll finds the content it knows and does
    /// nothing: no reload, no listener called), and an outside edit after
    /// it is loaded as usual. It outlives the handle.
    pub fn store(&self) -> RuleFileStore {
        self.store.clone()
    }

    /// Stops the watcher and waits for its thread.
    pub fn stop(self) {}
}

impl Drop for WatchHandle {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take()
            // A listener that drops the handle runs on the watcher's thread.
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
    }
}
