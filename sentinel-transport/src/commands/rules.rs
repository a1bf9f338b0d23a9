//! `getRules`, `setRules`, and the commands Sentinel gives a kind of its
//! own (`getParamFlowRules`, `setParamFlowRules`): every kind the rules
//! crate knows, none named here.

use axum::extract::State;
use axum::response::Response;

use sentinel_flow_rules::json::{decode_with, encode};
use sentinel_flow_rules::{KindInfo, RuleChange, UserKinds};

use super::{Params, State as Ctx, bad_request, failure, json_text, text};

/// The kinds `getRules`/`setRules` take by `type`, in the docs' order.
fn by_type() -> impl Iterator<Item = &'static KindInfo> {
    RuleChange::kinds().iter().filter(|k| k.commands.is_none())
}

/// The kind `type` names, as Sentinel compares it (ignoring case): a
/// built-in kind or one the application added.
fn kind(params: &Params, user_kinds: &UserKinds) -> Result<&'static str, String> {
    let mut names: Vec<&str> = by_type().map(|k| k.name).collect();
    names.extend(user_kinds.names());
    let Some(given) = params.get("type") else {
        let list = match names.split_last() {
            Some((last, [])) => (*last).to_owned(),
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        };
        return Err(format!("type: is required ({list})"));
    };
    let given = given.to_ascii_lowercase();
    if let Some(name) = names.iter().find(|name| **name == given) {
        return Ok(name);
    }
    let own: Vec<String> = RuleChange::kinds()
        .iter()
        .filter_map(|k| Some(format!("{}: {}", prose(k.docs), k.commands?.get)))
        .collect();
    let own = match own.is_empty() {
        true => String::new(),
        false => format!(" ({})", own.join("; ")),
    };
    Err(format!(
        "invalid type {given:?}: one of {}{own}",
        names.join(", ")
    ))
}

/// A docs line (`Hot-parameter rules.`) as prose: `hot-parameter rules`.
fn prose(docs: &str) -> String {
    let docs = docs.strip_suffix('.').unwrap_or(docs);
    let mut chars = docs.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The rules of `kind` in force, as Sentinel's JSON.
fn rules_of(ctx: &super::Ctx, kind: &str) -> Response {
    match RuleChange::in_force_with(&ctx.sentinel, &ctx.user_kinds, kind) {
        Some(change) => json_text(encode(&change)),
        None => bad_request(format!("{kind}: not a rule kind")),
    }
}

pub(super) async fn get_rules(State(ctx): Ctx, params: Params) -> Response {
    match kind(&params, &ctx.user_kinds) {
        Ok(kind) => rules_of(&ctx, kind),
        Err(why) => bad_request(why),
    }
}

/// `get...Rules` of a kind with commands of its own.
pub(super) async fn get_kind_rules(
    ctx: std::sync::Arc<super::Ctx>,
    kind: &'static str,
) -> Response {
    rules_of(&ctx, kind)
}

/// `data` read as a list of `kind`, or 400 with every problem.
fn read(params: &Params, user_kinds: &UserKinds, kind: &str) -> Result<RuleChange, String> {
    let Some(data) = params.get("data") else {
        return Err("data: is required (the whole rule list as a JSON array; [] clears it)".into());
    };
    decode_with(user_kinds, kind, data).map_err(|lines| lines.join("\n"))
}

pub(super) async fn set_rules(State(ctx): Ctx, params: Params) -> Response {
    let user_kinds = &ctx.user_kinds;
    match kind(&params, user_kinds).and_then(|kind| read(&params, user_kinds, kind)) {
        Ok(change) => apply(&ctx, change).await,
        Err(why) => bad_request(why),
    }
}

/// `set...Rules` of a kind with commands of its own.
pub(super) async fn set_kind_rules(
    ctx: std::sync::Arc<super::Ctx>,
    params: Params,
    kind: &'static str,
) -> Response {
    match read(&params, &ctx.user_kinds, kind) {
        Ok(change) => apply(&ctx, change).await,
        Err(why) => bad_request(why),
    }
}

async fn apply(ctx: &super::Ctx, change: RuleChange) -> Response {
    match ctx.rules.apply(&ctx.sentinel, change).await {
        Ok(()) => text("success"),
        Err((status, lines)) => failure(status, lines.join("\n")),
    }
}
