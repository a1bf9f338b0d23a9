//! `RuleFileStore`: rules changed through an API (the dashboard's
//! `setRules`) written back to the rule file, then put in force.

mod error;
mod lock;
mod splice;
mod write;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use sentinel_flow_core::Sentinel;

use crate::change::RuleChange;
use crate::error::{FileError, Problem};
use crate::load::{apply, parse_bytes, read_regular};
use crate::options::LoadOptions;
use crate::parse::{RuleFile, parse};
use crate::render;
pub use error::StoreError;
use splice::{Layout, Spliced};

use crate::source::{Known, file_values};

/// Replaces are one at a time in the process, whichever store they come
/// from: two stores of one file each compare the disk with what they know
/// under this lock, so the second sees the first's write.
static REPLACING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A rule file that can be rewritten: the rules changed through an API
/// written back to it.
///
/// [`replace`](Self::replace) validates one kind's new rules with the rest
/// of the file, refuses when the file changed on disk since this process
/// last read or wrote it, rewrites only that kind's top-level section
/// (everything else kept byte for byte), replaces the file atomically and
/// puts the whole file's rules in force in one swap. Clones share one view
/// of the file; take the store of a running watcher with
/// [`WatchHandle::store`](crate::WatchHandle::store) so the two agree.
///
/// ```
/// use sentinel_flow_core::flow::FlowRule;
/// use sentinel_flow_core::{ManualClock, Sentinel};
/// use sentinel_flow_rules::{RuleChange, RuleFileStore};
///
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("rules.yaml");
/// std::fs::write(&path, "# ours\nflow:\n  - {resource: a, count: 1}\n")?;
/// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).build();
///
/// let store = RuleFileStore::open(&path)?;
/// store.replace(&sentinel, RuleChange::Flow(vec![FlowRule::new("a", 5.0)]))?;
/// assert_eq!(std::fs::read_to_string(&path)?, "# ours\nflow:\n  - resource: a\n    count: 5\n");
/// assert_eq!(sentinel.rule_book().flow[0].count, 5.0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct RuleFileStore {
    path: PathBuf,
    options: LoadOptions,
    known: Known,
}

