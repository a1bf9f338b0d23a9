//! Who this process is, as the heartbeat and `basicInfo` report it.

use std::net::IpAddr;

use sentinel_flow_core::Sentinel;

/// The Sentinel version reported to the dashboard: Sentinel's wire
/// protocol version, with our crate's version as a suffix. The dashboard
/// posts rule changes as forms only to versions >= 1.6.0 (and trusts the
/// Content-Type of 1.7.1 and later), so this must stay at least 1.7.1.
pub const SENTINEL_VERSION: &str = concat!("1.8.9-rs.", env!("CARGO_PKG_VERSION"));

/// The machine as the dashboard knows it.
#[derive(Clone, Debug)]
pub(crate) struct Machine {
    pub(crate) app: String,
    /// The application type configured; `None`: told by the rules in
    /// force ([`app_type`]).
    pub(crate) app_type: Option<i32>,
    pub(crate) hostname: String,
    pub(crate) ip: IpAddr,
    pub(crate) port: u16,
    pub(crate) pid: u32,
}

/// Sentinel's application type of the machine: the one configured, else 1
/// (an API gateway, whose gateway rules and API definitions the dashboard
/// then manages) while the instance has gateway rules or API definitions
/// in force, else 0 (a common application).
pub(crate) fn app_type(configured: Option<i32>, sentinel: &Sentinel) -> i32 {
    configured.unwrap_or_else(|| {
        let gateway = sentinel.gateway_in_force();
        i32::from(!gateway.rules().is_empty() || !gateway.api_definitions().is_empty())
    })
}

/// The host's name: `/proc/sys/kernel/hostname`, `$HOSTNAME`, or
/// `localhost`.
pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}
