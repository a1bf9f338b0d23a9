//! Where system rules get the machine's load and CPU usage.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use once_cell::sync::Lazy;

/// The machine's load and CPU usage, as system rules read them. Entries
/// read it on the hot path (only inbound ones, and only while a load or CPU
/// limit is set), so an implementation should return cached values.
///
/// Tests inject a [`ManualStatus`] with
/// [`SentinelBuilder::system_status`](crate::SentinelBuilder::system_status).
pub trait SystemStatus: Send + Sync + 'static {
    /// The one-minute load average; `None` when unknown (the load limit is
    /// then not applied).
    fn load_average(&self) -> Option<f64>;

    /// The CPU usage over the last sample, 0 to 1; `None` when unknown.
    fn cpu_usage(&self) -> Option<f64>;
}

/// An unknown reading, stored as these bits.
const UNKNOWN: u64 = u64::MAX;

fn store(cell: &AtomicU64, value: Option<f64>) {
    cell.store(value.map_or(UNKNOWN, f64::to_bits), Ordering::Relaxed);
}

fn load(cell: &AtomicU64) -> Option<f64> {
    match cell.load(Ordering::Relaxed) {
        UNKNOWN => None,
        bits => Some(f64::from_bits(bits)),
    }
}

/// A status set by hand, for tests; clones share their values.
///
/// ```
/// use sentinel_flow_core::system::{ManualStatus, SystemStatus};
///
/// let status = ManualStatus::new();
/// assert_eq!(status.load_average(), None);
/// status.set_load_average(Some(3.5));
/// assert_eq!(status.clone().load_average(), Some(3.5));
/// ```
#[derive(Clone, Debug)]
pub struct ManualStatus {
    values: Arc<[AtomicU64; 2]>,
}

impl ManualStatus {
    /// A status with both readings unknown.
    pub fn new() -> Self {
        ManualStatus {
            values: Arc::new([AtomicU64::new(UNKNOWN), AtomicU64::new(UNKNOWN)]),
        }
    }

    /// Sets the load average (`None`: unknown).
    pub fn set_load_average(&self, load: Option<f64>) {
        store(&self.values[0], load);
    }

    /// Sets the CPU usage, 0 to 1 (`None`: unknown).
    pub fn set_cpu_usage(&self, usage: Option<f64>) {
        store(&self.values[1], usage);
    }
}

impl Default for ManualStatus {
    fn default() -> Self {
        ManualStatus::new()
    }
}

impl SystemStatus for ManualStatus {
    fn load_average(&self) -> Option<f64> {
        load(&self.values[0])
    }

    fn cpu_usage(&self) -> Option<f64> {
        load(&self.values[1])
    }
}

/// The machine's status read from `/proc` once per second by one
/// background thread for the whole process, started on the first reading.
/// On other systems both readings are unknown (load and CPU limits are off),
/// which is logged once.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcStatus;

/// The latest `/proc` readings: load, CPU usage.
static SAMPLED: Lazy<[AtomicU64; 2]> = Lazy::new(|| {
    let cells = [AtomicU64::new(UNKNOWN), AtomicU64::new(UNKNOWN)];
    start_sampler();
    cells
});

#[cfg(target_os = "linux")]
fn start_sampler() {
    let spawned = std::thread::Builder::new()
        .name("sentinel-system-status".into())
        .spawn(|| {
            let mut previous = None;
            loop {
                let load = std::fs::read_to_string("/proc/loadavg")
                    .ok()
                    .and_then(|text| parse_loadavg(&text));
                let times = std::fs::read_to_string("/proc/stat")
                    .ok()
                    .and_then(|text| parse_cpu_times(&text));
                let usage = match (previous, times) {
                    (Some(before), Some(now)) => cpu_usage(before, now),
                    _ => None,
                };
                previous = times.or(previous);
                store(&SAMPLED[0], load);
                store(&SAMPLED[1], usage);
                std::thread::sleep(std::time::Duration::from_secs(1));
            }
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "sentinel: no system status thread; load and CPU limits are off");
    }
}

#[cfg(not(target_os = "linux"))]
fn start_sampler() {
    tracing::warn!(
        "sentinel: system load and CPU usage are read on Linux only; load and CPU limits are off"
    );
}

impl SystemStatus for ProcStatus {
    fn load_average(&self) -> Option<f64> {
        load(&SAMPLED[0])
    }

    fn cpu_usage(&self) -> Option<f64> {
        load(&SAMPLED[1])
    }
}

/// The one-minute load average from `/proc/loadavg`.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// Busy and total CPU time from the `cpu` line of `/proc/stat`.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn parse_cpu_times(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|line| line.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal (guest time is in user).
    let total: u64 = fields.iter().take(8).sum();
    let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// The busy share of CPU time between two readings.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn cpu_usage((busy0, total0): (u64, u64), (busy1, total1): (u64, u64)) -> Option<f64> {
    let total = total1.checked_sub(total0).filter(|&t| t > 0)?;
    let busy = busy1.saturating_sub(busy0).min(total);
    Some(busy as f64 / total as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_parse() {
        assert_eq!(parse_loadavg("0.52 0.58 0.59 2/1234 5678\n"), Some(0.52));
        assert_eq!(parse_loadavg(""), None);
        let stat = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\nintr 5\n";
        assert_eq!(parse_cpu_times(stat), Some((150, 1000)));
        assert_eq!(parse_cpu_times("intr 5\n"), None);
        assert_eq!(cpu_usage((150, 1000), (450, 1400)), Some(0.75));
        assert_eq!(cpu_usage((150, 1000), (150, 1000)), None, "no time passed");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn proc_status_reads_this_machine() {
        // The first reading starts the sampler; its first pass stores the
        // load at once (CPU usage needs two passes, a second apart).
        let status = ProcStatus;
        for _ in 0..5_000 {
            if status.load_average().is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let load = status.load_average().expect("a load average within 5 s");
        assert!(load >= 0.0);
    }
}
