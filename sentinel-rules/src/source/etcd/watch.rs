//! The watch stream: `POST /v3/watch` with one create request per key,
//! answered by a chunked body of JSON messages, one a line, for as long
//! as the connection lasts.
//!
//! Only word of a change is taken from it (the keys are read again), so
//! of each message at most [`MESSAGE_PREFIX`] bytes are kept: the
//! gateway writes a message's fields in their protobuf order (header,
//! `created`, `canceled`, `compact_revision`, then `events`), and only an
//! event's key and value make a message longer, so a longer message is
//! word of a change, its rest read and dropped.

use std::collections::VecDeque;
use std::io::{self, ErrorKind};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::base64;
use super::http::{Body, Connection};

/// How much of one watch message is kept.
pub(super) const MESSAGE_PREFIX: usize = 4 * 1024;

/// What a watch message says.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Message {
    /// A watch was created.
    Created,
    /// Keys changed.
    Changed,
    /// The revision the watch started from is compacted away: the keys
    /// must be read again and the watch made anew from now.
    Compacted,
    /// The watch ended (canceled, or the gateway's error).
    Ended(String),
    /// Anything else (a progress notice).
    Other,
}

pub(super) struct Watch {
    connection: Connection,
    body: Body,
    messages: Messages,
}

/// The stream's bytes cut into messages, each one's first bytes kept.
#[derive(Default)]
struct Messages {
    /// The current message's first bytes.
    message: Vec<u8>,
    /// The current message went past [`MESSAGE_PREFIX`].
    long: bool,
    /// Messages whole and not yet taken.
    ready: VecDeque<Message>,
}

impl Messages {
    /// Cuts `rest` into messages at each `\n`.
    fn take(&mut self, mut rest: &[u8]) {
        while !rest.is_empty() {
            let (part, done) = match rest.iter().position(|&b| b == b'\n') {
                Some(i) => (&rest[..i], true),
                None => (rest, false),
            };
            let room = MESSAGE_PREFIX - self.message.len();
            if part.len() > room {
                self.long = true;
            }
            self.message
                .extend_from_slice(&part[..part.len().min(room)]);
            rest = &rest[(part.len() + usize::from(done)).min(rest.len())..];
            if done {
                let message = classify(&self.message, self.long);
                self.message.clear();
                self.long = false;
                if !matches!(message, Message::Other) {
                    self.ready.push_back(message);
                }
            }
        }
    }
}

impl Watch {
    /// Opens the stream watching each of `keys` from `start` (the next
    /// revision wanted; `None`: from now).
    pub(super) fn open(
        authority: &str,
        timeout: Duration,
        keys: &[String],
        start: Option<i64>,
    ) -> io::Result<Self> {
        let mut request = Vec::new();
        for key in keys {
            let mut create = json!({ "key": base64::encode(key.as_bytes()) });
            if let Some(start) = start {
                create["start_revision"] = json!(start.to_string());
            }
            let one = json!({ "create_request": create });
            serde_json::to_writer(&mut request, &one).map_err(io::Error::other)?;
        }
        let mut connection = Connection::open(authority, timeout)?;
        let body = connection.post(authority, "/v3/watch", &request)?;
        Ok(Watch {
            connection,
            body,
            messages: Messages::default(),
        })
    }

    /// The next whole message, waiting at most `timeout` for it: `Ok(None)`
    /// when none came whole in time (what came is kept), `Err` when the
    /// stream is lost.
    pub(super) fn next(&mut self, timeout: Duration) -> io::Result<Option<Message>> {
        let deadline = Instant::now() + timeout;
        let mut buf = [0u8; 16 * 1024];
        while self.messages.ready.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.connection.set_read_timeout(left)?;
            let n = match self.connection.read_body(&mut self.body, &mut buf) {
                Ok(0) => {
                    return Err(io::Error::new(
                        ErrorKind::UnexpectedEof,
                        "the watch stream ended",
                    ));
                }
                Ok(n) => n,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(None);
                }
                Err(e) => return Err(e),
            };
            self.messages.take(&buf[..n]);
        }
        Ok(self.messages.ready.pop_front())
    }
}

