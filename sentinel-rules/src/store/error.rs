//! `StoreError`: why a rule change was not written (and nothing changed).

use std::fmt;
use std::path::PathBuf;

/// Why [`RuleFileStore::replace`](crate::RuleFileStore::replace) refused a
/// change. In every case the file and the rules in force are as they were.
#[non_exhaustive]
#[derive(Debug)]
pub enum StoreError {
    /// The new rules, or the rest of the file they would be written into,
    /// do not validate: every problem, one line each, as a file load
    /// reports them (`rules.yaml:9:5: degrade[0] (a): ...` for the rest of
    /// the file; `flow[1] (GET:/a): count ...` for the new rules).
    Invalid(Vec<String>),
    /// The file on disk is not what this process last loaded or wrote:
    /// someone else changed it, and writing would lose their edit.
    Conflict {
        /// The rule file.
        path: PathBuf,
        /// What differs: changed content, or the file is gone.
        reason: String,
    },
    /// Reading, writing, syncing or renaming failed (the message names
    /// the step and the file).
    Io(std::io::Error),
}

impl StoreError {
    /// Each problem as one line, for an HTTP answer or a log.
    pub fn lines(&self) -> Vec<String> {
        match self {
            StoreError::Invalid(lines) => lines.clone(),
            other => vec![other.to_string()],
        }
    }

    pub(crate) fn io(step: &str, path: &std::path::Path, error: std::io::Error) -> Self {
        let message = format!("cannot {step} {}: {error}", path.display());
        StoreError::Io(std::io::Error::new(error.kind(), message))
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Invalid(lines) => {
                write!(f, "rules refused, nothing written:")?;
                for line in lines {
                    write!(f, "\n{line}")?;
                }
                Ok(())
            }
            StoreError::Conflict { path, reason } => write!(
                f,
                "conflict: the rule file {} {reason} since this process last loaded or wrote \
                 it; nothing written: reload the rules (the file's watcher does within its \
                 interval) and retry",
                path.display()
            ),
            StoreError::Io(error) => write!(f, "rule file not written: {error}"),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Io(error) => Some(error),
            _ => None,
        }
    }
}
