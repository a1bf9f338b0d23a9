//! Log files: `${app}-${kind}.log.${yyyy-MM-dd}[.n]` (kind `metrics` or
//! `block`), appended to and rolled by size and count.

use std::fs::{File, OpenOptions};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use super::date::date;

/// One log file of an app.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct LogFile {
    /// `yyyy-MM-dd`, the day of its lines (UTC).
    pub(crate) date: String,
    /// 0 for the first file of the day, then 1, 2...
    pub(crate) index: u32,
    pub(crate) path: PathBuf,
}

/// The metric log's kind of file.
pub(crate) const METRICS: &str = "metrics";
/// The block log's kind of file.
pub(crate) const BLOCK: &str = "block";

fn prefix(app: &str, kind: &str) -> String {
    format!("{app}-{kind}.log.")
}

/// The name of file `index` of `date`.
pub(crate) fn file_name(app: &str, kind: &str, date: &str, index: u32) -> String {
    match index {
        0 => format!("{}{date}", prefix(app, kind)),
        n => format!("{}{date}.{n}", prefix(app, kind)),
    }
}

fn is_date(s: &str) -> bool {
    s.len() == 10
        && s.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        })
}

/// `(date, index)` of a file named for `app`.
fn parse_name(app: &str, kind: &str, name: &str) -> Option<(String, u32)> {
    let rest = name.strip_prefix(&prefix(app, kind))?;
    let (date, index) = match rest.split_once('.') {
        Some((date, n)) => (date, n.parse().ok().filter(|&n| n > 0)?),
        None => (rest, 0),
    };
    is_date(date).then(|| (date.to_owned(), index))
}

/// The log files of `app` and `kind` in `dir`, oldest first; none if the
/// directory does not exist.
pub(crate) fn list(dir: &Path, app: &str, kind: &str) -> io::Result<Vec<LogFile>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some((date, index)) = name.to_str().and_then(|n| parse_name(app, kind, n)) else {
            continue;
        };
        files.push(LogFile {
            date,
            index,
            path: entry.path(),
        });
    }
    files.sort();
    Ok(files)
}

/// The file being appended to.
#[derive(Debug)]
struct Current {
    file: File,
    info: LogFile,
    size: u64,
}

/// Appends to the files of one app and kind, starting a new file past a
/// size or a day and deleting the oldest past a count.
#[derive(Debug)]
pub(crate) struct RollingFiles {
    dir: PathBuf,
    app: String,
    kind: &'static str,
    max_file_size: u64,
    max_files: usize,
    current: Option<Current>,
}

impl RollingFiles {
    pub(crate) fn new(
        dir: PathBuf,
        app: String,
        kind: &'static str,
        max_file_size: u64,
        max_files: usize,
    ) -> Self {
        RollingFiles {
            dir,
            app,
            kind,
            max_file_size,
            max_files,
            current: None,
        }
    }

    /// Appends `bytes` (never split across files) to the file of the day of
    /// `timestamp_ms`.
    pub(crate) fn append(&mut self, timestamp_ms: u64, bytes: &[u8]) -> io::Result<()> {
        let result = self.try_append(timestamp_ms, bytes);
        if result.is_err() {
            // Reopen next time: the directory may have been replaced.
            self.current = None;
        }
        result
    }

    fn try_append(&mut self, timestamp_ms: u64, bytes: &[u8]) -> io::Result<()> {
        let day = date(timestamp_ms);
        let len = bytes.len() as u64;
        let current = match self.current.take() {
            Some(c)
                if c.info.date == day && (c.size == 0 || c.size + len <= self.max_file_size) =>
            {
                c
            }
            Some(c) if c.info.date == day => self.create(&day, c.info.index + 1)?,
            _ => self.open(&day, len)?,
        };
        let current = self.current.insert(current);
        current.file.write_all(bytes)?;
        current.size += len;
        Ok(())
    }

    /// The file to append `len` bytes of `day` to: the day's last file if
    /// they fit, else a new one.
    fn open(&mut self, day: &str, len: u64) -> io::Result<Current> {
        std::fs::create_dir_all(&self.dir)?;
        let last = list(&self.dir, &self.app, self.kind)?
            .into_iter()
            .rfind(|f| f.date == day);
        let Some(last) = last else {
            return self.create(day, 0);
        };
        let size = std::fs::metadata(&last.path)?.len();
        if size == 0 || size + len <= self.max_file_size {
            let file = OpenOptions::new().append(true).open(&last.path)?;
            return Ok(Current {
                file,
                info: last,
                size,
            });
        }
        self.create(day, last.index + 1)
    }

    /// Starts file `index` of `day` and deletes the oldest files past the
    /// count.
    fn create(&mut self, day: &str, index: u32) -> io::Result<Current> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.dir.join(file_name(&self.app, self.kind, day, index));
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        let size = file.metadata()?.len();
        let info = LogFile {
            date: day.to_owned(),
            index,
            path,
        };
        let all = list(&self.dir, &self.app, self.kind)?;
        let excess = all.len().saturating_sub(self.max_files);
        for old in all.iter().filter(|f| **f != info).take(excess) {
            match std::fs::remove_file(&old.path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(Current { file, info, size })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(
            file_name("app", METRICS, "2024-01-31", 0),
            "app-metrics.log.2024-01-31"
        );
        assert_eq!(
            file_name("app", METRICS, "2024-01-31", 3),
            "app-metrics.log.2024-01-31.3"
        );
        assert_eq!(
            parse_name("app", METRICS, "app-metrics.log.2024-01-31.3"),
            Some(("2024-01-31".into(), 3))
        );
        assert_eq!(
            parse_name("app", METRICS, "app-metrics.log.2024-01-31"),
            Some(("2024-01-31".into(), 0))
        );
        for other in [
            "other-metrics.log.2024-01-31",
            "app-metrics.log.2024-01-31.idx",
            "app-metrics.log.2024-01-31.0",
            "app-metrics.log.20240131",
            "app-block.log.2024-01-31",
        ] {
            assert_eq!(parse_name("app", METRICS, other), None, "{other}");
        }
    }
}
