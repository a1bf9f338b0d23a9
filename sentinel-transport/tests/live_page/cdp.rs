//! Just enough of the Chrome DevTools Protocol for the live page's test:
//! start headless Chromium, attach to one page, send commands, collect the
//! events that mean trouble (console errors, uncaught exceptions, failed
//! requests).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use futures_util::stream::SplitSink;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

const COMMAND_TIMEOUT: Duration = Duration::from_secs(15);
const START_TIMEOUT: Duration = Duration::from_secs(20);

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Value>>>>;
type Sink = SplitSink<WebSocketStream<MaybeTlsStream<TcpStream>>, Message>;

/// Headless Chromium, killed on drop.
pub(crate) struct Browser {
    child: Child,
    sink: tokio::sync::Mutex<Sink>,
    pending: Pending,
    next_id: AtomicU64,
    /// What went wrong in the page: console errors, exceptions, failed requests.
    pub(crate) problems: Arc<Mutex<Vec<String>>>,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Chromium to run: `$CHROMIUM`, or the first of the usual names on
/// `PATH`. Fails with how to install it: the test must not pass without one.
fn find_chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("CHROMIUM") {
        return PathBuf::from(path);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ] {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "the live page's browser test needs Chromium, and none was found on PATH \
         (tried chromium, chromium-browser, google-chrome): install it with \
         `apt-get update && apt-get install -y chromium` (Debian), or set CHROMIUM=/path/to/chrome"
    );
}

impl Browser {
    /// Starts Chromium with a fresh profile in `profile` and connects to it.
    pub(crate) async fn launch(profile: &Path) -> Browser {
        let binary = find_chromium();
        let mut child = Command::new(&binary)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-dev-shm-usage",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                "--window-size=1360,1100",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
        let stderr = child.stderr.take().expect("piped stderr");
        let (found, url) = mpsc::channel();
        // Chromium prints where its DevTools listen; the rest of its stderr
        // is drained so that it never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(at) = line.find("ws://") {
                    let _ = found.send(line[at..].trim().to_owned());
                }
            }
        });
        let ws_url = match url.recv_timeout(START_TIMEOUT) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "{} printed no DevTools address within {START_TIMEOUT:?}",
                    binary.display()
                );
            }
        };
        let (socket, _) = tokio_tungstenite::connect_async(ws_url.as_str())
            .await
            .expect("connect to Chromium's DevTools");
        let (sink, mut stream) = socket.split();
        let pending: Pending = Arc::default();
        let problems: Arc<Mutex<Vec<String>>> = Arc::default();
        let (p, q) = (Arc::clone(&pending), Arc::clone(&problems));
        tokio::spawn(async move {
            while let Some(Ok(message)) = stream.next().await {
                let Message::Text(text) = message else {
                    continue;
                };
                let Ok(value) = serde_json::from_str::<Value>(&text) else {
                    continue;
                };
                match value.get("id").and_then(Value::as_u64) {
                    Some(id) => {
                        if let Some(reply) = p.lock().unwrap().remove(&id) {
                            let _ = reply.send(value);
                        }
                    }
                    None => {
                        if let Some(problem) = trouble(&value) {
                            q.lock().unwrap().push(problem);
                        }
                    }
                }
            }
        });
        Browser {
            child,
            sink: tokio::sync::Mutex::new(sink),
            pending,
            next_id: AtomicU64::new(1),
            problems,
        }
    }

    /// Sends one command (to the page `session`, or to the browser) and
    /// returns its result; panics on an error or a timeout.
    pub(crate) async fn call(&self, session: Option<&str>, method: &str, params: Value) -> Value {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let (reply, answer) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, reply);
        self.sink
            .lock()
            .await
            .send(Message::text(message.to_string()))
            .await
            .expect("send to Chromium");
        let answer = tokio::time::timeout(COMMAND_TIMEOUT, answer)
            .await
            .unwrap_or_else(|_| panic!("{method}: no answer within {COMMAND_TIMEOUT:?}"))
            .expect("Chromium closed the connection");
        if let Some(error) = answer.get("error") {
            panic!("{method} failed: {error}");
        }
        answer["result"].clone()
    }

    /// Opens a page, attaches to it and turns on the events that report
    /// trouble; returns its session id.
    pub(crate) async fn new_page(&self, width: u32, height: u32) -> String {
        let target = self
            .call(None, "Target.createTarget", json!({ "url": "about:blank" }))
            .await;
        let attached = self
            .call(
                None,
                "Target.attachToTarget",
                json!({ "targetId": target["targetId"], "flatten": true }),
            )
            .await;
        let session = attached["sessionId"]
            .as_str()
            .expect("session id")
            .to_owned();
        let s = Some(session.as_str());
        for domain in [
            "Runtime.enable",
            "Log.enable",
            "Network.enable",
            "Page.enable",
        ] {
            self.call(s, domain, json!({})).await;
        }
        self.call(
            s,
            "Emulation.setDeviceMetricsOverride",
            json!({ "width": width, "height": height, "deviceScaleFactor": 1, "mobile": false }),
        )
        .await;
        // Otherwise a full-page screenshot loses a scrollbar's width at the
        // right edge.
        self.call(
            s,
            "Emulation.setScrollbarsHidden",
            json!({ "hidden": true }),
        )
        .await;
        session
    }

    /// Evaluates `expression` in the page and returns its value.
    pub(crate) async fn eval(&self, session: &str, expression: &str) -> Value {
        let result = self
            .call(
                Some(session),
                "Runtime.evaluate",
                json!({ "expression": expression, "returnByValue": true, "awaitPromise": true }),
            )
            .await;
        if let Some(exception) = result.get("exceptionDetails") {
            panic!("evaluating in the page threw: {exception}");
        }
        result["result"]["value"].clone()
    }

    /// A PNG of the whole page.
    pub(crate) async fn screenshot(&self, session: &str) -> Vec<u8> {
        let shot = self
            .call(
                Some(session),
                "Page.captureScreenshot",
                json!({ "format": "png", "captureBeyondViewport": true }),
            )
            .await;
        decode_base64(shot["data"].as_str().expect("screenshot data"))
    }
}

/// The events that mean the page misbehaved, as a line each.
fn trouble(event: &Value) -> Option<String> {
    let params = &event["params"];
    match event["method"].as_str()? {
        "Runtime.consoleAPICalled"
            if matches!(params["type"].as_str(), Some("error" | "assert")) =>
        {
            Some(format!(
                "console.{}: {}",
                params["type"].as_str()?,
                params["args"]
            ))
        }
        "Runtime.exceptionThrown" => Some(format!(
            "uncaught exception: {}",
            params["exceptionDetails"]
        )),
        "Log.entryAdded" if params["entry"]["level"] == "error" => {
            Some(format!("browser log error: {}", params["entry"]))
        }
        "Network.loadingFailed" => Some(format!("request failed: {params}")),
        "Network.responseReceived" if params["response"]["status"].as_u64()? >= 400 => {
            Some(format!(
                "request answered {}: {}",
                params["response"]["status"], params["response"]["url"]
            ))
        }
        _ => None,
    }
}

/// Standard base64 (the screenshot's encoding), ignoring padding.
fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {:?}", c as char),
    };
    let digits: Vec<u8> = text.bytes().filter(|&c| c != b'=').map(value).collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let mut word = 0u32;
        for (i, &d) in chunk.iter().enumerate() {
            word |= u32::from(d) << (18 - 6 * i);
        }
        let bytes = word.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}