/// What a message says, from its first bytes (`long`: there were more).
pub(super) fn classify(message: &[u8], long: bool) -> Message {
    if long {
        return Message::Changed;
    }
    if message.trim_ascii().is_empty() {
        return Message::Other;
    }
    let Ok(value) = serde_json::from_slice::<Value>(message) else {
        return Message::Ended(format!(
            "a watch message that is not JSON: {}",
            String::from_utf8_lossy(message)
        ));
    };
    if let Some(error) = value.get("error") {
        let message = error.get("message").and_then(Value::as_str);
        return Message::Ended(message.map_or_else(|| error.to_string(), str::to_owned));
    }
    let result = value.get("result").unwrap_or(&value);
    let flag = |name: &str| result.get(name).and_then(Value::as_bool) == Some(true);
    if flag("canceled") {
        let compacted = result
            .get("compact_revision")
            .and_then(|r| {
                r.as_str()
                    .and_then(|s| s.parse::<i64>().ok())
                    .or(r.as_i64())
            })
            .is_some_and(|r| r > 0);
        if compacted {
            return Message::Compacted;
        }
        let reason = result.get("cancel_reason").and_then(Value::as_str);
        return Message::Ended(format!(
            "the watch was canceled: {}",
            reason.unwrap_or("no reason given")
        ));
    }
    if flag("created") {
        return Message::Created;
    }
    match result.get("events").and_then(Value::as_array) {
        Some(events) if !events.is_empty() => Message::Changed,
        _ => Message::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_read_from_the_gateways_json() {
        let header =
            r#""header":{"cluster_id":"1","member_id":"2","revision":"3","raft_term":"2"}"#;
        let created = format!(r#"{{"result":{{{header},"created":true}}}}"#);
        assert_eq!(classify(created.as_bytes(), false), Message::Created);
        let event = format!(
            r#"{{"result":{{{header},"events":[{{"kv":{{"key":"L2E=","mod_revision":"3","value":"aGVsbG8="}}}}]}}}}"#
        );
        assert_eq!(classify(event.as_bytes(), false), Message::Changed);
        let compacted =
            format!(r#"{{"result":{{{header},"canceled":true,"compact_revision":"7"}}}}"#);
        assert_eq!(classify(compacted.as_bytes(), false), Message::Compacted);
        let canceled =
            format!(r#"{{"result":{{{header},"canceled":true,"cancel_reason":"gone"}}}}"#);
        assert_eq!(
            classify(canceled.as_bytes(), false),
            Message::Ended("the watch was canceled: gone".into())
        );
        let error =
            br#"{"error":{"grpc_code":14,"http_code":503,"message":"etcdserver: no leader"}}"#;
        assert_eq!(
            classify(error, false),
            Message::Ended("etcdserver: no leader".into())
        );
        assert_eq!(
            classify(format!(r#"{{"result":{{{header}}}}}"#).as_bytes(), false),
            Message::Other
        );
        // Cut short: only an event's value makes a message this long.
        assert_eq!(classify(&event.as_bytes()[..40], true), Message::Changed);
        assert!(matches!(classify(b"{\"res", false), Message::Ended(_)));
    }

    #[test]
    fn messages_are_cut_at_newlines_across_reads_and_long_ones_kept_short() {
        let header = r#""header":{"revision":"3"}"#;
        let created = format!("{{\"result\":{{{header},\"created\":true}}}}\n");
        let value = "A".repeat(3 * MESSAGE_PREFIX);
        let event = format!(
            "{{\"result\":{{{header},\"events\":[{{\"kv\":{{\"key\":\"L2E=\",\"value\":\"{value}\"}}}}]}}}}\n"
        );
        let stream = format!("{created}{event}{created}");
        for cut in [1, 7, 100, MESSAGE_PREFIX, stream.len()] {
            let mut messages = Messages::default();
            for part in stream.as_bytes().chunks(cut) {
                messages.take(part);
                assert!(messages.message.len() <= MESSAGE_PREFIX);
            }
            let got: Vec<_> = messages.ready.drain(..).collect();
            assert_eq!(
                got,
                [Message::Created, Message::Changed, Message::Created],
                "cut every {cut} bytes"
            );
            assert!(messages.message.is_empty() && !messages.long);
        }
    }
}
