//! The heartbeat: every interval, to each dashboard,
//! `POST /registry/machine` with the machine's form; a dashboard that does
//! not answer is retried with backoff and logged once until it answers.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Body;
use hyper::header::CONTENT_TYPE;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::task::JoinSet;

use crate::info::{Machine, SENTINEL_VERSION};
use crate::security::Writers;

/// How long one heartbeat may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// The longest wait between tries to a dashboard that is down.
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// The most of a dashboard's answer that is read (its registry answers a
/// JSON line of about 60 bytes); the rest is never read, and the
/// connection is closed.
const MAX_ANSWER_BYTES: usize = 4 * 1024;

/// The heartbeat's form for the machine, of application type `app_type`,
/// at Unix time `now_ms`.
pub(crate) fn form(machine: &Machine, app_type: i32, now_ms: u64) -> String {
    form_urlencoded::Serializer::new(String::new())
        .append_pair("app", &machine.app)
        .append_pair("app_type", &app_type.to_string())
        .append_pair("hostname", &machine.hostname)
        .append_pair("ip", &machine.ip.to_string())
        .append_pair("port", &machine.port.to_string())
        .append_pair("v", SENTINEL_VERSION)
        // Sentinel sends the time as "version": the dashboard keeps the
        // machine's last heartbeat by it.
        .append_pair("version", &now_ms.to_string())
        .append_pair("pid", &machine.pid.to_string())
        .append_pair("timestamp", &now_ms.to_string())
        .finish()
}

/// Runs until the task is aborted: beats every `interval` to each of
/// `dashboards` (`host:port` or `http://host:port[/prefix]`), each on a
/// task of its own so that a slow one delays no other, and before each
/// beat resolves the dashboard's name again into `writers` (dashboard `i`
/// in slot `i`). Each beat tells the application type `app_type` gives
/// then. Aborting this task drops the set, which aborts them.
pub(crate) async fn run(
    machine: Machine,
    dashboards: Vec<String>,
    interval: Duration,
    writers: Arc<Writers>,
    now_ms: impl Fn() -> u64 + Send + Sync + 'static,
    app_type: impl Fn() -> i32 + Send + Sync + 'static,
) {
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let now_ms = Arc::new(now_ms);
    let app_type = Arc::new(app_type);
    let mut beats = JoinSet::new();
    for (index, dashboard) in dashboards.into_iter().enumerate() {
        let (client, machine, now_ms) = (client.clone(), machine.clone(), Arc::clone(&now_ms));
        let app_type = Arc::clone(&app_type);
        let writers = Arc::clone(&writers);
        let uri = registry_uri(&dashboard);
        beats.spawn(async move {
            let mut failures = 0u32;
            loop {
                if let Some(ips) = resolve(&dashboard).await {
                    writers.set_dashboard(index, ips);
                }
                let body = form(&machine, app_type(), now_ms());
                match beat(&client, &uri, body).await {
                    Ok(()) => {
                        if failures > 0 {
                            tracing::info!(dashboard = %uri, "sentinel heartbeat: the dashboard answers again");
                        }
                        failures = 0;
                    }
                    Err(why) => {
                        if failures == 0 {
                            tracing::warn!(dashboard = %uri, %why, "sentinel heartbeat failed; retrying with backoff, logged again when it answers");
                        }
                        failures = failures.saturating_add(1);
                    }
                }
                let wait = if failures == 0 { interval } else { backoff(interval, failures) };
                tokio::time::sleep(wait).await;
            }
        });
    }
    while beats.join_next().await.is_some() {}
}

/// The wait before the next try after `failures` failures in a row:
/// doubling from the interval, at most a minute (or the interval when that
/// is longer).
fn backoff(interval: Duration, failures: u32) -> Duration {
    interval
        .saturating_mul(1 << failures.min(16))
        .min(MAX_BACKOFF.max(interval))
}

/// The `host:port` of a dashboard given as `host:port` or a URL (port 80
/// when the URL has none).
pub(crate) fn authority(dashboard: &str) -> String {
    let base = dashboard.trim();
    let rest = base
        .strip_prefix("http://")
        .or_else(|| base.strip_prefix("https://"))
        .unwrap_or(base);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let has_port = match authority.rsplit_once(']') {
        Some((_, after)) => after.starts_with(':'),
        None => authority.contains(':'),
    };
    if has_port {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    }
}

/// The addresses a dashboard's name resolves to now; `None` when it does
/// not resolve within the request timeout (the last ones known are kept).
async fn resolve(dashboard: &str) -> Option<Vec<std::net::IpAddr>> {
    let lookup = tokio::net::lookup_host(authority(dashboard));
    let found = tokio::time::timeout(REQUEST_TIMEOUT, lookup)
        .await
        .ok()?
        .ok()?;
    Some(found.map(|a| a.ip()).collect())
}

/// The registry address of a dashboard given as `host:port` or a URL.
pub(crate) fn registry_uri(dashboard: &str) -> String {
    let base = dashboard.trim().trim_end_matches('/');
    if base.starts_with("http://") || base.starts_with("https://") {
        format!("{base}/registry/machine")
    } else {
        format!("http://{base}/registry/machine")
    }
}

