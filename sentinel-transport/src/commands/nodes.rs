//! The node views: `clusterNode`, `clusterNodeById`, `cnode`, `origin`
//! (per resource) and `jsonTree`, `tree` (the invocation tree), with
//! Sentinel's `NodeVo` field names.

use std::fmt::Write as _;

use axum::extract::State;
use axum::response::Response;
use sentinel_flow_core::node::NodeSnapshot;
use serde_json::{Value, json};

use super::{Params, State as Ctx, bad_request, json, text};

/// The root of the tree, as Sentinel names it.
const ROOT: &str = "machine-root";

/// A node as Sentinel's `NodeVo`: with an `id` in the tree, without one
/// for a resource's cluster node (Java's `fromClusterNode` sets none).
fn node_vo(
    id: Option<&str>,
    parent: Option<&str>,
    resource: &str,
    s: &NodeSnapshot,
    now: u64,
) -> Value {
    let mut vo = json!({
        "resource": resource,
        "threadNum": s.concurrency,
        "passQps": s.pass_qps as u64,
        "blockQps": s.block_qps as u64,
        "totalQps": (s.pass_qps + s.block_qps) as u64,
        "averageRt": s.avg_rt as u64,
        "successQps": s.success_qps as u64,
        "exceptionQps": s.exception_qps as u64,
        "oneMinutePass": s.total_pass,
        "oneMinuteBlock": s.total_block,
        "oneMinuteException": s.total_exception,
        "oneMinuteTotal": s.total_pass + s.total_block,
        "timestamp": now,
    });
    if let Some(id) = id {
        vo["id"] = json!(id);
    }
    if let Some(parent) = parent {
        vo["parentId"] = json!(parent);
    }
    vo
}

/// Every resource; `type=notZero` (or the dashboard's `noZero`) leaves out
/// those without a request in the last minute.
pub(super) async fn cluster_nodes(State(ctx): Ctx, params: Params) -> Response {
    let now = ctx.sentinel.now_ms();
    let skip_zero = params
        .get("type")
        .is_some_and(|t| t.eq_ignore_ascii_case("notZero") || t.eq_ignore_ascii_case("noZero"));
    let list: Vec<Value> = ctx
        .sentinel
        .resources()
        .iter()
        .filter(|r| !skip_zero || r.stats.total_pass + r.stats.total_block > 0)
        .map(|r| node_vo(None, None, &r.name, &r.stats, now))
        .collect();
    json(&Value::Array(list))
}

/// One resource's `NodeVo`, `{}` when there is no such resource.
pub(super) async fn cluster_node_by_id(State(ctx): Ctx, params: Params) -> Response {
    let Some(id) = params.get("id") else {
        return bad_request("Invalid parameter: empty clusterNode name");
    };
    let now = ctx.sentinel.now_ms();
    match ctx.sentinel.resource_node(id) {
        Some(node) => json(&node_vo(None, None, id, &node.stats().snapshot(now), now)),
        None => json(&json!({})),
    }
}

/// One table row: the columns, left-aligned to `widths`.
fn row(out: &mut String, widths: &[usize], cells: &[String]) {
    let start = out.len();
    for (cell, width) in cells.iter().zip(widths) {
        let _ = write!(out, "{cell:<width$}");
    }
    let end = out[start..].trim_end().len();
    out.truncate(start + end);
    out.push('\n');
}

/// The figures of a node as table cells, after its index and name.
fn figures(s: &NodeSnapshot) -> Vec<String> {
    vec![
        s.concurrency.to_string(),
        (s.pass_qps as u64).to_string(),
        (s.block_qps as u64).to_string(),
        (s.success_qps as u64).to_string(),
        ((s.pass_qps + s.block_qps) as u64).to_string(),
        (s.avg_rt as u64).to_string(),
        s.total_pass.to_string(),
        s.total_block.to_string(),
        (s.total_pass + s.total_block).to_string(),
        (s.exception_qps as u64).to_string(),
    ]
}

const FIGURES: [&str; 10] = [
    "thread",
    "pass",
    "blocked",
    "success",
    "total",
    "aRt",
    "1m-pass",
    "1m-block",
    "1m-all",
    "exception",
];

/// A text table of `(name, figures)` rows.
fn table(first: &str, rows: Vec<(String, NodeSnapshot)>) -> String {
    let name_width = rows
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(0)
        .max(first.len())
        + 2;
    let mut widths = vec![5, name_width];
    widths.extend([8, 10, 10, 10, 10, 8, 10, 10, 10, 10]);
    let mut out = String::new();
    let mut header = vec!["idx".to_owned(), first.to_owned()];
    header.extend(FIGURES.iter().map(|s| (*s).to_owned()));
    row(&mut out, &widths, &header);
    for (i, (name, s)) in rows.into_iter().enumerate() {
        let mut cells = vec![(i + 1).to_string(), name];
        cells.extend(figures(&s));
        row(&mut out, &widths, &cells);
    }
    out
}

