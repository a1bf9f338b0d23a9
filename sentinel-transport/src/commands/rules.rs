//! `getRules`, `setRules`, `getParamFlowRules`, `setParamFlowRules`.

use axum::extract::State;
use axum::response::Response;

use sentinel_flow_rules::RuleChange;
use sentinel_flow_rules::json::{decode, encode};

use super::{Params, State as Ctx, bad_request, failure, json_text, text};
use crate::store::Change;

/// The rule kinds `getRules`/`setRules` take by `type`.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Flow,
    Degrade,
    System,
    Authority,
}

fn kind(params: &Params) -> Result<Kind, String> {
    // Sentinel compares the type ignoring case.
    match params.get("type").map(str::to_ascii_lowercase).as_deref() {
        Some("flow") => Ok(Kind::Flow),
        Some("degrade") => Ok(Kind::Degrade),
        Some("system") => Ok(Kind::System),
        Some("authority") => Ok(Kind::Authority),
        Some(other) => Err(format!(
            "invalid type {other:?}: one of flow, degrade, system, authority (hot-parameter rules: getParamFlowRules)"
        )),
        None => Err("type: is required (flow, degrade, system or authority)".into()),
    }
}

pub(super) async fn get_rules(State(ctx): Ctx, params: Params) -> Response {
    let s = &ctx.sentinel;
    match kind(&params) {
        Ok(Kind::Flow) => json_text(encode(&RuleChange::Flow(s.flow_rules().rules()))),
        Ok(Kind::Degrade) => json_text(encode(&RuleChange::Degrade(s.degrade_rules().rules()))),
        Ok(Kind::System) => json_text(encode(&RuleChange::System(s.system_rules().rules()))),
        Ok(Kind::Authority) => {
            json_text(encode(&RuleChange::Authority(s.authority_rules().rules())))
        }
        Err(why) => bad_request(why),
    }
}

pub(super) async fn get_param_flow_rules(State(ctx): Ctx) -> Response {
    json_text(encode(&RuleChange::ParamFlow(
        ctx.sentinel.param_flow_rules().rules(),
    )))
}

/// `data` read as a list of `kind`, or 400 with every problem.
fn read(params: &Params, kind: &str) -> Result<Change, String> {
    let Some(data) = params.get("data") else {
        return Err("data: is required (the whole rule list as a JSON array; [] clears it)".into());
    };
    let change = decode(kind, data).map_err(|lines| lines.join("\n"))?;
    Ok(match change {
        RuleChange::Flow(rules) => Change::Flow(rules),
        RuleChange::Degrade(rules) => Change::Degrade(rules),
        RuleChange::System(rules) => Change::System(rules),
        RuleChange::Authority(rules) => Change::Authority(rules),
        RuleChange::ParamFlow(rules) => Change::ParamFlow(rules),
        _ => return Err(format!("{kind}: not a kind this command sets")),
    })
}

pub(super) async fn set_rules(State(ctx): Ctx, params: Params) -> Response {
    let change = match kind(&params) {
        Ok(Kind::Flow) => read(&params, "flow"),
        Ok(Kind::Degrade) => read(&params, "degrade"),
        Ok(Kind::System) => read(&params, "system"),
        Ok(Kind::Authority) => read(&params, "authority"),
        Err(why) => Err(why),
    };
    match change {
        Ok(change) => apply(&ctx, change).await,
        Err(why) => bad_request(why),
    }
}

pub(super) async fn set_param_flow_rules(State(ctx): Ctx, params: Params) -> Response {
    match read(&params, "param_flow") {
        Ok(change) => apply(&ctx, change).await,
        Err(why) => bad_request(why),
    }
}

async fn apply(ctx: &super::Ctx, change: Change) -> Response {
    match ctx.rules.apply(&ctx.sentinel, change).await {
        Ok(()) => text("success"),
        Err((status, lines)) => failure(status, lines.join("\n")),
    }
}