async fn beat(
    client: &Client<HttpConnector, Full<Bytes>>,
    uri: &str,
    body: String,
) -> Result<(), String> {
    let request = Request::post(uri)
        .header(
            CONTENT_TYPE,
            "application/x-www-form-urlencoded; charset=utf-8",
        )
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| e.to_string())?;
    let exchange = async {
        let response = client.request(request).await.map_err(|e| e.to_string())?;
        let status = response.status();
        // The dashboard's answer is a short line: a few KiB of it at most
        // are read, and dropping the rest closes the connection.
        let mut body = response.into_body();
        read_at_most(&mut body, MAX_ANSWER_BYTES).await;
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("dashboard answered {status}"))
        }
    };
    tokio::time::timeout(REQUEST_TIMEOUT, exchange)
        .await
        .map_err(|_| format!("no answer within {REQUEST_TIMEOUT:?}"))?
}

/// Reads `body` until it ends or `limit` bytes are read (plus what the
/// last frame brought); returns how many bytes were read.
async fn read_at_most<B: Body<Data = Bytes> + Unpin>(body: &mut B, limit: usize) -> usize {
    let mut read = 0;
    while read < limit {
        match body.frame().await {
            Some(Ok(frame)) => read += frame.data_ref().map_or(0, |data| data.len()),
            _ => break,
        }
    }
    read
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;

    /// A body without end, 1 KiB a frame, counting what was pulled.
    struct Endless {
        pulled: usize,
    }

    impl Body for Endless {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
            self.pulled += 1024;
            std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(Bytes::from_static(
                &[b'x'; 1024],
            )))))
        }
    }

    #[tokio::test]
    async fn an_endless_answer_is_read_a_few_kib_at_most() {
        let mut body = Endless { pulled: 0 };
        let read = read_at_most(&mut body, MAX_ANSWER_BYTES).await;
        assert_eq!(read, MAX_ANSWER_BYTES);
        assert_eq!(body.pulled, MAX_ANSWER_BYTES);
    }

    /// A dashboard that answers 200 and then streams a body without end,
    /// as fast as the connection takes it: one beat reads a few KiB, drops
    /// the connection and returns, long before its timeout.
    #[tokio::test]
    async fn a_dashboard_streaming_an_endless_answer_costs_one_short_beat() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        // Small buffers on the dashboard's side, so that what it manages
        // to write is close to what the beat read.
        socket.set_send_buffer_size(4096).unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let listener = socket.listen(8).unwrap();
        let addr = listener.local_addr().unwrap();
        let written = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&written);
        let dashboard = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request).await;
            stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n")
                .await
                .unwrap();
            let chunk = [b"4000\r\n".as_slice(), &[b'x'; 0x4000], b"\r\n"].concat();
            // Until the beat closes the connection.
            while stream.write_all(&chunk).await.is_ok() {
                counter.fetch_add(0x4000, Ordering::Relaxed);
            }
        });
        let client: Client<HttpConnector, Full<Bytes>> =
            Client::builder(TokioExecutor::new()).build_http();
        let uri = format!("http://{addr}/registry/machine");
        let beat = tokio::time::timeout(2 * REQUEST_TIMEOUT, beat(&client, &uri, "app=a".into()))
            .await
            .expect("the beat did not end within its timeout");
        assert_eq!(beat, Ok(()));
        tokio::time::timeout(REQUEST_TIMEOUT, dashboard)
            .await
            .expect("the connection was kept open after the beat")
            .unwrap();
        // What the beat read, plus what the kernel's buffers took: far
        // from the gigabytes a read to the end would take in 3 s.
        let written = written.load(Ordering::Relaxed);
        assert!(written < 8 << 20, "{written} bytes written to the beat");
    }

    #[test]
    fn a_dashboard_authority_has_a_port() {
        assert_eq!(authority("10.0.0.5:8080"), "10.0.0.5:8080");
        assert_eq!(authority("http://d.example/sentinel"), "d.example:80");
        assert_eq!(authority("http://[::1]:8080/x"), "[::1]:8080");
        assert_eq!(authority(" https://d.example:9/ "), "d.example:9");
    }

    #[test]
    fn backoff_doubles_up_to_a_minute() {
        let second = Duration::from_secs(1);
        assert_eq!(backoff(second, 1), 2 * second);
        assert_eq!(backoff(second, 3), 8 * second);
        assert_eq!(backoff(second, 40), MAX_BACKOFF);
        assert_eq!(backoff(2 * MAX_BACKOFF, 5), 2 * MAX_BACKOFF);
    }

    #[test]
    fn the_form_has_every_field_the_dashboard_reads() {
        let machine = Machine {
            app: "a b".into(),
            app_type: None,
            hostname: "h".into(),
            ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)),
            port: 8720,
            pid: 42,
        };
        let form = form(&machine, 1, 5);
        let pairs: Vec<(String, String)> = form_urlencoded::parse(form.as_bytes())
            .into_owned()
            .collect();
        let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        assert_eq!(get("app"), Some("a b"));
        assert_eq!(get("app_type"), Some("1"));
        assert_eq!(get("ip"), Some("10.0.0.7"));
        assert_eq!(get("port"), Some("8720"));
        assert_eq!(get("v"), Some(SENTINEL_VERSION));
        assert_eq!(get("version"), Some("5"));
        assert_eq!(get("pid"), Some("42"));
        assert_eq!(get("hostname"), Some("h"));
        assert_eq!(get("timestamp"), Some("5"));
        assert_eq!(
            registry_uri("http://d:8080/sentinel/"),
            "http://d:8080/sentinel/registry/machine"
        );
        assert_eq!(registry_uri("d:8080"), "http://d:8080/registry/machine");
    }
}
