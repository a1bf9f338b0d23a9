//! What a source's watcher thread and its stores share: the values in
//! force, taken one apply at a time, the state and the listeners.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use sentinel_flow_core::Sentinel;

use super::{KeyValue, Known, RuleFormat, SourceState, Values, backup};
use crate::error::{FileError, Problem};
use crate::load::{Reloaded, apply};
use crate::options::LoadOptions;

pub(super) type SuccessListener = Arc<dyn Fn(&Reloaded) + Send + Sync>;
pub(super) type FailureListener = Arc<dyn Fn(&FileError) + Send + Sync>;

/// What came of taking values: nothing new, or a load to tell.
pub(super) type Outcome = Option<Result<Reloaded, FileError>>;

pub(super) struct Shared {
    pub(super) name: String,
    pub(super) format: RuleFormat,
    pub(super) options: LoadOptions,
    pub(super) backup: Option<PathBuf>,
    /// The values last taken (put in force or refused), `None` before the
    /// first. Held across a read and its apply, and across a write and
    /// its apply: one apply at a time, and no read from before a write is
    /// applied after it. A rule file's stores share it.
    pub(super) known: Known,
    state: Mutex<SourceState>,
    /// A failure while down was logged (once until connected again).
    down_told: AtomicBool,
    /// Failures to reach the store are told to the failure listeners too
    /// (a rule file's: gone, unreadable), each once while it lasts.
    tell_lost: bool,
    /// The failure to reach the store last told (with `tell_lost`),
    /// forgotten when the store answers.
    last_told: Mutex<Option<String>>,
    pub(super) on_success: Vec<SuccessListener>,
    pub(super) on_failure: Vec<FailureListener>,
}

impl Shared {
    pub(super) fn new(
        name: String,
        format: RuleFormat,
        options: LoadOptions,
        backup: Option<PathBuf>,
        on_success: Vec<SuccessListener>,
        on_failure: Vec<FailureListener>,
        (known, tell_lost): (Known, bool),
    ) -> Self {
        Shared {
            state: Mutex::new(SourceState {
                name: name.clone(),
                ..SourceState::default()
            }),
            down_told: AtomicBool::new(false),
            tell_lost,
            last_told: Mutex::new(None),
            name,
            format,
            options,
            backup,
            known,
            on_success,
            on_failure,
        }
    }

    pub(super) fn state(&self) -> SourceState {
        self.state.lock().clone()
    }

    /// Takes `values` under the `known` lock the caller holds: decodes the
    /// whole set and puts it in force in one swap, or refuses it (the
    /// rules in force stay). Values already taken change nothing.
    pub(super) fn take(
        &self,
        sentinel: &Sentinel,
        known: &mut Option<Values>,
        values: Values,
        from_backup: bool,
    ) -> Outcome {
        // A value caught while it is written: the source asks again.
        if values
            .entries
            .iter()
            .any(|(_, v)| matches!(v, KeyValue::Unsettled))
        {
            return None;
        }
        if known.as_ref().map(|k| &k.entries) == Some(&values.entries) {
            let mut state = self.state.lock();
            if state.from_last_known_good && !from_backup {
                state.from_last_known_good = false;
                tracing::info!(source = %self.name, "sentinel-flow-rules: the store answered with the rules of the last-known-good copy; following the store");
            }
            // The rules in force, at a revision of the store's not known
            // when they were put in force (a write through a store).
            if !from_backup && values.revision.is_some() {
                state.revision = Some(values.revision_or_hash());
                if let Some(known) = known.as_mut() {
                    known.revision = values.revision;
                }
            }
            return None;
        }
        let options = self.options.for_instance(sentinel);
        let load = || {
            let file = self.format.decode(&self.name, &values, &options)?;
            apply(sentinel, file).map_err(|errors| {
                let problems = errors.errors().iter();
                let problems = problems.map(|e| Problem::new(None, e.to_string()));
                FileError::new(&self.name, problems.collect())
            })
        };
        let outcome = catch_unwind(AssertUnwindSafe(load)).unwrap_or_else(|panic| {
            Err(FileError::one(
                &self.name,
                None,
                format!("loading the rules panicked: {}", panic_message(&*panic)),
            ))
        });
        let mut state = self.state.lock();
        match &outcome {
            Ok(_) => {
                state.applies += 1;
                state.revision = Some(values.revision_or_hash());
                state.applied_at_ms = Some(sentinel.now_ms());
                state.last_error = None;
                if from_backup {
                    state.from_last_known_good = true;
                } else {
                    if state.from_last_known_good {
                        tracing::info!(source = %self.name, "sentinel-flow-rules: the store answered; its rules replace the last-known-good copy");
                    }
                    state.from_last_known_good = false;
                    if let Some(path) = &self.backup
                        && let Err(e) = backup::save(path, &self.name, &values)
                    {
                        tracing::warn!(source = %self.name, path = %path.display(), error = %e, "sentinel-flow-rules: the last-known-good copy could not be written");
                    }
                }
            }
            Err(error) => {
                state.refusals += 1;
                state.last_error = Some(error.to_string());
            }
        }
        drop(state);
        *known = Some(values);
        Some(outcome)
    }

