//! Reading the metric log back.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use super::MetricLine;
use super::date::date;
use super::files;
use super::index::{Indexes, Span};

/// Reads the metric log files of one app, across rolled files, oldest
/// first.
///
/// A searcher remembers where each second starts in the files it has read
/// (clones share this), so that asking again for recent seconds reads only
/// them and the lines appended since.
///
/// ```
/// use sentinel_flow_core::log::MetricSearcher;
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
    indexes: Arc<Mutex<Indexes>>,
}

impl MetricSearcher {
    /// A reader of the files of `app` in `dir`.
    pub fn new(dir: impl Into<PathBuf>, app: impl Into<String>) -> Self {
        MetricSearcher {
            dir: dir.into(),
            app: app.into(),
            indexes: Arc::default(),
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
        let listed = files::list(&self.dir, &self.app, files::METRICS)?;
        self.indexes
            .lock()
            .retain(&listed.iter().map(|f| f.path.clone()).collect::<Vec<_>>());
        for file in listed {
            // A file holds the lines of the day it is named after.
            if file.date < first_day || file.date > last_day {
                continue;
            }
            let span = match self.indexes.lock().span(&file.path, from_ms, to_ms) {
                Ok(span) => span,
                // Deleted by the writer's rolling since it was listed.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            let Span::Bytes { start, len } = span else {
                continue;
            };
            let mut file = match File::open(&file.path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            file.seek(SeekFrom::Start(start))?;
            for line in BufReader::new(file.take(len)).split(b'\n') {
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
