//! One poll of the watched file: stat, compare, read, parse, apply, tell.

use std::any::Any;
use std::io::ErrorKind;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;
use sentinel_flow_core::Sentinel;

use super::fingerprint::Fingerprint;
use crate::error::FileError;
use crate::load::{Reloaded, apply, parse_bytes, read_regular};
use crate::options::LoadOptions;
use crate::source::{Fnv, SourceState};
use crate::store::Known;

pub(super) type SuccessListener = Arc<dyn Fn(&Reloaded) + Send + Sync>;
pub(super) type FailureListener = Arc<dyn Fn(&FileError) + Send + Sync>;

/// The watcher's memory between polls.
pub(super) struct Poller {
    pub(super) path: PathBuf,
    pub(super) name: String,
    pub(super) options: LoadOptions,
    pub(super) on_success: Vec<SuccessListener>,
    pub(super) on_failure: Vec<FailureListener>,
    /// The metadata seen at the last read.
    fingerprint: Option<Fingerprint>,
    /// The content last taken (loaded or refused), or written by a store
    /// of this watcher; locked while a change is read and applied, so a
    /// store's replace and a poll never interleave.
    pub(super) known: Known,
    /// The file was gone at the last poll (told once).
    missing: bool,
    /// The last failure told, so a lasting one is told once.
    last_failure: Option<FileError>,
    /// New content of a file written in place, read once: it may be a
    /// writer's file caught between its truncation and its last write, so
    /// it is taken only when the next poll reads the same bytes and finds
    /// the same metadata (a writer that truncated and wrote the same
    /// prefix again meanwhile moved the times).
    pending: Option<Pending>,
    /// What the handle shows: the file's state as a rule source's.
    pub(super) state: Arc<Mutex<SourceState>>,
}

/// Content read once, and the metadata it was read with.
struct Pending {
    bytes: Vec<u8>,
    fingerprint: Fingerprint,
}

impl Poller {
    pub(super) fn new(path: PathBuf, options: LoadOptions) -> Self {
        Poller {
            name: path.display().to_string(),
            path,
            options,
            on_success: Vec::new(),
            on_failure: Vec::new(),
            fingerprint: None,
            known: Known::default(),
            missing: false,
            last_failure: None,
            pending: None,
            state: Arc::default(),
        }
    }

    /// Records in the state what loading `bytes` came to.
    fn record(&self, sentinel: &Sentinel, bytes: &[u8], outcome: &Result<Reloaded, FileError>) {
        let mut state = self.state.lock();
        state.connected = true;
        match outcome {
            Ok(_) => {
                let mut hash = Fnv::default();
                hash.eat(bytes);
                state.applies += 1;
                state.revision = Some(hash.revision());
                state.applied_at_ms = Some(sentinel.now_ms());
                state.last_error = None;
            }
            Err(error) => {
                state.refusals += 1;
                state.last_error = Some(error.to_string());
            }
        }
    }

    /// Records that the file cannot be read now.
    fn unreadable(&self, error: &FileError) {
        let mut state = self.state.lock();
        if state.connected {
            state.connected = false;
            state.disconnects += 1;
        }
        state.last_error = Some(error.to_string());
    }

    /// The first load: its error (a refused file, a failed apply, a panic)
    /// is returned rather than told.
    pub(super) fn first(&mut self, sentinel: &Sentinel) -> Result<(), FileError> {
        let meta = std::fs::metadata(&self.path)
            .map_err(|e| FileError::one(&self.name, None, format!("cannot open: {e}")))?;
        self.fingerprint = Some(Fingerprint::of(&meta));
        let known = self.known.clone();
        let mut known = known.lock();
        self.state.lock().name.clone_from(&self.name);
        let bytes = self.read()?;
        let reloaded = self.load(sentinel, &bytes);
        self.record(sentinel, &bytes, &reloaded);
        let reloaded = reloaded?;
        *known = Some(bytes);
        drop(known);
        self.tell(Ok(reloaded));
        Ok(())
    }

