//! `metric`: the per-second lines of the metric log in Sentinel's thin
//! format, `timestamp|resource|pass|block|success|exception|rt|occupiedPass|concurrency|classification`,
//! one a line, as the dashboard's metric fetcher parses them.

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use sentinel_flow_core::log::MetricLine;

use super::{Params, State as Ctx, bad_request, failure, text};

/// Lines answered without `endTime` when `maxLines` is not given.
const DEFAULT_MAX_LINES: usize = 6_000;
/// The most lines answered without `endTime`.
const MAX_LINES: usize = 12_000;

/// Sentinel's names of the machine lines added to an answer for every
/// resource.
const CPU_USAGE: &str = "__cpu_usage__";
const SYSTEM_LOAD: &str = "__system_load__";

fn number<T: std::str::FromStr>(params: &Params, name: &str) -> Result<Option<T>, String> {
    match params.get(name) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| format!("{name}: must be a whole number, got {v:?}")),
    }
}

pub(super) async fn metric(State(ctx): Ctx, params: Params) -> Response {
    let query = (|| {
        let start: u64 =
            number(&params, "startTime")?.ok_or("startTime: is required (Unix milliseconds)")?;
        let end: Option<u64> = number(&params, "endTime")?;
        let max: Option<usize> = number(&params, "maxLines")?;
        Ok::<_, String>((start, end, max))
    })();
    let (start, end, max_lines) = match query {
        Ok(q) => q,
        Err(why) => return bad_request(why),
    };
    let identity = params.get("identity");
    let mut lines = match &ctx.metric {
        None => Vec::new(),
        Some(searcher) => {
            let searcher = searcher.clone();
            let identity = identity.map(str::to_owned);
            let found = tokio::task::spawn_blocking(move || {
                searcher.find(start, end.unwrap_or(u64::MAX), identity.as_deref())
            })
            .await;
            match found {
                Ok(Ok(lines)) => lines,
                Ok(Err(e)) => {
                    // Out of file descriptors, most often: said in the log
                    // as well as in the answer.
                    tracing::warn!(error = %e, "sentinel command center: the metric log could not be read");
                    return failure(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("error when retrieving metrics: {e}"),
                    );
                }
                Err(e) => {
                    return failure(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("error when retrieving metrics: {e}"),
                    );
                }
            }
        }
    };
    if end.is_none() {
        truncate(
            &mut lines,
            max_lines.unwrap_or(DEFAULT_MAX_LINES).min(MAX_LINES),
        );
    }
    let mut out = String::with_capacity(lines.len() * 64);
    for line in &lines {
        thin(&mut out, line);
    }
    if identity.is_none() {
        machine_lines(&ctx.sentinel, &mut out);
    }
    text(out)
}

/// Keeps about `max` lines: whole seconds, so that a second is never
/// answered in part.
fn truncate(lines: &mut Vec<MetricLine>, max: usize) {
    if lines.len() <= max {
        return;
    }
    let Some(last) = max.checked_sub(1).map(|i| lines[i].timestamp_ms) else {
        lines.clear();
        return;
    };
    let keep = lines[max..]
        .iter()
        .position(|l| l.timestamp_ms != last)
        .map_or(lines.len(), |p| max + p);
    lines.truncate(keep);
}

/// One line in the thin format, `|` in the name written `_`.
fn thin(out: &mut String, l: &MetricLine) {
    let _ = write!(out, "{}|", l.timestamp_ms);
    for c in l.resource.chars() {
        out.push(if c == '|' { '_' } else { c });
    }
    let _ = writeln!(
        out,
        "|{}|{}|{}|{}|{}|{}|{}|{}",
        l.pass,
        l.block,
        l.success,
        l.exception,
        l.avg_rt,
        l.occupied_pass,
        l.concurrency,
        l.classification
    );
}

/// The CPU usage and load average now, as Sentinel adds them: the value
/// times 10 000 in the pass column, when known and above zero.
fn machine_lines(sentinel: &sentinel_flow_core::Sentinel, out: &mut String) {
    let second = sentinel.now_ms() / 1_000 * 1_000;
    let status = sentinel.system_status();
    for (name, value) in [
        (SYSTEM_LOAD, status.load_average()),
        (CPU_USAGE, status.cpu_usage()),
    ] {
        if let Some(v) = value.filter(|v| *v > 0.0) {
            let _ = writeln!(
                out,
                "{second}|{name}|{}|0|0|0|0|0|0|0",
                (v * 10_000.0) as u64
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(ts: u64) -> MetricLine {
        MetricLine {
            timestamp_ms: ts,
            resource: "a|b".into(),
            pass: 1,
            block: 2,
            success: 3,
            exception: 4,
            avg_rt: 5,
            occupied_pass: 6,
            concurrency: 7,
            classification: 0,
        }
    }

    #[test]
    fn truncation_keeps_whole_seconds() {
        let mut lines = vec![line(1000), line(1000), line(2000), line(2000), line(3000)];
        truncate(&mut lines, 3);
        assert_eq!(lines.len(), 4);
        truncate(&mut lines, 0);
        assert!(lines.is_empty());
    }

    #[test]
    fn thin_lines_replace_bars() {
        let mut out = String::new();
        thin(&mut out, &line(1000));
        assert_eq!(out, "1000|a_b|1|2|3|4|5|6|7|0\n");
    }
}
