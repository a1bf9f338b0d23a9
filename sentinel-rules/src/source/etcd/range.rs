//! Reading keys: one range request each on a kept-alive connection, its
//! answer kept only up to the cap; a value past it is counted, not kept.

use std::io;
use std::time::Instant;

use serde_json::{Value, json};

use super::http::{Connection, read_capped};
use super::{ANSWER_DEADLINE, ENVELOPE, EtcdSource, Seen, base64, fingerprint};
use crate::source::{KeyValue, SourceError};

impl EtcdSource {
    /// `POST path` on the kept-alive connection (a new one when it was
    /// closed meanwhile), and the answer's body kept up to `cap`.
    pub(super) fn post(&mut self, path: &str, body: &[u8], cap: usize) -> io::Result<Answer> {
        let reused = self.commands.as_ref().is_some_and(Connection::reusable);
        let first = self.post_once(path, body, cap, reused);
        match first {
            // A kept-alive connection the server closed meanwhile.
            Err(e)
                if reused
                    && matches!(
                        e.kind(),
                        io::ErrorKind::BrokenPipe
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::ConnectionAborted
                            | io::ErrorKind::UnexpectedEof
                    ) =>
            {
                self.post_once(path, body, cap, false)
            }
            other => other,
        }
    }

    fn post_once(
        &mut self,
        path: &str,
        body: &[u8],
        cap: usize,
        reuse: bool,
    ) -> io::Result<Answer> {
        if !reuse {
            self.commands = Some(Connection::open(&self.authority, self.timeout)?);
        }
        let Some(connection) = self.commands.as_mut() else {
            return Err(io::ErrorKind::NotConnected.into());
        };
        connection.set_read_timeout(self.timeout)?;
        let answer = answer(connection, &self.authority, path, body, cap);
        if answer.is_err() || !connection.reusable() {
            self.commands = None;
        }
        answer
    }

    /// One key at `revision` (`None`: the latest).
    pub(super) fn range(
        &mut self,
        key: &str,
        revision: Option<i64>,
        max_size: usize,
    ) -> Result<(i64, Seen, KeyValue), SourceError> {
        let mut request = json!({ "key": base64::encode(key.as_bytes()) });
        if let Some(revision) = revision {
            request["revision"] = json!(revision.to_string());
        }
        let cap = base64::encoded_len(max_size)
            .saturating_add(ENVELOPE)
            .saturating_add(2 * base64::encoded_len(key.len()));
        let answer = self
            .post("/v3/kv/range", request.to_string().as_bytes(), cap)
            .map_err(|e| self.lost(&e))?;
        let bad = |why: String| SourceError::new(format!("etcd: a range answer for {key} {why}"));
        match answer {
            Answer::Whole(body) => {
                let value: Value =
                    serde_json::from_slice(&body).map_err(|e| bad(format!("is not JSON: {e}")))?;
                let header = int(value.pointer("/header/revision"))
                    .ok_or_else(|| bad("has no header revision".into()))?;
                let Some(kv) = value.pointer("/kvs/0") else {
                    let seen = Seen {
                        mod_revision: 0,
                        value: None,
                    };
                    return Ok((header, seen, KeyValue::Missing));
                };
                let mod_revision = int(kv.get("mod_revision")).unwrap_or(0);
                let text = kv.get("value").and_then(Value::as_str).unwrap_or("");
                let bytes =
                    base64::decode(text).map_err(|e| bad(format!("holds bad base64: {e}")))?;
                let value = if bytes.len() > max_size {
                    KeyValue::TooLarge(bytes.len() as u64)
                } else {
                    KeyValue::Present(bytes)
                };
                let fingerprint = match &value {
                    KeyValue::Present(bytes) => Some(fingerprint(bytes)),
                    _ => None,
                };
                let seen = Seen {
                    mod_revision,
                    value: fingerprint,
                };
                Ok((header, seen, value))
            }
            Answer::Over { prefix, value_len } => {
                let text = String::from_utf8_lossy(&prefix);
                let header = scan_int(&text, "\"revision\":\"")
                    .ok_or_else(|| bad("has no header revision".into()))?;
                let mod_revision = scan_int(&text, "\"mod_revision\":\"").unwrap_or(0);
                let seen = Seen {
                    mod_revision,
                    value: None,
                };
                Ok((header, seen, KeyValue::TooLarge(value_len)))
            }
        }
    }
}

/// A range answer: whole, or over the cap (its first bytes and the
/// decoded length of the value it held).
pub(super) enum Answer {
    Whole(Vec<u8>),
    Over { prefix: Vec<u8>, value_len: u64 },
}

/// Posts and reads the answer: whole within `cap`, else the rest read to
/// its end unkept, counting the base64 of the `"value"` field.
fn answer(
    connection: &mut Connection,
    authority: &str,
    path: &str,
    body: &[u8],
    cap: usize,
) -> io::Result<Answer> {
    let deadline = Instant::now() + ANSWER_DEADLINE;
    let mut answer = connection.post(authority, path, body)?;
    let (prefix, whole) = read_capped(connection, &mut answer, cap)?;
    if whole {
        return Ok(Answer::Whole(prefix));
    }
    const VALUE: &[u8] = b"\"value\":\"";
    let mut counting = prefix
        .windows(VALUE.len())
        .position(|w| w == VALUE)
        .map(|i| i + VALUE.len());
    let (mut chars, mut pad, mut total) = (0u64, 0u64, prefix.len() as u64);
    let mut count = |bytes: &[u8], counting: &mut Option<usize>| {
        if counting.is_none() {
            return;
        }
        for &b in bytes {
            if b == b'"' {
                *counting = None;
                return;
            }
            chars += 1;
            pad = if b == b'=' { pad + 1 } else { 0 };
        }
    };
    if let Some(start) = counting {
        count(&prefix[start..], &mut counting);
    }
    let mut buf = [0u8; 64 * 1024];
    loop {
        if Instant::now() > deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("an answer not read whole within {ANSWER_DEADLINE:?}"),
            ));
        }
        let n = connection.read_body(&mut answer, &mut buf)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        count(&buf[..n], &mut counting);
    }
    let value_len = if chars > 0 {
        base64::decoded_len(chars, pad)
    } else {
        total / 4 * 3
    };
    Ok(Answer::Over { prefix, value_len })
}

/// An int64 as the gateway writes it (a string) or as a number.
pub(super) fn int(value: Option<&Value>) -> Option<i64> {
    let value = value?;
    value
        .as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| value.as_i64())
}

/// The digits after the first `pattern` in `text`.
fn scan_int(text: &str, pattern: &str) -> Option<i64> {
    let at = text.find(pattern)? + pattern.len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}
