//! Reading the metric log back.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::PathBuf;

use super::MetricLine;
use super::date::date;
use super::files;

/// Reads the metric log files of one app, across rolled files, oldest
/// first.
///
/// ```
/// use sentinel_core::log::MetricSearcher;
///
/// let dir = std::env::temp_dir().join("no-such-sentinel-dir");
/// let lines = MetricSearcher::new(&dir, "orders").find(0, u64::MAX, None)?;
/// assert!(lines.is_empty());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct MetricSearcher {
    dir: PathBuf,
    app: String,
}

impl MetricSearcher {
    /// A reader of the files of `app` in `dir`.
    pub fn new(dir: impl Into<PathBuf>, app: impl Into<String>) -> Self {
        MetricSearcher {
            dir: dir.into(),
            app: app.into(),
        }
    }

    /// Every line with a timestamp in `from_ms..=to_ms`, of `resource` when
    /// given, in the order written. Lines that do not parse (a line cut short by a crash, bytes that are
    /// not UTF-8) are skipped; a
    /// missing directory holds no lines.
    pub fn find(
        &self,
        from_ms: u64,
        to_ms: u64,
        resource: Option<&str>,
    ) -> io::Result<Vec<MetricLine>> {
        let (first_day, last_day) = (date(from_ms), date(to_ms));
        let mut found = Vec::new();
        for file in files::list(&self.dir, &self.app, files::METRICS)? {
            // A file holds the lines of the day it is named after.
            if file.date < first_day || file.date > last_day {
                continue;
            }
            let reader = match File::open(&file.path) {
                Ok(f) => BufReader::new(f),
                // Deleted by the writer's rolling since it was listed.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            for line in reader.split(b'\n') {
                let line = line?;
                let Some(line) = std::str::from_utf8(&line).ok().and_then(MetricLine::parse) else {
                    continue;
                };
                if (from_ms..=to_ms).contains(&line.timestamp_ms)
                    && resource.is_none_or(|r| r == line.resource)
                {
                    found.push(line);
                }
            }
        }
        Ok(found)
    }
}
