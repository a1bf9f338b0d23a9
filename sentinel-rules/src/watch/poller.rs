//! One poll of the watched file: stat, compare, read, parse, apply, tell.

use std::hash::{Hash, Hasher};
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
    /// The hash of the content last parsed, good or bad.
    content: Option<u64>,
    /// The file was gone at the last poll (warned once).
    missing: bool,
    /// The last failure told, so a lasting one is told once.
    last_failure: Option<FileError>,
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
            content: None,
            missing: false,
            last_failure: None,
        }
    }

    /// The first load: its error is returned rather than told.
    pub(super) fn first(&mut self, sentinel: &Sentinel) -> Result<(), FileError> {
        let meta = std::fs::metadata(&self.path)
            .map_err(|e| FileError::one(&self.name, None, format!("cannot open: {e}")))?;
        self.fingerprint = Some(Fingerprint::of(&meta));
        let bytes = self.read()?;
        self.content = Some(hash(&bytes));
        let file = parse_bytes(&bytes, &self.name, &self.options.for_instance(sentinel))?;
        self.apply(sentinel, file);
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
        if self.fingerprint.as_ref() == Some(&fingerprint) && !fingerprint.racy(SystemTime::now()) {
            return;
        }
        self.fingerprint = Some(fingerprint);
        let bytes = match self.read() {
            Ok(bytes) => bytes,
            Err(error) => return self.fail(error),
        };
        let content = hash(&bytes);
        if self.content == Some(content) {
            return;
        }
        self.content = Some(content);
        match parse_bytes(&bytes, &self.name, &self.options.for_instance(sentinel)) {
            Ok(file) => self.apply(sentinel, file),
            Err(error) => {
                // New content: told even when its errors read as the last.
                self.last_failure = None;
                self.fail(error);
            }
        }
    }

    fn read(&self) -> Result<Vec<u8>, FileError> {
        std::fs::File::open(&self.path)
            .and_then(|file| read_limited(file, &self.options))
            .map_err(|e| FileError::one(&self.name, None, format!("cannot read: {e}")))
    }

    fn apply(&mut self, sentinel: &Sentinel, file: crate::RuleFile) {
        match apply(sentinel, file) {
            Ok(reloaded) => {
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
            Err(errors) => {
                let problems = errors
                    .errors()
                    .iter()
                    .map(|e| crate::Problem::new(None, e.to_string()));
                self.fail(FileError::new(&self.name, problems.collect()));
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

fn hash(bytes: &[u8]) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    bytes.hash(&mut hasher);
    hasher.finish()
}
