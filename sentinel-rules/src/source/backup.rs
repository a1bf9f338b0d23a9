//! The last-known-good copy: the values last put in force, kept in a local
//! file so that an instance restarted while its store is unreachable
//! starts with them.
//!
//! The file is JSON, `{"source": ..., "revision": ..., "values": [[key,
//! text or null], ...]}`, written to a temporary file beside it, synced
//! and renamed over it, so a crash leaves the old copy or the new one.

use std::io::Write;
use std::path::Path;

use serde_json::{Value, json};

use super::{KeyValue, Values};

/// Writes `values` (every present value is UTF-8: it was applied) to `path`.
pub(super) fn save(path: &Path, source: &str, values: &Values) -> std::io::Result<()> {
    let entries: Vec<Value> = values
        .entries
        .iter()
        .map(|(key, value)| match value {
            KeyValue::Present(bytes) => json!([key, String::from_utf8_lossy(bytes)]),
            _ => json!([key, null]),
        })
        .collect();
    let text =
        json!({"source": source, "revision": values.revision, "values": entries}).to_string();
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)?;
    if let Ok(dir) = std::fs::File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// The values kept at `path`, read no further than `max_bytes`.
pub(super) fn load(path: &Path, max_bytes: usize) -> Result<Values, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let limit = u64::try_from(max_bytes)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    let mut bytes = Vec::new();
    std::io::Read::read_to_end(&mut std::io::Read::take(file, limit), &mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    if bytes.len() > max_bytes {
        return Err(format!("over {max_bytes} bytes"));
    }
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| format!("bad JSON: {e}"))?;
    let bad = || "not a last-known-good copy (values missing)".to_owned();
    let items = value
        .get("values")
        .and_then(Value::as_array)
        .ok_or_else(bad)?;
    let mut entries = Vec::with_capacity(items.len());
    for item in items {
        let pair = item.as_array().filter(|p| p.len() == 2).ok_or_else(bad)?;
        let key = pair[0].as_str().ok_or_else(bad)?.to_owned();
        let value = match &pair[1] {
            Value::String(text) => KeyValue::Present(text.clone().into_bytes()),
            Value::Null => KeyValue::Missing,
            _ => return Err(bad()),
        };
        entries.push((key, value));
    }
    let revision = value
        .get("revision")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(Values { revision, entries })
}
