//! Sentinel's commands, each at its root path (`/version`, `/getRules`,
//! ...), as the dashboard calls them; any other path is answered 400
//! `Unknown command`.

mod cluster;
mod info;
mod metric;
mod nodes;
mod params;
mod rules;

use std::sync::{Arc, LazyLock};

use axum::Router;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, any};
use sentinel_flow_core::log::MetricSearcher;

use crate::info::Machine;
use crate::shared::SentinelRef;
use crate::store::RuleSink;

pub(crate) use params::{BodyReadTimeout, Params};

/// What every command reads.
pub(crate) struct Ctx {
    pub(crate) sentinel: SentinelRef,
    pub(crate) machine: Machine,
    pub(crate) metric: Option<MetricSearcher>,
    pub(crate) rules: RuleSink,
    /// Kinds an application added, served by `getRules`/`setRules`.
    pub(crate) user_kinds: sentinel_flow_rules::UserKinds,
}

pub(crate) type State = axum::extract::State<Arc<Ctx>>;

/// Whether a command changes state (and so is off unless writes are
/// allowed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    Read,
    Write,
}

/// One command: its path without the slash, what `api` says of it, and
/// whether it changes state.
#[derive(Clone, Copy)]
pub(crate) struct Command {
    pub(crate) name: &'static str,
    pub(crate) desc: &'static str,
    pub(crate) access: Access,
}

const fn read(name: &'static str, desc: &'static str) -> Command {
    Command {
        name,
        desc,
        access: Access::Read,
    }
}

const fn write(name: &'static str, desc: &'static str) -> Command {
    Command {
        name,
        desc,
        access: Access::Write,
    }
}

/// Every command served, in the order `api` lists them: the commands
/// Sentinel gives a rule kind of its own follow `setRules`.
pub(crate) static COMMANDS: LazyLock<Vec<Command>> = LazyLock::new(|| {
    let mut commands = Vec::with_capacity(FIXED.len() + 2);
    for command in FIXED {
        commands.push(*command);
        if command.name == "setRules" {
            for kind in sentinel_flow_rules::RuleChange::kinds() {
                if let Some(own) = kind.commands {
                    commands.push(read(own.get, own.get_help));
                    commands.push(write(own.set, own.set_help));
                }
            }
        }
    }
    commands
});

/// The commands that are not a rule kind's own.
const FIXED: &[Command] = &[
    read("version", "get sentinel version"),
    read("api", "get all available command handlers"),
    read("basicInfo", "get sentinel config info"),
    read(
        "getRules",
        "get all active rules by type, request param: type={ruleType}",
    ),
    write(
        "setRules",
        "modify the rules, accept param: type={ruleType}&data={ruleJson}",
    ),
    read(
        "metric",
        "get and aggregate metrics, accept param: startTime={startTime}&endTime={endTime}&maxLines={maxLines}&identity={resourceName}",
    ),
    read(
        "clusterNode",
        "get all clusterNode VO, use type=notZero to ignore those nodes with totalRequest <=0",
    ),
    read(
        "clusterNodeById",
        "get clusterNode VO by id, request param: id={resourceName}",
    ),
    read(
        "cnode",
        "get clusterNode metrics by id, request param: id={resourceName}",
    ),
    read(
        "origin",
        "get origin clusterNode by id, request param: id={resourceName}",
    ),
    read("jsonTree", "get tree node VO start from root node"),
    read(
        "tree",
        "get metrics in tree mode, use id to specify detailed tree root",
    ),
    read("systemStatus", "get system status"),
    read("getSwitch", "get sentinel switch status"),
    write(
        "setSwitch",
        "set sentinel switch, accept param: value={true|false}",
    ),
    read("getClusterMode", "get cluster mode status"),
    // The two below change nothing here (they answer `success` for the
    // state the machine is in, or why they cannot), so they are served
    // like reads: the dashboard sends `setClusterMode` as a GET.
    read(
        "setClusterMode",
        "set cluster mode, accept param: mode={0|1} 0:client mode 1:server mode",
    ),
    read("cluster/client/fetchConfig", "get cluster client config"),
    read(
        "cluster/client/modifyConfig",
        "modify cluster client config",
    ),
];

/// The access a request path needs: its command's, or `Read` for every
/// other path (the live page, unknown commands).
pub(crate) fn access_of(path: &str) -> Access {
    let name = path.trim_start_matches('/');
    COMMANDS
        .iter()
        .find(|c| c.name == name)
        .map_or(Access::Read, |c| c.access)
}

/// The command routes, with `ctx` as their state.
pub(crate) fn router(ctx: Arc<Ctx>) -> Router {
    let routes: [(&str, MethodRouter<Arc<Ctx>>); 19] = [
        ("version", any(info::version)),
        ("api", any(info::api)),
        ("basicInfo", any(info::basic_info)),
        ("getRules", any(rules::get_rules)),
        ("setRules", any(rules::set_rules)),
        ("metric", any(metric::metric)),
        ("clusterNode", any(nodes::cluster_nodes)),
        ("clusterNodeById", any(nodes::cluster_node_by_id)),
        ("cnode", any(nodes::cnode)),
        ("origin", any(nodes::origin)),
        ("jsonTree", any(nodes::json_tree)),
        ("tree", any(nodes::tree)),
        ("systemStatus", any(info::system_status)),
        ("getSwitch", any(info::get_switch)),
        ("setSwitch", any(info::set_switch)),
        ("getClusterMode", any(info::get_cluster_mode)),
        ("setClusterMode", any(cluster::set_cluster_mode)),
        (
            "cluster/client/fetchConfig",
            any(cluster::fetch_client_config),
        ),
        (
            "cluster/client/modifyConfig",
            any(cluster::modify_client_config),
        ),
    ];
    let mut router = Router::new();
    for (name, route) in routes {
        debug_assert!(COMMANDS.iter().any(|c| c.name == name));
        router = router.route(&format!("/{name}"), route);
    }
    for kind in sentinel_flow_rules::RuleChange::kinds() {
        let (Some(own), name) = (kind.commands, kind.name) else {
            continue;
        };
        let get = any(move |axum::extract::State(ctx): State| rules::get_kind_rules(ctx, name));
        let set = any(move |axum::extract::State(ctx): State, params: Params| {
            rules::set_kind_rules(ctx, params, name)
        });
        router = router.route(&format!("/{}", own.get), get);
        router = router.route(&format!("/{}", own.set), set);
    }
    router.fallback(unknown).with_state(ctx)
}

/// 400 `Unknown command`, the answer the dashboard recognises.
async fn unknown(uri: Uri) -> Response {
    let name = uri.path().trim_start_matches('/');
    failure(StatusCode::BAD_REQUEST, format!("Unknown command `{name}`"))
}

/// A text answer.
pub(crate) fn text(body: impl Into<String>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body.into(),
    )
        .into_response()
}

/// A JSON answer.
pub(crate) fn json(value: &serde_json::Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        value.to_string(),
    )
        .into_response()
}

/// A JSON answer already written out.
pub(crate) fn json_text(body: String) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        body,
    )
        .into_response()
}

/// A failure: `status` and the message as text.
pub(crate) fn failure(status: StatusCode, message: impl Into<String>) -> Response {
    (status, text(message)).into_response()
}

/// 400 with `message`.
pub(crate) fn bad_request(message: impl Into<String>) -> Response {
    failure(StatusCode::BAD_REQUEST, message)
}
