//! Who this process is, as the heartbeat and `basicInfo` report it.

use std::net::IpAddr;

/// The Sentinel version reported to the dashboard: Sentinel's wire
/// protocol version, with our crate's version as a suffix. The dashboard
/// posts rule changes as forms only to versions >= 1.6.0 (and trusts the
/// Content-Type of 1.7.1 and later), so this must stay at least 1.7.1.
pub const SENTINEL_VERSION: &str = concat!("1.8.9-rs.", env!("CARGO_PKG_VERSION"));

/// The machine as the dashboard knows it.
#[derive(Clone, Debug)]
pub(crate) struct Machine {
    pub(crate) app: String,
    pub(crate) app_type: i32,
    pub(crate) hostname: String,
    pub(crate) ip: IpAddr,
    pub(crate) port: u16,
    pub(crate) pid: u32,
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
