//! Reading rule files from text, bytes, readers and paths, and applying
//! them to a `Sentinel`.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::Path;

use sentinel_flow_core::{RuleErrors, Sentinel};

use crate::error::{FileError, Position};
use crate::options::LoadOptions;
use crate::parse::{self, RuleFile};

/// Parses and validates the rule file `text`, named `file_name` in errors,
/// with the default [`LoadOptions`].
///
/// ```
/// let file = sentinel_flow_rules::parse_str("flow:\n  - {resource: GET:/orders, count: -5}\n", "rules.yaml")
///     .unwrap_err();
/// assert_eq!(
///     file.to_string(),
///     "rules.yaml:2:36: flow[0] (GET:/orders): count must be a finite number >= 0, got -5"
/// );
/// ```
pub fn parse_str(text: &str, file_name: &str) -> Result<RuleFile, FileError> {
    parse::parse(text, file_name, &LoadOptions::default())
}

/// [`parse_str`] with `options`.
pub fn parse_str_with(
    text: &str,
    file_name: &str,
    options: &LoadOptions,
) -> Result<RuleFile, FileError> {
    parse::parse(text, file_name, options)
}

/// Parses a rule file from raw bytes: refused when larger than the size
/// limit or not UTF-8.
pub fn parse_bytes(
    bytes: &[u8],
    file_name: &str,
    options: &LoadOptions,
) -> Result<RuleFile, FileError> {
    if bytes.len() > options.get_max_size() {
        return Err(parse::too_large(file_name, options));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let valid = &bytes[..e.valid_up_to()];
        let line = 1 + valid.iter().filter(|&&b| b == b'\n').count();
        let line_start = valid.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let column = 1 + String::from_utf8_lossy(&valid[line_start..])
            .chars()
            .count();
        FileError::one(
            file_name,
            Some(Position { line, column }),
            format!(
                "the file is not UTF-8 (invalid byte 0x{:02x} at offset {})",
                bytes[e.valid_up_to()],
                e.valid_up_to()
            ),
        )
    })?;
    parse::parse(text, file_name, options)
}

/// Reads and parses a rule file from `reader`, reading no more than the size
/// limit (plus one byte, to tell that it is over).
pub fn parse_reader<R: Read>(
    reader: R,
    file_name: &str,
    options: &LoadOptions,
) -> Result<RuleFile, FileError> {
    let bytes = read_limited(reader, options)
        .map_err(|e| FileError::one(file_name, None, format!("cannot read: {e}")))?;
    parse_bytes(&bytes, file_name, options)
}

/// Up to the size limit plus one byte: enough to tell that a file is over
/// it without reading all of a huge one.
pub(crate) fn read_limited<R: Read>(reader: R, options: &LoadOptions) -> std::io::Result<Vec<u8>> {
    let limit = u64::try_from(options.get_max_size())
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    let mut bytes = Vec::new();
    reader.take(limit).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Opens `path` (symlinks followed) for reading if it is a regular file,
/// and refuses anything else without reading it: a named pipe would block
/// the reader until some process writes to it, a device may never end or
/// act on being opened. On unix the file is opened non-blocking and its
/// type checked again on the open file, so a pipe swapped in between the
/// two checks cannot block either.
pub(crate) fn open_regular(path: &Path) -> std::io::Result<File> {
    let checked = |meta: &std::fs::Metadata| {
        if meta.is_file() {
            Ok(())
        } else {
            Err(std::io::Error::new(
                ErrorKind::InvalidInput,
                format!("{}, not a regular file", kind_of(meta)),
            ))
        }
    };
    checked(&std::fs::metadata(path)?)?;
    #[cfg(unix)]
    let file = {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
        File::from(rustix::fs::open(path, flags, Mode::empty())?)
    };
    #[cfg(not(unix))]
    let file = File::open(path)?;
    checked(&file.metadata()?)?;
    Ok(file)
}

/// The content of the regular file at `path`, up to the size limit plus
/// one byte.
pub(crate) fn read_regular(path: &Path, options: &LoadOptions) -> std::io::Result<Vec<u8>> {
    open_regular(path).and_then(|file| read_limited(file, options))
}

/// What a file that is not a regular one is, for an error.
fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    let kind = meta.file_type();
    if kind.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a named pipe";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
    }
    "a special file"
}

/// Reads and parses the rule file at `path` (symlinks followed). Only a
/// regular file is read (see the crate's README on limits).
pub fn load_file(path: impl AsRef<Path>, options: &LoadOptions) -> Result<RuleFile, FileError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let file =
        open_regular(path).map_err(|e| FileError::one(&name, None, format!("cannot open: {e}")))?;
    parse_reader(file, &name, options)
}

/// What a load put in force: the file's version and how many rules of each
/// kind.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reloaded {
    /// The file's `version:` value, if any.
    pub version: Option<String>,
    /// Rules per kind: `[("flow", 2), ("degrade", 1), ...]`, in the order of
    /// [`RuleBook`](sentinel_flow_core::RuleBook)'s fields.
    pub counts: [(&'static str, usize); 6],
    /// How many resources the file tracks percentiles of (its
    /// `track_percentiles` list, less `untracked`).
    pub tracked_percentiles: usize,
    /// Resources of `track_percentiles` that are not tracked: past the
    /// instance's resource cap (logged as well).
    pub untracked_percentiles: Vec<String>,
}

impl Reloaded {
    /// How many rules of `kind` (`"flow"`, `"degrade"`, ...).
    pub fn count(&self, kind: &str) -> usize {
        self.counts
            .iter()
            .find(|(name, _)| *name == kind)
            .map_or(0, |(_, n)| *n)
    }
}

/// Puts every rule of `file` in force on `sentinel` in one swap (see
/// [`Sentinel::load_rule_book`]): unchanged rules keep their state,
/// statistics are kept. Then tracks the percentiles of the resources of
/// `track_percentiles`, and stops tracking those an earlier file listed
/// that this one does not, unless code turned them on (see
/// [`Sentinel::track_percentiles_from_rules`]).
///
/// A file from [`parse_str`] or [`load_file`] is already validated; the
/// error can only come from a [`RuleFile`] built by hand, and then nothing
/// changes.
pub fn apply(sentinel: &Sentinel, file: RuleFile) -> Result<Reloaded, RuleErrors> {
    let counts = file.book.counts();
    sentinel.load_rule_book(file.book)?;
    let untracked = sentinel.track_percentiles_from_rules(&file.track_percentiles);
    Ok(Reloaded {
        version: file.version,
        counts,
        tracked_percentiles: file.track_percentiles.len() - untracked.len(),
        untracked_percentiles: untracked,
    })
}
