//! Where `setRules` puts a rule list: the instance's managers (Sentinel's
//! default, in memory) or, with a rule file or a writable rule source,
//! the file or the store and then the instance.

use axum::http::StatusCode;
use sentinel_flow_rules::source::{SourceStore, SourceWriteError};
use sentinel_flow_rules::{RuleChange, RuleFileStore, StoreError};

use crate::shared::SentinelRef;

/// The destination of rule changes.
#[derive(Debug)]
pub(crate) enum RuleSink {
    /// The instance's managers only, as Sentinel does by default.
    Memory,
    /// The rule file first, then the instance (from the whole file).
    File(RuleFileStore),
    /// A rule source's store first (a guarded write), then the instance.
    Source(SourceStore),
}

/// Why a change was refused: the HTTP status and every problem as a line.
pub(crate) type Refused = (StatusCode, Vec<String>);

impl RuleSink {
    /// Applies `change`; on error nothing changed.
    pub(crate) async fn apply(
        &self,
        sentinel: &SentinelRef,
        change: RuleChange,
    ) -> Result<(), Refused> {
        match self {
            RuleSink::Memory => change.load_into(sentinel).map_err(|e| {
                let lines = e.errors().iter().map(ToString::to_string).collect();
                (StatusCode::BAD_REQUEST, lines)
            }),
            RuleSink::Source(store) => {
                let (store, sentinel) = (store.clone(), SentinelRef::clone(sentinel));
                // The store's I/O blocks: off the async threads.
                let written =
                    tokio::task::spawn_blocking(move || store.replace(&sentinel, change)).await;
                match written {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => {
                        let status = match &e {
                            SourceWriteError::Invalid(_) => StatusCode::BAD_REQUEST,
                            SourceWriteError::Conflict { .. } => StatusCode::CONFLICT,
                            _ => StatusCode::SERVICE_UNAVAILABLE,
                        };
                        if status == StatusCode::SERVICE_UNAVAILABLE {
                            tracing::warn!(error = %e, "sentinel command center: the rule store could not be written");
                        }
                        Err((status, e.lines()))
                    }
                    Err(e) => {
                        let why = if e.is_panic() {
                            crate::server::panic_message(e.into_panic().as_ref())
                        } else {
                            e.to_string()
                        };
                        tracing::error!(%why, "sentinel command center: a rule store write failed");
                        Err((
                            StatusCode::INTERNAL_SERVER_ERROR,
                            vec![format!("rules not written: {why}")],
                        ))
                    }
                }
            }
            RuleSink::File(store) => {
                let (store, sentinel) = (store.clone(), SentinelRef::clone(sentinel));
                // Writing the file syncs it to disk: off the async threads.
                let written =
                    tokio::task::spawn_blocking(move || store.replace(&sentinel, change)).await;
                match written {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => {
                        let status = status(&e);
                        if status == StatusCode::INTERNAL_SERVER_ERROR {
                            // Out of descriptors or disk, most often: said
                            // in the log as well as in the answer.
                            tracing::warn!(error = %e, "sentinel command center: the rule file could not be written");
                        }
                        Err((status, e.lines()))
                    }
                    Err(e) => {
                        let why = if e.is_panic() {
                            crate::server::panic_message(e.into_panic().as_ref())
                        } else {
                            e.to_string()
                        };
                        tracing::error!(%why, "sentinel command center: a rule file write failed");
                        Err((
                            StatusCode::INTERNAL_SERVER_ERROR,
                            vec![format!("rule file not written: {why}")],
                        ))
                    }
                }
            }
        }
    }
}

fn status(error: &StoreError) -> StatusCode {
    match error {
        StoreError::Invalid(_) => StatusCode::BAD_REQUEST,
        StoreError::Conflict { .. } => StatusCode::CONFLICT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}
