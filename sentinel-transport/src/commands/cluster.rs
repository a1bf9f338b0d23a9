//! The cluster client's commands the dashboard calls besides
//! `getClusterMode`: `cluster/client/fetchConfig`, `setClusterMode` and
//! `cluster/client/modifyConfig`.
//!
//! The instance's cluster client is the `ClusterTokens` service the
//! application attaches (`sentinel-flow-cluster`'s Redis client): it is
//! configured in code, not from the dashboard, and the instance never
//! serves tokens to others. So the commands that would change it answer
//! Sentinel's failure (400 and the reason), and the token server's
//! commands (`cluster/server/...`) are unknown here, as on a Java machine
//! without the token server module.

use std::time::Duration;

use axum::extract::State;
use axum::response::Response;
use sentinel_flow_core::flow::ClusterStatus;
use serde_json::{Map, Value};

use super::{Params, State as Ctx, bad_request, json, text};

/// Sentinel's `ClusterConstants.DEFAULT_REQUEST_TIMEOUT` (ms): what a
/// Java machine with no client config answers.
const JAVA_DEFAULT_REQUEST_TIMEOUT_MS: i64 = 20;

/// Sentinel's `ClientConstants` client states.
const CLIENT_STATUS_OFF: i8 = 0;
const CLIENT_STATUS_PENDING: i8 = 1;
const CLIENT_STATUS_STARTED: i8 = 2;

/// Sentinel's `ClusterStateManager` modes `setClusterMode` takes.
const MODE_NOT_STARTED: i64 = -1;
const MODE_CLIENT: i64 = 0;
const MODE_SERVER: i64 = 1;

/// The cluster client's config and state, in the fields of Sentinel's
/// `ClusterClientStateEntity` (what the dashboard reads into
/// `ClusterClientInfoVO`), keys in fastjson's order, absent ones left out:
///
/// - `clientState`: 2 (started) while the attached service answers, 1
///   (pending: reconnecting) while it cannot, 0 (off) with none attached.
/// - `serverHost`, `serverPort`: where the service asks for permits (for
///   the Redis client, the Redis server), as the service says
///   (`ClusterTokens::endpoint`); absent when it does not say, as on a
///   Java machine never assigned a server.
/// - `requestTimeout` (ms): the longest an entry waits for the service
///   before its rule falls back (the Redis client's budget); Sentinel's
///   default 20 when the service does not say.
/// - `connectTimeout` (ms): how long the service waits to connect, when it
///   says. Java's answer has no such field; the dashboard ignores it.
pub(super) async fn fetch_client_config(State(ctx): Ctx) -> Response {
    let sentinel = &ctx.sentinel;
    let state = match sentinel.cluster_status() {
        ClusterStatus::Available => CLIENT_STATUS_STARTED,
        ClusterStatus::Unavailable => CLIENT_STATUS_PENDING,
        _ => CLIENT_STATUS_OFF,
    };
    let endpoint = (state != CLIENT_STATUS_OFF)
        .then(|| sentinel.cluster_endpoint())
        .flatten();
    let mut answer = Map::new();
    answer.insert("clientState".into(), state.into());
    if let Some(ms) = endpoint.as_ref().and_then(|e| e.connect_timeout()) {
        answer.insert("connectTimeout".into(), java_int_ms(ms).into());
    }
    let request_timeout = endpoint
        .as_ref()
        .map_or(JAVA_DEFAULT_REQUEST_TIMEOUT_MS, |e| {
            java_int_ms(e.request_timeout())
        });
    answer.insert("requestTimeout".into(), request_timeout.into());
    if let Some(endpoint) = &endpoint {
        answer.insert("serverHost".into(), endpoint.host().into());
        answer.insert("serverPort".into(), endpoint.port().into());
    }
    json(&Value::Object(answer))
}

/// A duration in whole ms as a Java `Integer` holds it (saturated), at
/// least 1 ms for a nonzero one (a 500 µs budget is not "no wait").
fn java_int_ms(duration: Duration) -> i64 {
    let ms = duration.as_millis();
    let ms = if ms == 0 && !duration.is_zero() {
        1
    } else {
        ms
    };
    i64::try_from(ms)
        .unwrap_or(i64::MAX)
        .min(i64::from(i32::MAX))
}

/// `setClusterMode`, as Sentinel's `ModifyClusterModeCommandHandler`
/// answers it: `success` for the mode the instance is already in (client
/// while a service is attached, not started while none is); otherwise
/// Sentinel's failure for a mode it cannot take. Client mode cannot be
/// taken from the command API (the application attaches the client), nor
/// server mode (the instance serves no tokens), nor leaving client mode
/// (the application's client stays attached until it detaches it).
pub(super) async fn set_cluster_mode(State(ctx): Ctx, params: Params) -> Response {
    // Java's `Integer.valueOf`: an optional sign and decimal digits.
    let Some(mode) = params.get("mode").and_then(|m| m.parse::<i64>().ok()) else {
        return bad_request("invalid parameter");
    };
    let attached = ctx.sentinel.has_cluster_tokens();
    match mode {
        MODE_CLIENT if attached => text("success"),
        MODE_CLIENT => bad_request("token client mode not available: no SPI found"),
        MODE_SERVER => bad_request("token server mode not available: no SPI found"),
        MODE_NOT_STARTED if !attached => text("success"),
        MODE_NOT_STARTED => bad_request(
            "cluster mode not changed: the cluster client is attached by the application, which alone detaches it",
        ),
        _ => bad_request(format!(
            "mode: must be -1 (not started), 0 (client) or 1 (server), got {mode}"
        )),
    }
}

/// `cluster/client/modifyConfig`: Sentinel's failure for an empty `data`
/// (`empty data`), and for any other the reason it cannot be honoured:
/// the client's endpoint and timeouts are set by the application in code.
pub(super) async fn modify_client_config(params: Params) -> Response {
    if params.get("data").is_none_or(|d| d.trim().is_empty()) {
        return bad_request("empty data");
    }
    bad_request(
        "cluster client config not modified: the cluster client's endpoint and timeouts are set by the application",
    )
}
