//! Where each second starts in a metric log file, learnt incrementally, so
//! that a reader asking for the last seconds (the dashboard, every second)
//! seeks to them instead of reading the whole day's file again.
//!
//! Sentinel keeps the same index in `.idx` files beside the log; ours is in
//! memory, per reader, built from the bytes appended since the last read.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// The seconds of one file.
#[derive(Debug, Default)]
pub(crate) struct FileIndex {
    /// Bytes indexed: up to the end of the last whole line seen.
    scanned: u64,
    /// `(timestamp, offset of its first line)`, timestamps increasing.
    seconds: Vec<(u64, u64)>,
    /// False once a line's time went back (two writers on one file):
    /// the file is then read whole.
    ordered: bool,
}

/// What to read of a file for a time range.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Span {
    /// Nothing in the range.
    Skip,
    /// `len` bytes from `start`: whole lines, the first of the range first.
    Bytes { start: u64, len: u64 },
}

/// The indexes of every file a reader has seen.
#[derive(Debug, Default)]
pub(crate) struct Indexes {
    files: HashMap<PathBuf, FileIndex>,
}

impl Indexes {
    /// Brings the index of `path` up to date and says what to read of it
    /// for `from_ms..=to_ms`.
    pub(crate) fn span(&mut self, path: &Path, from_ms: u64, to_ms: u64) -> io::Result<Span> {
        let index = self
            .files
            .entry(path.to_owned())
            .or_insert_with(|| FileIndex {
                ordered: true,
                ..FileIndex::default()
            });
        index.update(path)?;
        Ok(index.span(from_ms, to_ms))
    }

    /// Forgets the files not in `present` (deleted by rolling).
    pub(crate) fn retain(&mut self, present: &[PathBuf]) {
        self.files.retain(|path, _| present.contains(path));
    }
}

impl FileIndex {
    /// Reads the whole lines appended since the last update.
    fn update(&mut self, path: &Path) -> io::Result<()> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        if len < self.scanned {
            // Shorter than what was indexed: not the same file any more.
            *self = FileIndex {
                ordered: true,
                ..FileIndex::default()
            };
        }
        if len == self.scanned {
            return Ok(());
        }
        file.seek(SeekFrom::Start(self.scanned))?;
        let mut reader = BufReader::new(file.take(len - self.scanned));
        let mut line = Vec::with_capacity(128);
        loop {
            line.clear();
            let read = reader.read_until(b'\n', &mut line)?;
            if read == 0 || line.last() != Some(&b'\n') {
                // The end, or a line still being written: indexed later.
                return Ok(());
            }
            if let Some(ts) = timestamp(&line) {
                match self.seconds.last() {
                    Some(&(last, _)) if ts < last => self.ordered = false,
                    Some(&(last, _)) if ts == last => {}
                    _ => self.seconds.push((ts, self.scanned)),
                }
            }
            self.scanned += read as u64;
        }
    }

    fn span(&self, from_ms: u64, to_ms: u64) -> Span {
        if !self.ordered {
            return Span::Bytes {
                start: 0,
                len: self.scanned,
            };
        }
        let first = self.seconds.partition_point(|&(ts, _)| ts < from_ms);
        match self.seconds.get(first) {
            Some(&(ts, start)) if ts <= to_ms => {
                let end = self.seconds[first..]
                    .iter()
                    .find(|&&(ts, _)| ts > to_ms)
                    .map_or(self.scanned, |&(_, offset)| offset);
                Span::Bytes {
                    start,
                    len: end - start,
                }
            }
            _ => Span::Skip,
        }
    }
}

/// The leading timestamp of a line, if it has one.
fn timestamp(line: &[u8]) -> Option<u64> {
    let end = line.iter().position(|&b| b == b'|')?;
    std::str::from_utf8(&line[..end]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn line(ts: u64, resource: &str) -> String {
        format!("{ts}|date|{resource}|1|0|1|0|0|0|0|0\n")
    }

    fn read(path: &Path, span: Span) -> String {
        let Span::Bytes { start, len } = span else {
            return String::new();
        };
        let mut file = File::open(path).unwrap();
        file.seek(SeekFrom::Start(start)).unwrap();
        let mut text = String::new();
        file.take(len).read_to_string(&mut text).unwrap();
        text
    }

    #[test]
    fn seeks_to_the_seconds_asked_and_follows_appends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app-metrics.log.2023-11-14");
        let mut file = File::create(&path).unwrap();
        for s in 1..=5 {
            file.write_all(line(s * 1000, "a").as_bytes()).unwrap();
            file.write_all(line(s * 1000, "b").as_bytes()).unwrap();
        }
        let mut indexes = Indexes::default();
        let span = indexes.span(&path, 2000, 3000).unwrap();
        assert_eq!(
            read(&path, span),
            [
                line(2000, "a"),
                line(2000, "b"),
                line(3000, "a"),
                line(3000, "b")
            ]
            .concat()
        );
        assert_eq!(indexes.span(&path, 6000, 9000).unwrap(), Span::Skip);
        assert_eq!(indexes.span(&path, 0, 500).unwrap(), Span::Skip);

        // A line being written is not read until it is whole.
        file.write_all(b"6000|date|a|1|0").unwrap();
        assert_eq!(indexes.span(&path, 6000, 9000).unwrap(), Span::Skip);
        file.write_all(b"|1|0|0|0|0|0\n").unwrap();
        let span = indexes.span(&path, 5500, 9000).unwrap();
        assert_eq!(read(&path, span), line(6000, "a"));
    }

    #[test]
    fn a_file_out_of_order_or_replaced_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, [line(3000, "a"), line(1000, "a")].concat()).unwrap();
        let mut indexes = Indexes::default();
        let span = indexes.span(&path, 1000, 1000).unwrap();
        assert_eq!(
            read(&path, span),
            [line(3000, "a"), line(1000, "a")].concat()
        );
        std::fs::write(&path, line(7000, "b")).unwrap();
        let span = indexes.span(&path, 7000, 7000).unwrap();
        assert_eq!(read(&path, span), line(7000, "b"));
    }
}