impl RuleFileStore {
    /// A store of the file at `path`, read with the default
    /// [`LoadOptions`]; its content now is the baseline a change is
    /// checked against. The rules are not loaded: a watcher (or
    /// [`reload`](Self::reload)) does that.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self, FileError> {
        Self::open_with(path, LoadOptions::default())
    }

    /// [`open`](Self::open) with `options` (the limits the file is read
    /// and written under).
    pub fn open_with(path: impl Into<PathBuf>, options: LoadOptions) -> Result<Self, FileError> {
        let path = path.into();
        let bytes = read(&path, &options)?;
        let name = path.display().to_string();
        Ok(RuleFileStore {
            path,
            options,
            known: Arc::new(Mutex::new(Some(file_values(&name, bytes)))),
        })
    }

    pub(crate) fn shared(path: PathBuf, options: LoadOptions, known: Known) -> Self {
        RuleFileStore {
            path,
            options,
            known,
        }
    }

    /// The rule file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the file and puts its rules in force, making its content the
    /// new baseline: how a store without a watcher takes in an outside
    /// edit after a [`StoreError::Conflict`]. A bad file changes nothing.
    pub fn reload(&self, sentinel: &Sentinel) -> Result<crate::Reloaded, FileError> {
        let _one = REPLACING.lock().unwrap_or_else(|e| e.into_inner());
        let mut known = self.known.lock();
        let bytes = read(&self.path, &self.options)?;
        let file = parse_bytes(&bytes, &self.name(), &self.options.for_instance(sentinel))?;
        *known = Some(file_values(&self.name(), bytes));
        apply(sentinel, file).map_err(|errors| {
            let problems = errors.errors().iter();
            let problems = problems.map(|e| Problem::new(None, e.to_string()));
            FileError::new(&self.name(), problems.collect())
        })
    }

    /// Validates `change` (every problem, nothing changes on error),
    /// refuses if the file on disk is not what this process last loaded or
    /// wrote (conflict), renders the whole file with only the changed
    /// kind's section rewritten, writes it atomically (temp file in the
    /// same dir, fsync, rename, fsync dir), then applies the whole file's
    /// rules to `sentinel` in one swap.
    ///
    /// Writers do not lose each other's changes. Every store, in this
    /// process or another, checks and writes under an advisory lock
    /// (`flock` on `.<file name>.lock` beside the file, created on first
    /// use and left there; on unix), waiting up to 5 s for another
    /// writer: of two stores replacing the same content at once, one
    /// writes and the other gets [`StoreError::Conflict`]. A writer that
    /// takes no lock (an editor, a deploy script) is caught by a second
    /// check of the file's content just before the new file takes its
    /// place; on Linux the new file is exchanged with the old one
    /// (`renameat2`) and the file it displaced checked too, so an edit
    /// renamed into place at any moment before is put back and told as a
    /// conflict. An edit written into the file in place while it is being
    /// replaced cannot be seen and may be lost.
    ///
    /// Comments inside the rewritten section are not kept; a kind the file
    /// has no section for gets one at the end. Replaces within a process
    /// run one at a time: through clones of one store (or a watcher's
    /// stores) each applies on top of the one before; through stores
    /// opened separately, the second gets [`StoreError::Conflict`].
    pub fn replace(&self, sentinel: &Sentinel, change: RuleChange) -> Result<(), StoreError> {
        let _one = REPLACING.lock().unwrap_or_else(|e| e.into_inner());
        let mut known = self.known.lock();
        let target = match std::fs::canonicalize(&self.path) {
            Ok(target) => target,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.conflict("was removed"));
            }
            Err(error) => return Err(StoreError::io("resolve", &self.path, error)),
        };
        // Every store of the file, in any process, checks and writes under
        // this lock: the second of two writers finds the first's write.
        let lock = lock::exclusive(&target)?;
        let on_disk = match read_raw(&target, &self.options) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(self.conflict("was removed"));
            }
            Err(error) => return Err(StoreError::io("read", &self.path, error)),
        };
        if self.known_bytes(known.as_ref()) != Some(on_disk.as_slice()) {
            return Err(self.conflict("changed on disk"));
        }
        // The instance's name length limit, as the watcher reads the file.
        let options = self.options.for_instance(sentinel);
        let (bytes, file) = self.rewrite(&on_disk, &change, &options)?;
        // The same rules again (a dashboard saving what it read) leave the
        // file alone: no new inode, no new modification time.
        if bytes != on_disk {
            // An edit by a writer that does not take the lock (an editor,
            // a deploy script) may land while this one renders and syncs:
            // the content is checked again as the new file takes its place.
            write::replace_file(&self.path, &target, &bytes, &on_disk, &self.options)?;
            *known = Some(file_values(&self.name(), bytes));
        }
        drop(lock);
        apply(sentinel, file).map_err(|errors| {
            // Not reached: the text parsed, so every rule passed these checks.
            StoreError::Invalid(errors.errors().iter().map(|e| e.to_string()).collect())
        })?;
        tracing::info!(
            file = %self.path.display(),
            kind = change.kind(),
            rules = change.len(),
            "sentinel-flow-rules: rules written to the file and loaded"
        );
        Ok(())
    }

    /// The new file's bytes and rules: `change` spliced into `on_disk`,
    /// parsed back as a load would, and checked to read back as asked.
    fn rewrite(
        &self,
        on_disk: &[u8],
        change: &RuleChange,
        options: &LoadOptions,
    ) -> Result<(Vec<u8>, RuleFile), StoreError> {
        let name = self.name();
        let invalid = |e: FileError| StoreError::Invalid(e.lines());
        let text = std::str::from_utf8(on_disk)
            .map_err(|_| invalid(parse_bytes(on_disk, &name, options).unwrap_err()))?;
        let old = parse(text, &name, options);
        let Ok(layout) = Layout::of(text, options.get_max_depth()) else {
            // The file does not parse at all: its own errors say why.
            let error = old
                .err()
                .unwrap_or_else(|| FileError::one(&name, None, "the file does not parse as YAML"));
            return Err(invalid(error));
        };
        let section = render::section(change).map_err(StoreError::Invalid)?;
        let spliced = match &layout {
            Some(layout) => Spliced::new(text, layout.section(text, change.kind()), &section),
            None => {
                // No sections to cut out: the whole file is written anew.
                let mut whole = old.clone().map_err(invalid)?;
                change.put_in(&mut whole);
                let text = render::document(&whole).map_err(StoreError::Invalid)?;
                tracing::warn!(
                    file = %self.path.display(),
                    "sentinel-flow-rules: the rule file is not a block mapping with one key per line; \
                     rewritten whole, comments dropped"
                );
                Spliced::new("", None, &text)
            }
        };
        let new = parse(&spliced.text, &name, options)
            .map_err(|e| StoreError::Invalid(lines_in_old_file(&name, &e, &spliced)))?;
        let kept = old.as_ref().map_or(true, |old| {
            let mut expected = old.clone();
            change.put_in(&mut expected);
            expected.book == new.book
                && expected.user_kinds == new.user_kinds
                && old.version == new.version
                && old.track_percentiles == new.track_percentiles
        });
        if !change.is_in(&new) || !kept {
            tracing::error!(text = %spliced.text, "sentinel-flow-rules: a rewrite read back wrong");
            return Err(StoreError::Invalid(vec![format!(
                "{name}: the rewritten file would not read back as the rules given \
                 (a bug: please report it); nothing was written"
            )]));
        }
        Ok((spliced.text.into_bytes(), new))
    }

    fn name(&self) -> String {
        self.path.display().to_string()
    }

    /// The file's content in `known` (the one key a file's values hold).
    fn known_bytes<'k>(&self, known: Option<&'k crate::source::Values>) -> Option<&'k [u8]> {
        match known?.get(&self.name()) {
            crate::source::KeyValue::Present(bytes) => Some(bytes),
            _ => None,
        }
    }

    fn conflict(&self, reason: &str) -> StoreError {
        StoreError::Conflict {
            path: self.path.clone(),
            reason: reason.to_owned(),
        }
    }
}

