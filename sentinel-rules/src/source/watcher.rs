//! `SourceWatcher`: load the rules a store holds, then follow them.

use std::fmt;
use std::ops::Deref;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{self, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

use sentinel_flow_core::Sentinel;

use super::run::{self, Runner};
use super::shared::{FailureListener, Shared, SuccessListener};
use super::{Known, RuleFormat, RuleSource, SourceState, SourceStore, backup};
use crate::error::FileError;
use crate::load::Reloaded;
use crate::options::LoadOptions;

/// The first wait before reconnecting to a store that failed.
pub const DEFAULT_MIN_BACKOFF: Duration = Duration::from_millis(100);

/// The longest wait between two reconnection attempts: each failure
/// doubles the wait up to this cap.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(5);

/// Loads the rules a [`RuleSource`] holds into a [`Sentinel`] and follows
/// them as they change.
///
/// Each change the store tells of is read whole (word of several changes
/// that came meanwhile gives one read: the latest wins), decoded by its
/// [`RuleFormat`], validated as a whole and put in force in one swap; a
/// bad value is told to [`on_failure`](Self::on_failure) with every
/// problem (key, place, field) and the rules in force stay. One thread
/// reads and applies, and a [`SourceStore`]'s write applies under the same
/// lock: at most one apply is in flight. A lost connection keeps the
/// rules, is logged once, and is retried after a wait that doubles from
/// [`DEFAULT_MIN_BACKOFF`] to [`DEFAULT_MAX_BACKOFF`]; every reconnection
/// reads the keys again (a change made while disconnected is not missed).
///
/// With [`last_known_good`](Self::last_known_good), each rule set put in
/// force is copied to a local file; when the store cannot be reached at
/// start (or holds a bad value then), the instance starts from that copy,
/// says so in a log line and in [`SourceState::from_last_known_good`], and
/// follows the store once it answers.
pub struct SourceWatcher<R> {
    source: R,
    format: RuleFormat,
    options: LoadOptions,
    backup: Option<PathBuf>,
    min_backoff: Duration,
    max_backoff: Duration,
    on_success: Vec<SuccessListener>,
    on_failure: Vec<FailureListener>,
    /// The rule file's way (see [`file_contract`](Self::file_contract)).
    file: Option<Known>,
}

impl<R: RuleSource> SourceWatcher<R> {
    /// A watcher of the keys `format` names in `source`.
    pub fn new(source: R, format: RuleFormat) -> Self {
        SourceWatcher {
            source,
            format,
            options: LoadOptions::default(),
            backup: None,
            min_backoff: DEFAULT_MIN_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
            on_success: Vec::new(),
            on_failure: Vec::new(),
            file: None,
        }
    }

    /// The rule file's contract, which [`RuleWatcher`](crate::RuleWatcher)
    /// keeps: a source that cannot be read at start is an error (nothing
    /// is watched), a failure to read it (a deletion, a named pipe) is
    /// told to the failure listeners once while it lasts, and the values
    /// in force are `known`, shared with the file's stores.
    pub(crate) fn file_contract(mut self, known: Known) -> Self {
        self.file = Some(known);
        self
    }

    /// The limits values are read under: a value larger than
    /// [`LoadOptions::max_size`] (4 MiB by default) is refused without
    /// being read or parsed.
    pub fn options(mut self, options: LoadOptions) -> Self {
        self.options = options;
        self
    }

    /// Keeps a copy of the last rule set put in force at `path`, and
    /// starts from it when the store cannot be reached at start.
    pub fn last_known_good(mut self, path: impl Into<PathBuf>) -> Self {
        self.backup = Some(path.into());
        self
    }

    /// The waits between reconnection attempts: from `min`, doubled after
    /// each failure up to `max` (at least 1 ms each, `max >= min`, or
    /// [`start`](Self::start) refuses them).
    pub fn backoff(mut self, min: Duration, max: Duration) -> Self {
        self.min_backoff = min;
        self.max_backoff = max;
        self
    }

    /// Called after each rule set put in force (the first included).
    pub fn on_success(mut self, listener: impl Fn(&Reloaded) + Send + Sync + 'static) -> Self {
        self.on_success.push(Arc::new(listener));
        self
    }

    /// Called for each value refused (every problem in it); the rules in
    /// force are kept. Not called for a bad value at start without a
    /// last-known-good copy: [`start`](Self::start) returns that.
    pub fn on_failure(mut self, listener: impl Fn(&FileError) + Send + Sync + 'static) -> Self {
        self.on_failure.push(Arc::new(listener));
        self
    }

    /// Reads the store and puts its rules in force, then follows it on a
    /// thread of its own until the handle is dropped.
    ///
    /// A store that cannot be reached is not an error: the instance starts
    /// from the last-known-good copy if there is one (else with the rules
    /// it has), and the thread reconnects. A bad value at start is an
    /// error unless a last-known-good copy loads; so is a format with no
    /// key or a bad backoff.
    pub fn start<S>(self, sentinel: S) -> Result<SourceHandle, FileError>
    where
        S: Deref<Target = Sentinel> + Send + 'static,
    {
        let (runner, shared, store) = self.prepare(&sentinel)?;
        let name = shared.name.clone();
        let (stop, stopped) = mpsc::channel::<()>();
        let thread_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("sentinel-rules-source".into())
            .spawn(move || run::run(runner, &thread_shared, &sentinel, &stopped))
            .map_err(|e| FileError::one(&name, None, format!("cannot start the watcher: {e}")))?;
        Ok(SourceHandle {
            shared,
            store,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Checks the settings and makes the first read and apply: what
    /// [`start`](Self::start) does before its thread steps the loop.
    fn prepare(self, sentinel: &Sentinel) -> Result<Prepared<R>, FileError> {
        let SourceWatcher {
            mut source,
            format,
            options,
            backup,
            min_backoff,
            max_backoff,
            on_success,
            on_failure,
            file,
        } = self;
        let name = source.name();
        let keys = format.keys();
        if keys.is_empty() {
            return Err(FileError::one(&name, None, "the rule format names no key"));
        }
        if min_backoff < Duration::from_millis(1) || max_backoff < min_backoff {
            return Err(FileError::one(
                &name,
                None,
                format!(
                    "the backoff must be at least 1 ms and max >= min, got {min_backoff:?}..{max_backoff:?}"
                ),
            ));
        }
        let strict = file.is_some();
        let shared = Arc::new(Shared::new(
            name.clone(),
            format,
            options,
            backup,
            on_success,
            on_failure,
            (file.unwrap_or_default(), strict),
        ));
        let first = run::read_and_take(&mut source, &shared, sentinel, &keys, true);
        let connected = match first {
            Ok(Some(Err(error))) => {
                if !from_backup(&shared, sentinel) {
                    return Err(error);
                }
                true
            }
            Ok(outcome) => {
                shared.tell(outcome);
                true
            }
            Err(error) if strict => {
                return Err(FileError::one(&name, None, error.to_string()));
            }
            Err(error) => {
                shared.failed(&error);
                from_backup(&shared, sentinel);
                false
            }
        };
        let store = source
            .writer()
            .map(|writer| SourceStore::new(shared.clone(), writer));
        let runner = Runner::new(source, keys, connected, (min_backoff, max_backoff));
        Ok((runner, shared, store))
    }

    /// [`prepare`](Self::prepare), for a test to step the loop itself.
    #[cfg(test)]
    pub(crate) fn stepped(self, sentinel: &Sentinel) -> Result<Stepped<R>, FileError> {
        let (runner, shared, _) = self.prepare(sentinel)?;
        Ok(Stepped { runner, shared })
    }
}

/// A watcher ready to step: its loop, what the loop and the handle share,
/// and the store when the source can be written.
type Prepared<R> = (Runner<R>, Arc<Shared>, Option<SourceStore>);

/// A watcher's loop stepped by a test, one poll at a time, without its
/// thread and its pauses.
#[cfg(test)]
pub(crate) struct Stepped<R> {
    runner: Runner<R>,
    shared: Arc<Shared>,
}

#[cfg(test)]
impl<R: RuleSource> Stepped<R> {
    /// One step of the loop; the pause it asks for before the next is
    /// returned, not taken.
    pub(crate) fn step(&mut self, sentinel: &Sentinel) -> Duration {
        self.runner.step(&self.shared, sentinel)
    }

    /// The source's state now.
    pub(crate) fn state(&self) -> SourceState {
        self.shared.state()
    }
}

/// Puts the last-known-good copy in force, if there is one that loads.
fn from_backup(shared: &Shared, sentinel: &Sentinel) -> bool {
    let Some(path) = &shared.backup else {
        return false;
    };
    let max = shared
        .options
        .get_max_size()
        .saturating_mul(shared.format.keys().len() * 2 + 1);
    let values = match backup::load(path, max) {
        Ok(values) => values,
        Err(why) => {
            tracing::warn!(source = %shared.name, path = %path.display(), %why, "sentinel-flow-rules: no usable last-known-good copy");
            return false;
        }
    };
    let mut known = shared.known.lock();
    match shared.take(sentinel, &mut known, values, true) {
        Some(Ok(reloaded)) => {
            drop(known);
            tracing::warn!(source = %shared.name, path = %path.display(), counts = ?reloaded.counts, "sentinel-flow-rules: the store cannot give its rules; started from the last-known-good copy");
            shared.tell(Some(Ok(reloaded)));
            true
        }
        Some(Err(error)) => {
            drop(known);
            tracing::warn!(source = %shared.name, path = %path.display(), %error, "sentinel-flow-rules: the last-known-good copy is refused");
            false
        }
        None => true,
    }
}

impl<R> fmt::Debug for SourceWatcher<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceWatcher")
            .field("format", &self.format)
            .field("options", &self.options)
            .field("last_known_good", &self.backup)
            .field("backoff", &(self.min_backoff, self.max_backoff))
            .finish_non_exhaustive()
    }
}

/// A running source watcher: dropping it (or [`stop`](Self::stop)) stops
/// the thread and waits for it. The rules it loaded stay in force.
pub struct SourceHandle {
    shared: Arc<Shared>,
    store: Option<SourceStore>,
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl SourceHandle {
    /// The source's state now.
    pub fn state(&self) -> SourceState {
        self.shared.state()
    }

    /// A reader of the source's state that may outlive the handle (once
    /// the watcher is stopped it shows the last state, not connected),
    /// for a page or a scrape:
    /// `CommandCenter::source_state` in `sentinel-flow-transport`.
    pub fn state_reader(&self) -> impl Fn() -> SourceState + Clone + Send + Sync + 'static {
        let shared = self.shared.clone();
        move || shared.state()
    }

    /// A store writing to the source (the destination of the command
    /// API's `setRules`), when the source can be written.
    pub fn store(&self) -> Option<SourceStore> {
        self.store.clone()
    }

    /// Stops the watcher and waits for its thread.
    pub fn stop(self) {}
}

impl fmt::Debug for SourceHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceHandle")
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl Drop for SourceHandle {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take()
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
        self.shared.stopped();
    }
}
