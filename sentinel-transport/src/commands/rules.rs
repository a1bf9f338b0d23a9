//! `getRules`, `setRules`, `getParamFlowRules`, `setParamFlowRules`.

use axum::extract::State;
use axum::response::Response;

use super::{Params, State as Ctx, bad_request, failure, json, text};
use crate::json::{JsonRule, from_json, to_json};
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
        Ok(Kind::Flow) => json(&to_json(&s.flow_rules().rules())),
        Ok(Kind::Degrade) => json(&to_json(&s.degrade_rules().rules())),
        Ok(Kind::System) => json(&to_json(&s.system_rules().rules())),
        Ok(Kind::Authority) => json(&to_json(&s.authority_rules().rules())),
        Err(why) => bad_request(why),
    }
}

pub(super) async fn get_param_flow_rules(State(ctx): Ctx) -> Response {
    json(&to_json(&ctx.sentinel.param_flow_rules().rules()))
}

/// `data` read as a list of `R`, or 400 with every problem.
fn read<R: JsonRule>(params: &Params) -> Result<Vec<R>, String> {
    let Some(data) = params.get("data") else {
        return Err("data: is required (the whole rule list as a JSON array; [] clears it)".into());
    };
    from_json(data).map_err(|lines| lines.join("\n"))
}

pub(super) async fn set_rules(State(ctx): Ctx, params: Params) -> Response {
    let change = match kind(&params) {
        Ok(Kind::Flow) => read(&params).map(Change::Flow),
        Ok(Kind::Degrade) => read(&params).map(Change::Degrade),
        Ok(Kind::System) => read(&params).map(Change::System),
        Ok(Kind::Authority) => read(&params).map(Change::Authority),
        Err(why) => Err(why),
    };
    match change {
        Ok(change) => apply(&ctx, change).await,
        Err(why) => bad_request(why),
    }
}

pub(super) async fn set_param_flow_rules(State(ctx): Ctx, params: Params) -> Response {
    match read(&params) {
        Ok(rules) => apply(&ctx, Change::ParamFlow(rules)).await,
        Err(why) => bad_request(why),
    }
}

async fn apply(ctx: &super::Ctx, change: Change) -> Response {
    match ctx.rules.apply(&ctx.sentinel, change).await {
        Ok(()) => text("success"),
        Err((status, lines)) => failure(status, lines.join("\n")),
    }
}
