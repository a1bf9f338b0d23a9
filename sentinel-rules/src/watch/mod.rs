//! `RuleWatcher`: load a rule file, then follow it by polling; a front
//! over a [`SourceWatcher`] of the file's [`FileSource`], the one loop
//! every rule source runs.

#[cfg(test)]
mod tests;

use std::fmt;
use std::ops::Deref;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use sentinel_flow_core::Sentinel;

use crate::error::FileError;
use crate::load::Reloaded;
use crate::options::LoadOptions;
use crate::source::{
    DEFAULT_MAX_BACKOFF, FileSource, Known, RuleFormat, SourceHandle, SourceState, SourceWatcher,
};
use crate::store::RuleFileStore;

type SuccessListener = Arc<dyn Fn(&Reloaded) + Send + Sync>;
type FailureListener = Arc<dyn Fn(&FileError) + Send + Sync>;

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
/// While the file is gone or cannot be read it is checked again after a
/// wait that doubles from the interval up to [`DEFAULT_MAX_BACKOFF`] (5 s;
/// the interval when that is longer).
/// Only a regular file is read: a named pipe, a device or a directory at
/// the path is reported without being read (nothing blocks on it), and at
/// most the size limit of [`LoadOptions`] is read. A panic while a file is
/// loaded (in a rule listener, say) is caught and reported like a bad
/// file; the watcher goes on with the next change.
///
/// The watcher is a [`SourceWatcher`] of the file: its
/// [`state`](WatchHandle::state) is a rule source's [`SourceState`] (with
/// its Prometheus text), and one loop, one apply path and one state serve
/// files and configuration stores alike.
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
    path: PathBuf,
    options: LoadOptions,
    interval: Duration,
    on_success: Vec<SuccessListener>,
    on_failure: Vec<FailureListener>,
}

impl RuleWatcher {
    /// A watcher of the file at `path`, checked every [`DEFAULT_INTERVAL`],
    /// read with the default [`LoadOptions`].
    pub fn new(path: impl Into<PathBuf>) -> Self {
        RuleWatcher {
            path: path.into(),
            options: LoadOptions::default(),
            interval: DEFAULT_INTERVAL,
            on_success: Vec::new(),
            on_failure: Vec::new(),
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
        self.options = options;
        self
    }

    /// Called after each load put in force, the first one included, with
    /// the file's version and rule counts. Runs on the watcher's thread; a
    /// panic in it is caught and logged.
    pub fn on_success(mut self, listener: impl Fn(&Reloaded) + Send + Sync + 'static) -> Self {
        self.on_success.push(Arc::new(listener));
        self
    }

    /// Called when a changed file is refused (every problem in it), cannot
    /// be read, is not a regular file, is deleted, or panics while it is
    /// loaded; the rules in force are kept. Each failure is told once
    /// while it lasts. Not called for the first load, whose error
    /// [`start`](Self::start) returns.
    pub fn on_failure(mut self, listener: impl Fn(&FileError) + Send + Sync + 'static) -> Self {
        self.on_failure.push(Arc::new(listener));
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
        let file = self.path.display().to_string();
        let known = Known::default();
        let store = RuleFileStore::shared(self.path.clone(), self.options.clone(), known.clone());
        let source = self.source_watcher(known)?.start(sentinel)?;
        Ok(WatchHandle {
            file,
            source,
            store,
        })
    }

    /// [`start`](Self::start) without the thread: a test steps the loop.
    #[cfg(test)]
    pub(crate) fn stepped(
        self,
        sentinel: &Sentinel,
    ) -> Result<crate::source::Stepped<FileSource>, FileError> {
        self.source_watcher(Known::default())?.stepped(sentinel)
    }

    /// The file's source watcher, after the interval is checked.
    fn source_watcher(self, known: Known) -> Result<SourceWatcher<FileSource>, FileError> {
        let RuleWatcher {
            path,
            options,
            interval,
            on_success,
            on_failure,
        } = self;
        if interval < MIN_INTERVAL {
            return Err(FileError::one(
                &path.display().to_string(),
                None,
                format!("the watch interval must be at least {MIN_INTERVAL:?}, got {interval:?}"),
            ));
        }
        let source = FileSource::new(path, options.clone(), interval);
        let format = RuleFormat::yaml(crate::source::RuleSource::name(&source));
        let mut watcher = SourceWatcher::new(source, format)
            .options(options)
            .backoff(interval, interval.max(DEFAULT_MAX_BACKOFF))
            .file_contract(known);
        for listener in on_success {
            watcher = watcher.on_success(move |loaded| listener(loaded));
        }
        for listener in on_failure {
            watcher = watcher.on_failure(move |error| listener(error));
        }
        Ok(watcher)
    }
}

impl fmt::Debug for RuleWatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleWatcher")
            .field("path", &self.path)
            .field("interval", &self.interval)
            .field("options", &self.options)
            .field("on_success", &self.on_success.len())
            .field("on_failure", &self.on_failure.len())
            .finish()
    }
}

/// A running watcher: dropping it (or [`stop`](Self::stop)) stops the
/// thread and waits for it. The rules it loaded stay in force.
#[derive(Debug)]
pub struct WatchHandle {
    file: String,
    source: SourceHandle,
    store: RuleFileStore,
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
        self.source.state()
    }

    /// A reader of the file's state that may outlive the handle, for a
    /// page or a scrape (see [`SourceHandle::state_reader`]).
    pub fn state_reader(&self) -> impl Fn() -> SourceState + Clone + Send + Sync + 'static {
        self.source.state_reader()
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
