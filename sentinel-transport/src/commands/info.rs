//! `version`, `api`, `basicInfo`, `systemStatus`, the switch and the
//! cluster mode.

use axum::extract::State;
use axum::response::Response;
use sentinel_flow_core::flow::ClusterStatus;
use serde_json::{Value, json};

use super::{COMMANDS, Params, State as Ctx, bad_request, json, text};
use crate::info::SENTINEL_VERSION;

pub(super) async fn version() -> Response {
    text(SENTINEL_VERSION)
}

pub(super) async fn api() -> Response {
    let list: Vec<Value> = COMMANDS
        .iter()
        .map(|c| json!({ "url": format!("/{}", c.name), "desc": c.desc }))
        .collect();
    json(&Value::Array(list))
}

pub(super) async fn basic_info(State(ctx): Ctx) -> Response {
    let m = &ctx.machine;
    text(format!(
        "app: {}\napp_type: {}\nhostname: {}\nip: {}\nport: {}\npid: {}\nversion: {}\n",
        m.app,
        crate::info::app_type(m.app_type, &ctx.sentinel),
        m.hostname,
        m.ip,
        m.port,
        m.pid,
        SENTINEL_VERSION
    ))
}

/// The inbound total, in Sentinel's one-letter fields: `rqps` completed,
/// `qps` passed, `b` blocked per second, `r` average RT, `t` calls inside.
pub(super) async fn system_status(State(ctx): Ctx) -> Response {
    let now = ctx.sentinel.now_ms();
    let s = ctx.sentinel.inbound_node().snapshot(now);
    json(&json!({
        "rqps": s.success_qps,
        "qps": s.pass_qps,
        "b": s.block_qps,
        "r": s.avg_rt,
        "t": s.concurrency,
    }))
}

pub(super) async fn get_switch(State(ctx): Ctx) -> Response {
    text(format!(
        "Sentinel switch value: {}",
        ctx.sentinel.is_enabled()
    ))
}

pub(super) async fn set_switch(State(ctx): Ctx, params: Params) -> Response {
    // Sentinel reads anything but "true" as false; a typo should not turn
    // protection off, so only the two words are accepted.
    let on = match params.get("value") {
        Some("true") => true,
        Some("false") => false,
        Some(other) => return bad_request(format!("value: must be true or false, got {other:?}")),
        None => return bad_request("value: is required (true or false)"),
    };
    ctx.sentinel.set_enabled(on);
    text(format!("Sentinel set switch value: {on}"))
}

/// Sentinel's `ClusterStateManager` modes.
const MODE_CLIENT: i8 = 0;
const MODE_NOT_STARTED: i8 = -1;

/// The cluster mode, as Sentinel's `FetchClusterModeCommandHandler`
/// answers it: client mode (`mode` 0, `clientAvailable`) while a cluster
/// service is attached to the instance and answers (a `RedisCluster`
/// connected to Redis); otherwise not started (`mode` -1, nothing
/// available), which the dashboard shows as cluster flow control not
/// available on this machine. This machine never serves tokens to others
/// (`serverAvailable` is false). `lastModified`: when a service was last
/// attached or taken away (the instance's clock, ms), -1 if never.
pub(super) async fn get_cluster_mode(State(ctx): Ctx) -> Response {
    let client = ctx.sentinel.cluster_status() == ClusterStatus::Available;
    let last_modified = ctx
        .sentinel
        .cluster_changed_ms()
        .and_then(|ms| i64::try_from(ms).ok())
        .unwrap_or(-1);
    json(&json!({
        "mode": if client { MODE_CLIENT } else { MODE_NOT_STARTED },
        "lastModified": last_modified,
        "clientAvailable": client,
        "serverAvailable": false,
    }))
}
