//! The heartbeat: every interval, to each dashboard,
//! `POST /registry/machine` with the machine's form; a dashboard that does
//! not answer is retried with backoff and logged once until it answers.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::header::CONTENT_TYPE;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::task::JoinSet;

use crate::info::{Machine, SENTINEL_VERSION};

/// How long one heartbeat may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(3);
/// The longest wait between tries to a dashboard that is down.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// The heartbeat's form for the machine, at Unix time `now_ms`.
pub(crate) fn form(machine: &Machine, now_ms: u64) -> String {
    form_urlencoded::Serializer::new(String::new())
        .append_pair("app", &machine.app)
        .append_pair("app_type", &machine.app_type.to_string())
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
/// task of its own so that a slow one delays no other. Aborting this task
/// drops the set, which aborts them.
pub(crate) async fn run(
    machine: Machine,
    dashboards: Vec<String>,
    interval: Duration,
    now_ms: impl Fn() -> u64 + Send + Sync + 'static,
) {
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let now_ms = Arc::new(now_ms);
    let mut beats = JoinSet::new();
    for dashboard in dashboards {
        let (client, machine, now_ms) = (client.clone(), machine.clone(), Arc::clone(&now_ms));
        let uri = registry_uri(&dashboard);
        beats.spawn(async move {
            let mut failures = 0u32;
            loop {
                let body = form(&machine, now_ms());
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
        // Read the answer whole so the connection can be reused.
        let _ = response.into_body().collect().await;
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

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use super::*;

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
            app_type: 1,
            hostname: "h".into(),
            ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)),
            port: 8720,
            pid: 42,
        };
        let form = form(&machine, 5);
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