    pub(super) fn poll(&mut self, sentinel: &Sentinel) {
        let meta = match std::fs::metadata(&self.path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == ErrorKind::NotFound => return self.gone(),
            Err(e) => {
                let error = FileError::one(&self.name, None, format!("cannot stat: {e}"));
                self.unreadable(&error);
                return self.fail(error);
            }
        };
        if self.missing {
            self.missing = false;
            // A later deletion is told again.
            self.last_failure = None;
            tracing::info!(file = %self.name, "sentinel-flow-rules: the rule file is back");
        }
        let fingerprint = Fingerprint::of(&meta);
        // Another file in place (renamed over the path, or a symlink
        // swapped): written whole before it got there.
        let renamed = self
            .fingerprint
            .as_ref()
            .is_some_and(|old| !old.same_file(&fingerprint));
        // Pending content is read again whatever the metadata says: it is
        // taken only when seen twice.
        if self.fingerprint.as_ref() == Some(&fingerprint)
            && !fingerprint.racy(SystemTime::now())
            && self.pending.is_none()
        {
            return;
        }
        self.fingerprint = Some(fingerprint.clone());
        // Read, compare and apply under the lock a store writes under: a
        // read from before a store's write is never applied after it.
        let known = self.known.clone();
        let mut known = known.lock();
        let bytes = match self.read() {
            Ok(bytes) => bytes,
            Err(error) => {
                drop(known);
                self.unreadable(&error);
                return self.fail(error);
            }
        };
        self.state.lock().connected = true;
        let pending = self.pending.take();
        if known.as_deref() == Some(bytes.as_slice()) {
            return;
        }
        let settled = pending
            .is_some_and(|pending| pending.bytes == bytes && pending.fingerprint == fingerprint);
        if !renamed && !settled {
            // Not known yet: a store's replace meanwhile is a conflict, as
            // for any edit the watcher has not taken.
            self.pending = Some(Pending { bytes, fingerprint });
            return;
        }
        let outcome = self.load(sentinel, &bytes);
        self.record(sentinel, &bytes, &outcome);
        // Taken, good or bad: the same bytes are not loaded (or told)
        // again, and a store may write over them.
        *known = Some(bytes);
        drop(known);
        // New content: told even when its errors read as the last.
        self.last_failure = None;
        self.tell(outcome);
    }

    /// The file is gone: told once per deletion; the rules in force stay.
    fn gone(&mut self) {
        self.pending = None;
        if self.missing {
            return;
        }
        self.missing = true;
        self.fingerprint = None;
        let error = FileError::one(
            &self.name,
            None,
            "the file is gone; the rules in force are kept until it is back",
        );
        self.unreadable(&error);
        self.fail(error);
    }

    fn read(&self) -> Result<Vec<u8>, FileError> {
        read_regular(&self.path, &self.options)
            .map_err(|e| FileError::one(&self.name, None, format!("cannot read: {e}")))
    }

    /// Parses `bytes` and puts their rules in force. A panic on the way
    /// (in the parser, in the core, in a rule listener) is caught and
    /// returned as the file's error; what is in force is then what the
    /// core's one swap left, the last good rules unless the panic came
    /// after the swap. What happened is told by [`tell`](Self::tell) once
    /// the lock is released, so a listener may use a store.
    fn load(&self, sentinel: &Sentinel, bytes: &[u8]) -> Result<Reloaded, FileError> {
        let load = || {
            let file = parse_bytes(bytes, &self.name, &self.options.for_instance(sentinel))?;
            apply(sentinel, file).map_err(|errors| {
                let problems = errors
                    .errors()
                    .iter()
                    .map(|e| crate::Problem::new(None, e.to_string()));
                FileError::new(&self.name, problems.collect())
            })
        };
        catch_unwind(AssertUnwindSafe(load)).unwrap_or_else(|panic| {
            Err(FileError::one(
                &self.name,
                None,
                format!("loading the rules panicked: {}", panic_message(&*panic)),
            ))
        })
    }

    fn tell(&mut self, outcome: Result<Reloaded, FileError>) {
        let reloaded = match outcome {
            Ok(reloaded) => reloaded,
            Err(error) => return self.fail(error),
        };
        self.last_failure = None;
        tracing::info!(
            file = %self.name,
            version = reloaded.version.as_deref().unwrap_or(""),
            counts = ?reloaded.counts,
            "sentinel-flow-rules: rules loaded"
        );
        for listener in &self.on_success {
            if catch_unwind(AssertUnwindSafe(|| listener(&reloaded))).is_err() {
                tracing::error!("sentinel-flow-rules: a success listener panicked");
            }
        }
    }

    fn fail(&mut self, error: FileError) {
        if self.last_failure.as_ref() == Some(&error) {
            return;
        }
        tracing::warn!(
            file = %self.name,
            %error,
            "sentinel-flow-rules: rule file refused; the rules in force are kept"
        );
        for listener in &self.on_failure {
            if catch_unwind(AssertUnwindSafe(|| listener(&error))).is_err() {
                tracing::error!("sentinel-flow-rules: a failure listener panicked");
            }
        }
        self.last_failure = Some(error);
    }
}

/// A panic's message, when it has one.
fn panic_message(panic: &(dyn Any + Send)) -> &str {
    if let Some(message) = panic.downcast_ref::<&str>() {
        message
    } else if let Some(message) = panic.downcast_ref::<String>() {
        message
    } else {
        "(no message)"
    }
}