    /// Tells listeners (and the log) what [`take`](Self::take) did; call
    /// it with the `known` lock released, so a listener may write.
    pub(super) fn tell(&self, outcome: Outcome) {
        match outcome {
            None => {}
            Some(Ok(reloaded)) => {
                tracing::info!(source = %self.name, counts = ?reloaded.counts, "sentinel-flow-rules: rules loaded from the store");
                for listener in &self.on_success {
                    if catch_unwind(AssertUnwindSafe(|| listener(&reloaded))).is_err() {
                        tracing::error!("sentinel-flow-rules: a success listener panicked");
                    }
                }
            }
            Some(Err(error)) => {
                tracing::warn!(source = %self.name, %error, "sentinel-flow-rules: rules from the store refused; the rules in force are kept");
                for listener in &self.on_failure {
                    if catch_unwind(AssertUnwindSafe(|| listener(&error))).is_err() {
                        tracing::error!("sentinel-flow-rules: a failure listener panicked");
                    }
                }
            }
        }
    }

    /// The watcher stopped: the store is no longer followed.
    pub(super) fn stopped(&self) {
        self.state.lock().connected = false;
    }

    /// The store answered: logged when it had not.
    pub(super) fn connected(&self) {
        let mut state = self.state.lock();
        if !state.connected {
            state.connected = true;
            self.down_told.store(false, Ordering::Relaxed);
            *self.last_told.lock() = None;
            tracing::info!(source = %self.name, "sentinel-flow-rules: rule source connected");
        }
    }

    /// The store failed: logged when it was connected, or on the first
    /// failure; later failures while it stays down only update the state.
    pub(super) fn failed(&self, error: &super::SourceError) {
        let mut state = self.state.lock();
        if state.connected {
            state.disconnects += 1;
            tracing::warn!(source = %self.name, %error, "sentinel-flow-rules: rule source lost; the rules in force are kept, reconnecting");
        } else if !self.down_told.swap(true, Ordering::Relaxed) {
            tracing::warn!(source = %self.name, %error, "sentinel-flow-rules: rule source unreachable; reconnecting");
        }
        self.down_told.store(true, Ordering::Relaxed);
        state.connected = false;
        state.last_error = Some(error.to_string());
        drop(state);
        if self.tell_lost {
            let message = error.to_string();
            let mut last = self.last_told.lock();
            if last.as_deref() == Some(message.as_str()) {
                return;
            }
            *last = Some(message.clone());
            drop(last);
            let error = FileError::one(&self.name, None, message);
            for listener in &self.on_failure {
                if catch_unwind(AssertUnwindSafe(|| listener(&error))).is_err() {
                    tracing::error!("sentinel-flow-rules: a failure listener panicked");
                }
            }
        }
    }
}

/// A panic's message, when it has one.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    if let Some(message) = panic.downcast_ref::<&str>() {
        message
    } else if let Some(message) = panic.downcast_ref::<String>() {
        message
    } else {
        "(no message)"
    }
}
