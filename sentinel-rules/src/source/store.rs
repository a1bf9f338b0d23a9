//! `SourceStore`: a kind's new rules written to the store, guarded by the
//! value this instance last read, then put in force.

use std::fmt;
use std::sync::Arc;

use sentinel_flow_core::Sentinel;

use super::shared::Shared;
use super::{KeyValue, RuleWriter, WriteFailure};
use crate::change::RuleChange;

/// Writes rules changed through an API (the dashboard's `setRules`) to a
/// writable source: [`SourceHandle::store`](super::SourceHandle::store).
///
/// [`replace`](Self::replace) makes the new value of the kind's key from
/// the values in force (our YAML: the whole rule set with that kind's
/// list replaced; Sentinel's JSON: the kind's array), validates the whole
/// rule set it gives, writes it only if the key still holds what this
/// instance last read (else [`SourceWriteError::Conflict`]: another writer
/// came first, and nothing is written), then puts it in force here at
/// once; the other instances take it from the store. Writes and the
/// watcher's applies run one at a time.
#[derive(Clone)]
pub struct SourceStore {
    shared: Arc<Shared>,
    writer: Arc<dyn RuleWriter>,
}

/// Why [`SourceStore::replace`] refused a change; nothing was written and
/// the rules in force are as they were.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SourceWriteError {
    /// The rules, or the rule set they would make, do not validate: every
    /// problem, one line each.
    Invalid(Vec<String>),
    /// The key no longer holds what this instance last read: another
    /// writer changed it; the watcher takes that change, then retry.
    Conflict {
        /// The key.
        key: String,
        /// What the store said.
        reason: String,
    },
    /// The store was not reached, or its rules were never read.
    Unavailable(String),
}

impl SourceWriteError {
    /// Each problem as one line, for an HTTP answer or a log.
    pub fn lines(&self) -> Vec<String> {
        match self {
            SourceWriteError::Invalid(lines) => lines.clone(),
            other => vec![other.to_string()],
        }
    }
}

impl fmt::Display for SourceWriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SourceWriteError::Invalid(lines) => {
                f.write_str("rules refused, nothing written:")?;
                for line in lines {
                    write!(f, "\n{line}")?;
                }
                Ok(())
            }
            SourceWriteError::Conflict { key, reason } => write!(
                f,
                "conflict: the key {key} changed since this instance last read it ({reason}); \
                 nothing written: the source's watcher loads the new value, then retry"
            ),
            SourceWriteError::Unavailable(why) => write!(f, "rules not written: {why}"),
        }
    }
}

impl std::error::Error for SourceWriteError {}

impl SourceStore {
    pub(super) fn new(shared: Arc<Shared>, writer: Arc<dyn RuleWriter>) -> Self {
        SourceStore { shared, writer }
    }

    /// Writes `change` to the store and puts it in force on `sentinel`
    /// (see the type's documentation). Blocks on the store's I/O.
    pub fn replace(&self, sentinel: &Sentinel, change: RuleChange) -> Result<(), SourceWriteError> {
        let shared = &self.shared;
        let mut known = shared.known.lock();
        let Some(current) = known.clone() else {
            return Err(SourceWriteError::Unavailable(format!(
                "the rules of {} were never read; nothing written",
                shared.name
            )));
        };
        if shared.state().from_last_known_good {
            return Err(SourceWriteError::Unavailable(format!(
                "the rules in force come from the last-known-good copy, not from {}; nothing written",
                shared.name
            )));
        }
        let options = shared.options.for_instance(sentinel);
        let (key, value) = shared
            .format
            .encode(&shared.name, &current, &change, &options)
            .map_err(SourceWriteError::Invalid)?;
        let mut next = current.clone();
        next.revision = None;
        let new_value = KeyValue::Present(value.clone());
        match next.entries.iter_mut().find(|(k, _)| *k == key) {
            Some((_, slot)) => *slot = new_value,
            None => next.entries.push((key.clone(), new_value)),
        }
        // The whole set validated before anything is written.
        shared
            .format
            .decode(&shared.name, &next, &options)
            .map_err(|e| SourceWriteError::Invalid(e.lines()))?;
        let expected = match current.get(&key) {
            KeyValue::Present(bytes) => Some(bytes.as_slice()),
            KeyValue::Missing => None,
            other => {
                return Err(SourceWriteError::Conflict {
                    key,
                    reason: format!("it held a value that was refused ({other:?})"),
                });
            }
        };
        self.writer
            .compare_and_set(&key, expected, &value)
            .map_err(|failure| match failure {
                WriteFailure::Conflict(reason) => SourceWriteError::Conflict {
                    key: key.clone(),
                    reason,
                },
                WriteFailure::Unavailable(why) => SourceWriteError::Unavailable(why),
            })?;
        let outcome = shared.take(sentinel, &mut known, next, false);
        drop(known);
        tracing::info!(source = %shared.name, %key, kind = change.kind(), rules = change.len(), "sentinel-flow-rules: rules written to the store");
        match outcome {
            Some(Err(error)) => {
                let lines = error.lines();
                shared.tell(Some(Err(error)));
                Err(SourceWriteError::Invalid(lines))
            }
            outcome => {
                shared.tell(outcome);
                Ok(())
            }
        }
    }
}

impl fmt::Debug for SourceStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceStore")
            .field("source", &self.shared.name)
            .finish_non_exhaustive()
    }
}