/// The resources whose name contains `id` (every one without it), as a
/// text table.
pub(super) async fn cnode(State(ctx): Ctx, params: Params) -> Response {
    let id = params.get("id").unwrap_or("");
    let rows = ctx
        .sentinel
        .resources()
        .into_iter()
        .filter(|r| r.name.contains(id))
        .map(|r| (r.name.to_string(), r.stats))
        .collect();
    text(table("id", rows))
}

/// The origins of one resource as a text table.
pub(super) async fn origin(State(ctx): Ctx, params: Params) -> Response {
    let Some(id) = params.get("id") else {
        return bad_request("Invalid parameter: id (the resource name) is required");
    };
    let Some(node) = ctx.sentinel.resource_node(id) else {
        return text(format!("Not find cNode with id {id}"));
    };
    let now = ctx.sentinel.now_ms();
    let rows = node
        .origins()
        .map(|o| (o.name().to_owned(), o.stats().snapshot(now)))
        .collect();
    text(format!("id: {id}\n\n{}", table("origin", rows)))
}

/// One node of the tree as the commands walk it.
struct Walk<'a> {
    name: &'a str,
    stats: NodeSnapshot,
    children: Vec<Walk<'a>>,
}

fn walk_tree(tree: &[sentinel_flow_core::snapshot::TreeSnapshot]) -> Walk<'_> {
    fn node(n: &sentinel_flow_core::snapshot::TreeNodeSnapshot) -> Walk<'_> {
        Walk {
            name: &n.resource,
            stats: n.stats,
            children: n.children.iter().map(node).collect(),
        }
    }
    let contexts: Vec<Walk<'_>> = tree
        .iter()
        .map(|c| Walk {
            name: &c.context,
            stats: c.stats,
            children: c.children.iter().map(node).collect(),
        })
        .collect();
    // The root's figures: its contexts' together.
    let stats = NodeSnapshot::sum(contexts.iter().map(|c| &c.stats));
    Walk {
        name: ROOT,
        stats,
        children: contexts,
    }
}

/// The tree in preorder as `NodeVo`s linked by `parentId`.
pub(super) async fn json_tree(State(ctx): Ctx) -> Response {
    fn visit(n: &Walk<'_>, parent: Option<&str>, now: u64, out: &mut Vec<Value>) {
        let id = out.len().to_string();
        out.push(node_vo(Some(&id), parent, n.name, &n.stats, now));
        for child in &n.children {
            visit(child, Some(&id), now, out);
        }
    }
    let now = ctx.sentinel.now_ms();
    let tree = ctx.sentinel.tree();
    let mut out = Vec::new();
    visit(&walk_tree(&tree), None, now, &mut out);
    json(&Value::Array(out))
}

/// The tree as indented text, one node a line, Sentinel's abbreviations:
/// `t` calls inside, `pq` pass, `bq` block, `tq` total per second, `rt`,
/// `1mp`/`1mb`/`1mt` pass, block, total over the minute. `id` starts it at
/// the first node of that name (a context or a resource) instead of the
/// root.
pub(super) async fn tree(State(ctx): Ctx, params: Params) -> Response {
    fn visit(n: &Walk<'_>, depth: usize, out: &mut String) {
        let s = &n.stats;
        let kind = if depth <= 1 { "EntranceNode: " } else { "" };
        let _ = writeln!(
            out,
            "{}{kind}{}(t:{} pq:{} bq:{} tq:{} rt:{} 1mp:{} 1mb:{} 1mt:{})",
            "-".repeat(depth),
            n.name,
            s.concurrency,
            s.pass_qps as u64,
            s.block_qps as u64,
            (s.pass_qps + s.block_qps) as u64,
            s.avg_rt as u64,
            s.total_pass,
            s.total_block,
            s.total_pass + s.total_block
        );
        for child in &n.children {
            visit(child, depth + 1, out);
        }
    }
    fn find<'w, 'a>(n: &'w Walk<'a>, name: &str, depth: usize) -> Option<(&'w Walk<'a>, usize)> {
        if n.name == name {
            return Some((n, depth));
        }
        n.children.iter().find_map(|c| find(c, name, depth + 1))
    }
    let tree = ctx.sentinel.tree();
    let root = walk_tree(&tree);
    let (start, depth) = match params.get("id") {
        None => (&root, 0),
        Some(id) => match find(&root, id, 0) {
            Some(found) => found,
            None => return text(format!("Can't find node with id {id}")),
        },
    };
    let mut out = String::new();
    visit(start, depth, &mut out);
    text(out)
}
