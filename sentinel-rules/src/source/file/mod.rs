//! `FileSource`: a rule file as a rule source, polled: what
//! [`RuleWatcher`](crate::RuleWatcher) runs on a [`SourceWatcher`](super::SourceWatcher).
//!
//! A file tells of no change: every poll interval [`wait`](RuleSource::wait)
//! stats the path (following symlinks) and says a read is due when the
//! metadata moved, when the file was modified so recently that unchanged
//! metadata proves nothing, or when content read once waits for a second
//! read. [`read`](RuleSource::read) decides what may be taken:
//!
//! - the first read, and a file that arrived by a rename (another inode at
//!   the path: a temporary file renamed over it, a ConfigMap's `..data`
//!   symlink swapped), are taken at once: they were written whole;
//! - content written into the file in place is taken when two reads in a
//!   row, one interval apart, give the same bytes and the same metadata;
//!   the first read answers [`KeyValue::Unsettled`], since one read may
//!   catch a writer between its truncation and its last write, and a
//!   partial file may well parse.
//!
//! Only a regular file is read, opened without blocking (a named pipe at
//! the path is refused, never waited on), and no more than the size
//! limit. A deleted or unreadable file is a [`SourceError`]: the watcher
//! tells it once while it lasts and checks again with its backoff.

mod fingerprint;

use std::io::ErrorKind;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;

use super::{Fnv, KeyValue, RuleSource, SourceError, Values};
use crate::load::read_regular;
use crate::options::LoadOptions;
use fingerprint::Fingerprint;

/// The values this process last took from a rule file (loaded or
/// refused) or wrote to it, shared by a file's watcher and its stores so
/// that neither takes the other's write for an outside edit. Held while a
/// change is read and applied, and while a store checks, writes and
/// applies.
pub(crate) type Known = Arc<Mutex<Option<Values>>>;

/// What a file source reads: its one key (the file's name) holding `bytes`,
/// the revision a hash of them.
pub(crate) fn file_values(name: &str, bytes: Vec<u8>) -> Values {
    let mut hash = Fnv::default();
    hash.eat(&bytes);
    Values {
        revision: Some(hash.revision()),
        entries: vec![(name.to_owned(), KeyValue::Present(bytes))],
    }
}

/// What a file was told when it is gone.
const GONE: &str = "the file is gone; the rules in force are kept until it is back";

/// The rule file at one path, its one key named as the file is in errors
/// (the path as given).
pub(crate) struct FileSource {
    path: PathBuf,
    name: String,
    options: LoadOptions,
    interval: Duration,
    /// The metadata seen at the last read; `None` before the first and
    /// once the file is gone.
    fingerprint: Option<Fingerprint>,
    /// Content of a file written in place, read once: taken only when the
    /// next read gives the same bytes with the same metadata (a writer
    /// that truncated and wrote the same prefix again meanwhile moved the
    /// times).
    pending: Option<Pending>,
    /// A read was made: later ones may wait for a second read; the first
    /// says `cannot open` when there is no file.
    opened: bool,
}

/// Content read once, and the metadata it was read with.
struct Pending {
    bytes: Vec<u8>,
    fingerprint: Fingerprint,
}

impl FileSource {
    /// The file at `path`, read under `options` (its size limit), polled
    /// every `interval`.
    pub(crate) fn new(path: PathBuf, options: LoadOptions, interval: Duration) -> Self {
        FileSource {
            name: path.display().to_string(),
            path,
            options,
            interval,
            fingerprint: None,
            pending: None,
            opened: false,
        }
    }

    /// The file's metadata, following symlinks; a missing file forgets
    /// what was seen of it, so that the file back is read as new.
    fn stat(&mut self) -> Result<std::fs::Metadata, SourceError> {
        std::fs::metadata(&self.path).map_err(|e| {
            if !self.opened {
                return SourceError::new(format!("cannot open: {e}"));
            }
            if e.kind() == ErrorKind::NotFound {
                self.fingerprint = None;
                self.pending = None;
                return SourceError::new(GONE);
            }
            SourceError::new(format!("cannot stat: {e}"))
        })
    }
}

impl RuleSource for FileSource {
    fn name(&self) -> String {
        self.name.clone()
    }

    /// Nothing to connect: each read says what is wrong with the file.
    fn connect(&mut self, _keys: &[String]) -> Result<(), SourceError> {
        Ok(())
    }

    /// Reads the file (whatever `max_size` says, the limit is the
    /// source's options', the watcher's own).
    fn read(&mut self, keys: &[String], _max_size: usize) -> Result<Values, SourceError> {
        let meta = self.stat()?;
        let fingerprint = Fingerprint::of(&meta);
        // Another file in place (renamed over the path, or a symlink
        // swapped): written whole before it got there.
        let renamed = self
            .fingerprint
            .as_ref()
            .is_some_and(|old| !old.same_file(&fingerprint));
        self.fingerprint = Some(fingerprint.clone());
        let pending = self.pending.take();
        let bytes = read_regular(&self.path, &self.options)
            .map_err(|e| SourceError::new(format!("cannot read: {e}")))?;
        let first = !std::mem::replace(&mut self.opened, true);
        let settled = pending
            .is_some_and(|pending| pending.bytes == bytes && pending.fingerprint == fingerprint);
        let mut values = if first || renamed || settled {
            file_values(&self.name, bytes)
        } else {
            self.pending = Some(Pending { bytes, fingerprint });
            Values {
                revision: None,
                entries: vec![(self.name.clone(), KeyValue::Unsettled)],
            }
        };
        // The file's one key; any other asked for does not exist.
        for key in keys.iter().filter(|k| **k != self.name) {
            values.entries.push((key.clone(), KeyValue::Missing));
        }
        Ok(values)
    }

    fn wait(&mut self, _timeout: Duration) -> Result<bool, SourceError> {
        let meta = self.stat()?;
        let fingerprint = Fingerprint::of(&meta);
        // Pending content is read again whatever the metadata says: it is
        // taken only when seen twice.
        Ok(self.pending.is_some()
            || self.fingerprint.as_ref() != Some(&fingerprint)
            || fingerprint.racy(SystemTime::now()))
    }

    fn poll_interval(&self) -> Option<Duration> {
        Some(self.interval)
    }
}
