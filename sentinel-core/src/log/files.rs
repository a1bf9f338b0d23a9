//! Metric log file names: `${app}-metrics.log.${yyyy-MM-dd}[.n]`.

use std::io;
use std::path::{Path, PathBuf};

/// One metric log file of an app.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct LogFile {
    /// `yyyy-MM-dd`, the day of its lines (UTC).
    pub(crate) date: String,
    /// 0 for the first file of the day, then 1, 2...
    pub(crate) index: u32,
    pub(crate) path: PathBuf,
}

fn prefix(app: &str) -> String {
    format!("{app}-metrics.log.")
}

/// The name of file `index` of `date`.
pub(crate) fn file_name(app: &str, date: &str, index: u32) -> String {
    match index {
        0 => format!("{}{date}", prefix(app)),
        n => format!("{}{date}.{n}", prefix(app)),
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
fn parse_name(app: &str, name: &str) -> Option<(String, u32)> {
    let rest = name.strip_prefix(&prefix(app))?;
    let (date, index) = match rest.split_once('.') {
        Some((date, n)) => (date, n.parse().ok().filter(|&n| n > 0)?),
        None => (rest, 0),
    };
    is_date(date).then(|| (date.to_owned(), index))
}

/// The metric log files of `app` in `dir`, oldest first; none if the
/// directory does not exist.
pub(crate) fn list(dir: &Path, app: &str) -> io::Result<Vec<LogFile>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some((date, index)) = name.to_str().and_then(|n| parse_name(app, n)) else {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        assert_eq!(
            file_name("app", "2024-01-31", 0),
            "app-metrics.log.2024-01-31"
        );
        assert_eq!(
            file_name("app", "2024-01-31", 3),
            "app-metrics.log.2024-01-31.3"
        );
        assert_eq!(
            parse_name("app", "app-metrics.log.2024-01-31.3"),
            Some(("2024-01-31".into(), 3))
        );
        assert_eq!(
            parse_name("app", "app-metrics.log.2024-01-31"),
            Some(("2024-01-31".into(), 0))
        );
        for other in [
            "other-metrics.log.2024-01-31",
            "app-metrics.log.2024-01-31.idx",
            "app-metrics.log.2024-01-31.0",
            "app-metrics.log.20240131",
        ] {
            assert_eq!(parse_name("app", other), None, "{other}");
        }
    }
}
