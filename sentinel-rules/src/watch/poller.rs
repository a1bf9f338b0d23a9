//! One poll of the watched file: stat, compare, read, parse, apply, tell.

use std::io::ErrorKind;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use sentinel_core::Sentinel;

use super::fingerprint::Fingerprint;
use crate::error::FileError;
use crate::load::{Reloaded, apply, parse_bytes, read_limited};
use crate::options::LoadOptions;
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
    /// The content last parsed, good or bad, or written by a store of
    /// this watcher; locked while a change is read and applied, so a
    /// store's replace and a poll never interleave.
    pub(super) known: Known,
    /// The file was gone at the last poll (warned once).
    missing: bool,
    /// The last failure told, so a lasting one is told once.
    last_failure: Option<FileError>,
    /// New content that did not parse, not told yet: it may be a writer's
    /// file read between its truncation and its last write. Told when the
    /// next poll reads the same bytes.
    unsettled: Option<Unsettled>,
}

/// Content refused once, and why.
struct Unsettled {
    bytes: Vec<u8>,
    error: FileError,
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
            unsettled: None,
        }
    }

    /// The first load: its error is returned rather than told.
    pub(super) fn first(&mut self, sentinel: &Sentinel) -> Result<(), FileError> {
        let meta = std::fs::metadata(&self.path)
            .map_err(|e| FileError::one(&self.name, None, format!("cannot open: {e}")))?;
        self.fingerprint = Some(Fingerprint::of(&meta));
        let known = self.known.clone();
        let mut known = known.lock();
        let bytes = self.read()?;
        let file = parse_bytes(&bytes, &self.name, &self.options.for_instance(sentinel))?;
        *known = Some(bytes);
        let outcome = self.apply(sentinel, file);
        drop(known);
        self.tell(outcome);
        Ok(())
    }

    pub(super) fn poll(&mut self, sentinel: &Sentinel) {
        let meta = match std::fs::metadata(&self.path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                if !self.missing {
                    self.missing = true;
                    self.fingerprint = None;
                    tracing::warn!(
                        file = %self.name,
                        "sentinel-rules: the rule file is gone; the rules in force are kept"
                    );
                }
                return;
            }
            Err(e) => {
                return self.fail(FileError::one(
                    &self.name,
                    None,
                    format!("cannot stat: {e}"),
                ));
            }
        };
        if self.missing {
            self.missing = false;
            tracing::info!(file = %self.name, "sentinel-rules: the rule file is back");
        }
        let fingerprint = Fingerprint::of(&meta);
        // Unsettled content is read again whatever the metadata says: it
        // is told only when seen twice.
        if self.fingerprint.as_ref() == Some(&fingerprint)
            && !fingerprint.racy(SystemTime::now())
            && self.unsettled.is_none()
        {
            return;
        }
        self.fingerprint = Some(fingerprint);
        // Read, compare and apply under the lock a store writes under: a
        // read from before a store's write is never applied after it.
        let known = self.known.clone();
        let mut known = known.lock();
        let bytes = match self.read() {
            Ok(bytes) => bytes,
            Err(error) => {
                drop(known);
                return self.fail(error);
            }
        };
        let unsettled = self.unsettled.take();
        if known.as_deref() == Some(bytes.as_slice()) {
            return;
        }
        let outcome = match unsettled {
            // The same bad bytes twice: the file is bad, not half written.
            Some(unsettled) if unsettled.bytes == bytes => {
                *known = Some(bytes);
                // New content: told even when its errors read as the last.
                self.last_failure = None;
                Err(unsettled.error)
            }
            _ => match parse_bytes(&bytes, &self.name, &self.options.for_instance(sentinel)) {
                Ok(file) => {
                    *known = Some(bytes);
                    self.apply(sentinel, file)
                }
                Err(error) => {
                    // Not known yet: a store's replace meanwhile is a
                    // conflict, as for any edit the watcher has not taken.
                    self.unsettled = Some(Unsettled { bytes, error });
                    return;
                }
            },
        };
        drop(known);
        self.tell(outcome);
    }

    fn read(&self) -> Result<Vec<u8>, FileError> {
        std::fs::File::open(&self.path)
            .and_then(|file| read_limited(file, &self.options))
            .map_err(|e| FileError::one(&self.name, None, format!("cannot read: {e}")))
    }

    /// Puts `file` in force; what happened is told by [`tell`](Self::tell)
    /// once the lock is released, so a listener may use a store.
    fn apply(&mut self, sentinel: &Sentinel, file: crate::RuleFile) -> Result<Reloaded, FileError> {
        apply(sentinel, file).map_err(|errors| {
            let problems = errors
                .errors()
                .iter()
                .map(|e| crate::Problem::new(None, e.to_string()));
            FileError::new(&self.name, problems.collect())
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
            "sentinel-rules: rules loaded"
        );
        for listener in &self.on_success {
            if catch_unwind(AssertUnwindSafe(|| listener(&reloaded))).is_err() {
                tracing::error!("sentinel-rules: a success listener panicked");
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
            "sentinel-rules: rule file refused; the rules in force are kept"
        );
        for listener in &self.on_failure {
            if catch_unwind(AssertUnwindSafe(|| listener(&error))).is_err() {
                tracing::error!("sentinel-rules: a failure listener panicked");
            }
        }
        self.last_failure = Some(error);
    }
}
