//! Where `setRules` puts a rule list: the instance's managers (Sentinel's
//! default, in memory) or, with a rule file or a writable rule source,
//! the file or the store and then the instance.

use axum::http::StatusCode;
use sentinel_flow_core::Sentinel;
use sentinel_flow_core::authority::AuthorityRule;
use sentinel_flow_core::degrade::DegradeRule;
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::param_flow::ParamFlowRule;
use sentinel_flow_core::system::SystemRule;
use sentinel_flow_rules::source::{SourceStore, SourceWriteError};
use sentinel_flow_rules::{RuleChange, RuleFileStore, StoreError};

use crate::shared::SentinelRef;

/// A whole new list of one kind.
#[derive(Debug)]
pub(crate) enum Change {
    Flow(Vec<FlowRule>),
    Degrade(Vec<DegradeRule>),
    System(Vec<SystemRule>),
    Authority(Vec<AuthorityRule>),
    ParamFlow(Vec<ParamFlowRule>),
}

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
        change: Change,
    ) -> Result<(), Refused> {
        match self {
            RuleSink::Memory => load(sentinel, change).map_err(|e| {
                let lines = e.errors().iter().map(ToString::to_string).collect();
                (StatusCode::BAD_REQUEST, lines)
            }),
            RuleSink::Source(store) => {
                let (store, sentinel) = (store.clone(), SentinelRef::clone(sentinel));
                // The store's I/O blocks: off the async threads.
                let written = tokio::task::spawn_blocking(move || {
                    store.replace(&sentinel, file_change(change))
                })
                .await;
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
                let written = tokio::task::spawn_blocking(move || {
                    store.replace(&sentinel, file_change(change))
                })
                .await;
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

fn file_change(change: Change) -> RuleChange {
    match change {
        Change::Flow(rules) => RuleChange::Flow(rules),
        Change::Degrade(rules) => RuleChange::Degrade(rules),
        Change::System(rules) => RuleChange::System(rules),
        Change::Authority(rules) => RuleChange::Authority(rules),
        Change::ParamFlow(rules) => RuleChange::ParamFlow(rules),
    }
}

fn load(sentinel: &Sentinel, change: Change) -> Result<(), sentinel_flow_core::RuleErrors> {
    match change {
        Change::Flow(rules) => sentinel.flow_rules().load(rules),
        Change::Degrade(rules) => sentinel.degrade_rules().load(rules),
        Change::System(rules) => sentinel.system_rules().load(rules),
        Change::Authority(rules) => sentinel.authority_rules().load(rules),
        Change::ParamFlow(rules) => sentinel.param_flow_rules().load(rules),
    }
}