/// The problems of a rewritten file as lines about the file on disk: a
/// problem in the new section names its rule and field only (the section
/// is not on disk), one elsewhere its position in the file as it is.
fn lines_in_old_file(name: &str, error: &FileError, spliced: &Spliced) -> Vec<String> {
    let each = error.problems().iter();
    each.map(|problem| match problem.position {
        Some(mut pos) => match spliced.old_line(pos.line) {
            Some(line) => {
                pos.line = line;
                format!(
                    "{name}:{}",
                    Problem {
                        position: Some(pos),
                        ..problem.clone()
                    }
                )
            }
            None => Problem {
                position: None,
                ..problem.clone()
            }
            .to_string(),
        },
        None => format!("{name}: {problem}"),
    })
    .collect()
}

fn read(path: &Path, options: &LoadOptions) -> Result<Vec<u8>, FileError> {
    read_raw(path, options).map_err(|e| {
        FileError::one(
            &path.display().to_string(),
            None,
            format!("cannot read: {e}"),
        )
    })
}

fn read_raw(path: &Path, options: &LoadOptions) -> std::io::Result<Vec<u8>> {
    read_regular(path, options)
}

impl fmt::Debug for RuleFileStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuleFileStore")
            .field("path", &self.path)
            .field("options", &self.options)
            .field(
                "known_len",
                &self
                    .known_bytes(self.known.lock().as_ref())
                    .map(<[u8]>::len),
            )
            .finish()
    }
}
