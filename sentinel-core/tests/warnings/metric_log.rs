//! A metric log whose directory cannot be written: the warning is logged
//! once, however long the error lasts.

use sentinel_flow_core::Sentinel;
use sentinel_flow_core::log::{MetricLogConfig, MetricWriter};

use crate::support::warnings::count_warnings;
use crate::support::{T0, call, instance};

fn writer(sentinel: &Sentinel, dir: &std::path::Path) -> MetricWriter {
    sentinel.metric_writer(MetricLogConfig::new("app").dir(dir))
}

#[test]
fn a_lasting_disk_error_is_logged_once() {
    let (clock, sentinel) = instance();
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "not a directory").unwrap();
    let mut writer = writer(&sentinel, &blocker.join("logs"));
    let warnings = count_warnings(|| {
        for second in 0..10 {
            call(&clock, &sentinel, "a", 1, false);
            clock.set(T0 + (second + 1) * 1_000);
            writer.tick(&sentinel);
        }
    });
    assert_eq!(warnings, 1);
}
