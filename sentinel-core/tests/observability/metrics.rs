//! Observability through the public API, on a `ManualClock`: the metric log
//! (exact lines, a late writer, rolling, an unwritable directory retried,
//! the searcher), snapshots, and the Prometheus text.

use std::path::Path;

use sentinel_flow_core::degrade::{BreakerState, DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::log::{MetricLine, MetricLogConfig, MetricSearcher, MetricWriter};
use sentinel_flow_core::{DEFAULT_CONTEXT, ManualClock, Sentinel};

use crate::support::{T0, call, instance, load};

fn writer(sentinel: &Sentinel, dir: &Path) -> MetricWriter {
    sentinel.metric_writer(MetricLogConfig::new("app").dir(dir))
}

fn read_all(dir: &Path) -> Vec<MetricLine> {
    MetricSearcher::new(dir, "app")
        .find(0, u64::MAX, None)
        .unwrap()
}

fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

// ---- metric log ----

#[test]
fn metric_log_lines_for_a_scripted_pattern() {
    let (clock, sentinel) = instance();
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(&sentinel, dir.path());
    load(&sentinel, [FlowRule::new("a", 2.0)]);

    // Second 0: three calls on `a` (the third refused by the rule, the
    // second failing), one on `b`.
    assert!(call(&clock, &sentinel, "a", 10, false));
    assert!(call(&clock, &sentinel, "a", 20, true));
    assert!(!call(&clock, &sentinel, "a", 0, false));
    assert!(call(&clock, &sentinel, "b", 20, false));
    // Nothing is written while the second is not over.
    assert_eq!(writer.write_pending(&sentinel).unwrap(), 0);
    // Second 1: nothing. Second 2: two calls on `b`; one still inside.
    clock.set(T0 + 2_000);
    assert!(call(&clock, &sentinel, "b", 5, false));
    assert!(call(&clock, &sentinel, "b", 15, false));
    let inside = sentinel.entry("b").unwrap();
    clock.set(T0 + 3_500);

    assert_eq!(writer.write_pending(&sentinel).unwrap(), 3);
    let text = std::fs::read_to_string(dir.path().join("app-metrics.log.2023-11-14")).unwrap();
    assert_eq!(
        text,
        "1700000000000|2023-11-14 22:13:20|a|2|1|2|1|15|0|0|0\n\
         1700000000000|2023-11-14 22:13:20|b|1|0|1|0|20|0|1|0\n\
         1700000002000|2023-11-14 22:13:22|b|3|0|2|0|10|0|1|0\n"
    );
    // Nothing twice; a second without traffic writes nothing.
    assert_eq!(writer.write_pending(&sentinel).unwrap(), 0);
    clock.set(T0 + 4_999);
    assert_eq!(writer.write_pending(&sentinel).unwrap(), 0);
    drop(inside);
    clock.set(T0 + 5_000);
    assert_eq!(writer.write_pending(&sentinel).unwrap(), 1);
    let last = read_all(dir.path()).pop().unwrap();
    // Entered at 2.020 s, completed at 4.999 s: counted in second 4.
    assert_eq!(
        (last.timestamp_ms, last.success, last.avg_rt),
        (T0 + 4_000, 1, 2_979)
    );
}

#[test]
fn late_writer_writes_every_missed_second_once() {
    let (clock, sentinel) = instance();
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(&sentinel, dir.path());
    for second in 0..5 {
        clock.set(T0 + second * 1_000 + 100);
        for _ in 0..=second {
            call(&clock, &sentinel, "a", 1, false);
        }
        call(&clock, &sentinel, "b", 2, false);
    }
    clock.set(T0 + 5_000);
    assert_eq!(writer.write_pending(&sentinel).unwrap(), 10);
    assert_eq!(writer.write_pending(&sentinel).unwrap(), 0);

    let lines = read_all(dir.path());
    let got: Vec<(u64, &str, u64)> = lines
        .iter()
        .map(|l| (l.timestamp_ms - T0, l.resource.as_str(), l.pass))
        .collect();
    let mut want = Vec::new();
    for second in 0..5 {
        want.push((second * 1_000, "a", second + 1));
        want.push((second * 1_000, "b", 1));
    }
    assert_eq!(got, want, "in order, each second once");

    // Later seconds carry on from there.
    clock.set(T0 + 9_000);
    call(&clock, &sentinel, "b", 1, false);
    clock.set(T0 + 10_000);
    assert_eq!(writer.write_pending(&sentinel).unwrap(), 1);
    assert_eq!(read_all(dir.path()).len(), 11);
}

#[test]
fn writer_starts_from_its_own_second() {
    let (clock, sentinel) = instance();
    call(&clock, &sentinel, "a", 1, false);
    clock.set(T0 + 1_500);
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(&sentinel, dir.path());
    call(&clock, &sentinel, "a", 1, false);
    clock.set(T0 + 2_000);
    assert_eq!(writer.write_pending(&sentinel).unwrap(), 1);
    assert_eq!(read_all(dir.path())[0].timestamp_ms, T0 + 1_000);
}

#[test]
fn files_roll_by_size_and_count() {
    let (clock, sentinel) = instance();
    let dir = tempfile::tempdir().unwrap();
    // A line is 52 bytes here: two lines per file.
    let config = MetricLogConfig::new("app")
        .dir(dir.path())
        .max_file_size(110)
        .max_files(3);
    let mut writer = sentinel.metric_writer(config);
    for second in 0..10 {
        clock.set(T0 + second * 1_000);
        call(&clock, &sentinel, "a", 1, false);
        clock.set(T0 + (second + 1) * 1_000);
        writer.tick(&sentinel);
    }
    assert_eq!(
        file_names(dir.path()),
        [
            "app-metrics.log.2023-11-14.2",
            "app-metrics.log.2023-11-14.3",
            "app-metrics.log.2023-11-14.4"
        ]
    );
    let seconds: Vec<u64> = read_all(dir.path())
        .iter()
        .map(|l| (l.timestamp_ms - T0) / 1_000)
        .collect();
    assert_eq!(seconds, [4, 5, 6, 7, 8, 9]);
}

#[test]
fn a_new_day_starts_a_new_file_and_a_restart_appends() {
    // 2023-11-14 23:59:59 UTC.
    let start = 1_700_006_399_000;
    let clock = ManualClock::new(start);
    let sentinel = Sentinel::builder().clock(clock.clone()).build();
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(&sentinel, dir.path());
    call(&clock, &sentinel, "a", 1, false);
    clock.set(start + 1_000);
    call(&clock, &sentinel, "a", 1, false);
    clock.set(start + 2_000);
    assert_eq!(writer.write_pending(&sentinel).unwrap(), 2);
    // A second writer (a restart) appends to the day's file.
    let mut again = self::writer(&sentinel, dir.path());
    call(&clock, &sentinel, "a", 1, false);
    clock.set(start + 3_000);
    assert_eq!(again.write_pending(&sentinel).unwrap(), 1);
    assert_eq!(
        file_names(dir.path()),
        ["app-metrics.log.2023-11-14", "app-metrics.log.2023-11-15"]
    );
    assert_eq!(read_all(dir.path()).len(), 3);
    let searcher = MetricSearcher::new(dir.path(), "app");
    assert_eq!(
        searcher.find(start + 1_000, u64::MAX, None).unwrap().len(),
        2
    );
}

#[test]
fn unwritable_directory_is_retried_without_losing_seconds() {
    let (clock, sentinel) = instance();
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("file");
    std::fs::write(&blocker, "not a directory").unwrap();
    let logs = blocker.join("logs");
    let mut writer = writer(&sentinel, &logs);

    call(&clock, &sentinel, "a", 1, false);
    clock.set(T0 + 1_000);
    assert!(writer.write_pending(&sentinel).is_err());
    writer.tick(&sentinel);
    let error = writer.last_error().expect("error kept").to_owned();
    // Entries are not affected.
    assert!(call(&clock, &sentinel, "a", 1, false));
    // No new try within the second; the same error is kept (logged once).
    clock.set(T0 + 1_500);
    writer.tick(&sentinel);
    clock.set(T0 + 2_000);
    writer.tick(&sentinel);
    assert_eq!(writer.last_error(), Some(error.as_str()));

    // The disk comes back: both seconds are written, once.
    std::fs::remove_file(&blocker).unwrap();
    clock.set(T0 + 3_100);
    writer.tick(&sentinel);
    assert_eq!(writer.last_error(), None);
    let seconds: Vec<u64> = read_all(&logs)
        .iter()
        .map(|l| l.timestamp_ms - T0)
        .collect();
    assert_eq!(seconds, [0, 1_000]);
}

#[test]
fn searcher_round_trip_by_time_and_resource() {
    let (clock, sentinel) = instance();
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(&sentinel, dir.path());
    for second in 0..4 {
        clock.set(T0 + second * 1_000);
        call(&clock, &sentinel, "a", 3, false);
        call(&clock, &sentinel, "b|x", 4, true);
    }
    clock.set(T0 + 4_000);
    writer.write_pending(&sentinel).unwrap();
    // A torn line at the end is skipped.
    let path = dir.path().join("app-metrics.log.2023-11-14");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("1700000004000|2023-11-14 22:13:24|a|1|0");
    std::fs::write(&path, text).unwrap();

    let searcher = MetricSearcher::new(dir.path(), "app");
    let lines = searcher.find(T0 + 1_000, T0 + 2_000, Some("b|x")).unwrap();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0],
        MetricLine {
            timestamp_ms: T0 + 1_000,
            resource: "b|x".into(),
            pass: 1,
            block: 0,
            success: 1,
            exception: 1,
            avg_rt: 4,
            occupied_pass: 0,
            concurrency: 0,
            classification: 0,
        }
    );
    assert_eq!(searcher.find(0, u64::MAX, None).unwrap().len(), 8);
    assert!(searcher.find(0, u64::MAX, Some("c")).unwrap().is_empty());
    assert!(
        MetricSearcher::new(dir.path(), "other")
            .find(0, u64::MAX, None)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn background_writer_stops_when_dropped() {
    let (clock, sentinel) = instance();
    let sentinel = std::sync::Arc::new(sentinel);
    let dir = tempfile::tempdir().unwrap();
    let handle = writer(&sentinel, dir.path())
        .start(std::sync::Arc::clone(&sentinel))
        .unwrap();
    call(&clock, &sentinel, "a", 1, false);
    clock.set(T0 + 1_000);
    // Dropping the handle runs a last poll and joins the thread.
    drop(handle);
    assert_eq!(read_all(dir.path()).len(), 1);
}

// ---- snapshots ----

#[test]
fn resource_snapshots_carry_figures_rules_and_breakers() {
    let (clock, sentinel) = instance();
    load(
        &sentinel,
        [FlowRule::new("a", 100.0), FlowRule::new("a", 200.0)],
    );
    load(
        &sentinel,
        [DegradeRule {
            min_request_amount: 1,
            id: Some(7),
            ..DegradeRule::new("a", DegradeGrade::ErrorCount, 0.0)
        }],
    );
    call(&clock, &sentinel, "a", 10, false);
    call(&clock, &sentinel, "a", 30, true); // trips the breaker
    assert!(!call(&clock, &sentinel, "a", 0, false));
    let _inside = sentinel.entry("b").unwrap();

    let resources = sentinel.resources();
    assert_eq!(resources.len(), 2);
    let a = &resources[0];
    assert_eq!(&*a.name, "a");
    assert_eq!(a.stats.pass_qps, 2.0);
    assert_eq!(a.stats.block_qps, 1.0);
    assert_eq!(a.stats.success_qps, 2.0);
    assert_eq!(a.stats.exception_qps, 1.0);
    assert_eq!(a.stats.avg_rt, 20.0);
    assert_eq!(a.stats.min_rt, 10);
    assert_eq!((a.stats.total_pass, a.stats.total_block), (2, 1));
    assert_eq!((a.stats.total_success, a.stats.total_exception), (2, 1));
    assert_eq!(
        (
            a.rules.flow,
            a.rules.degrade,
            a.rules.param_flow,
            a.rules.authority
        ),
        (2, 1, 0, 0)
    );
    assert_eq!(a.breakers.len(), 1);
    assert_eq!(a.breakers[0].rule.id, Some(7));
    assert_eq!(a.breakers[0].snapshot.state, BreakerState::Open);
    let b = &resources[1];
    assert_eq!((b.stats.concurrency, b.rules.flow), (1, 0));
    assert!(b.breakers.is_empty());

    // The second window empties; the minute totals stay.
    clock.advance_ms(1_500);
    let a = &sentinel.resources()[0];
    assert_eq!((a.stats.pass_qps, a.stats.total_pass), (0.0, 2));
}

#[test]
fn tree_snapshot_follows_contexts_and_nesting() {
    let (clock, sentinel) = instance();
    {
        let outer = sentinel.entry_builder("A").context("web").enter().unwrap();
        let inner = sentinel.entry_builder("B").parent(&outer).enter().unwrap();
        // A resource entered inside itself does not loop the tree.
        let again = sentinel.entry_builder("A").parent(&inner).enter().unwrap();
        clock.advance_ms(4);
        drop(again);
        drop(inner);
        drop(outer);
    }
    call(&clock, &sentinel, "A", 2, false);

    let tree = sentinel.tree();
    let contexts: Vec<&str> = tree.iter().map(|t| t.context.as_str()).collect();
    assert_eq!(contexts, [DEFAULT_CONTEXT, "web"]);
    let default = &tree[0];
    assert_eq!(default.children.len(), 1);
    assert_eq!(&*default.children[0].resource, "A");
    // The default context's share: the resource's less the named context's.
    assert_eq!(default.children[0].stats.total_pass, 1);
    assert_eq!(default.stats.total_pass, 1);

    let web = &tree[1];
    assert_eq!(web.children.len(), 1);
    let a = &web.children[0];
    assert_eq!((&*a.resource, a.stats.total_pass), ("A", 2));
    assert_eq!(a.children.len(), 1);
    let b = &a.children[0];
    assert_eq!((&*b.resource, b.stats.total_success), ("B", 1));
    assert!(b.children.is_empty(), "the cycle back to A is cut");
    assert_eq!(web.stats.total_pass, 2);
    // The same sums as the entrances give.
    let now = sentinel.now_ms();
    for (entrance, snapshot) in sentinel.entrances().iter().zip(&tree) {
        assert_eq!(entrance.snapshot(now), snapshot.stats);
    }
}

// ---- Prometheus ----

#[cfg(feature = "prometheus")]
mod prometheus {
    use std::collections::HashMap;

    use super::*;
    use crate::support::prometheus::{Key, key, parse};
    use sentinel_flow_core::prometheus::render_prometheus;

    /// The four counters of `resource`: pass, block (its series of every
    /// kind added up; none before the first block), success, exception.
    fn counters(samples: &HashMap<Key, f64>, resource: &str) -> [f64; 4] {
        let blocks = samples
            .iter()
            .filter(|((name, labels), _)| {
                name == "sentinel_block_total"
                    && labels
                        .first()
                        .is_some_and(|(k, v)| k == "resource" && v == resource)
                    && labels.get(1).is_some_and(|(k, _)| k == "kind")
            })
            .map(|(_, value)| value)
            .sum();
        let one = |name| samples[&key(name, &[("resource", resource)])];
        [
            one("sentinel_pass_total"),
            blocks,
            one("sentinel_success_total"),
            one("sentinel_exception_total"),
        ]
    }

    /// Counts of what a scripted pattern did: pass, block, success,
    /// exception, by resource.
    #[derive(Default)]
    struct Model(HashMap<&'static str, [f64; 4]>);

    impl Model {
        /// One call through `call`, counted.
        fn call(
            &mut self,
            clock: &ManualClock,
            sentinel: &Sentinel,
            resource: &'static str,
            rt: u64,
            error: bool,
        ) {
            let counts = self.0.entry(resource).or_default();
            if call(clock, sentinel, resource, rt, error) {
                counts[0] += 1.0;
                counts[2] += 1.0;
                counts[3] += f64::from(u8::from(error));
            } else {
                counts[1] += 1.0;
            }
        }

        /// Second `s` of the pattern: 2 to 8 calls on `a` (limited to 4 a
        /// second), one of them failing every eleventh second, and one on
        /// `b` in 5 seconds of 13. No period divides a minute, so a count
        /// over the last minute goes up and down.
        fn second(&mut self, clock: &ManualClock, sentinel: &Sentinel, s: u64) {
            clock.set(T0 + s * 1_000 + 100);
            for i in 0..(s % 7 + 2) {
                self.call(clock, sentinel, "a", 7 + i, s % 11 == 0 && i == 1);
            }
            if s % 13 < 5 {
                self.call(clock, sentinel, "b", 30, false);
            }
        }
    }

    fn limited() -> (ManualClock, Sentinel) {
        let (clock, sentinel) = instance();
        load(&sentinel, [FlowRule::new("a", 4.0)]);
        (clock, sentinel)
    }

    #[test]
    fn text_parses_back_to_the_figures() {
        let (clock, sentinel) = instance();
        let odd = "GET \"/a\\b\"\nx";
        load(&sentinel, [FlowRule::new(odd, 2.0)]);
        load(
            &sentinel,
            [
                DegradeRule {
                    min_request_amount: 1,
                    ..DegradeRule::new(odd, DegradeGrade::ErrorCount, 0.0)
                },
                DegradeRule {
                    id: Some(42),
                    ..DegradeRule::new("never", DegradeGrade::ErrorRatio, 0.5)
                },
            ],
        );
        call(&clock, &sentinel, odd, 10, false);
        call(&clock, &sentinel, odd, 30, true); // opens the breaker
        assert!(!call(&clock, &sentinel, odd, 0, false));
        let _inside = sentinel.entry("b").unwrap();

        // Exact within the second, before it is over.
        let (samples, types) = parse(&render_prometheus(&sentinel));
        for (name, kind) in [
            ("sentinel_pass_total", "counter"),
            ("sentinel_block_total", "counter"),
            ("sentinel_success_total", "counter"),
            ("sentinel_exception_total", "counter"),
            ("sentinel_concurrency", "gauge"),
            ("sentinel_avg_rt_ms", "gauge"),
            ("sentinel_breaker_state", "gauge"),
        ] {
            assert_eq!(types[name], kind);
        }
        let get = |name: &str, labels: &[(&str, &str)]| samples[&key(name, labels)];
        let r = [("resource", odd)];
        assert_eq!(counters(&samples, odd), [2.0, 1.0, 2.0, 1.0]);
        assert_eq!(get("sentinel_avg_rt_ms", &r), 20.0);
        assert_eq!(get("sentinel_concurrency", &[("resource", "b")]), 1.0);
        assert_eq!(get("sentinel_pass_total", &[("resource", "b")]), 1.0);
        assert_eq!(
            get(
                "sentinel_breaker_state",
                &[("resource", odd), ("rule", "0")]
            ),
            1.0
        );
        assert_eq!(
            get(
                "sentinel_breaker_state",
                &[("resource", "never"), ("rule", "42")]
            ),
            0.0
        );

        // Counters keep counting after the seconds leave the minute window.
        clock.set(T0 + 30_000);
        call(&clock, &sentinel, odd, 4, false);
        clock.set(T0 + 31_000);
        let (samples, _) = parse(&render_prometheus(&sentinel));
        assert_eq!(samples[&key("sentinel_pass_total", &r)], 3.0);
        assert_eq!(samples[&key("sentinel_avg_rt_ms", &r)], 0.0);
        clock.set(T0 + 120_000);
        let (samples, _) = parse(&render_prometheus(&sentinel));
        assert_eq!(samples[&key("sentinel_pass_total", &r)], 3.0, "monotonic");
        assert_eq!(samples[&key("sentinel_success_total", &r)], 3.0);
    }

    #[test]
    fn counters_are_exact_after_minutes_without_a_scrape() {
        // Two and a half minutes of traffic and one scrape at the end, in the
        // middle of a second: a scraper with memory of its own would have
        // had to come by every minute, and would lag by the second filling.
        let (clock, sentinel) = limited();
        let mut model = Model::default();
        for s in 0..150 {
            model.second(&clock, &sentinel, s);
        }
        let inside = sentinel.entry("b").unwrap();
        model.0.get_mut("b").unwrap()[0] += 1.0;
        let (samples, _) = parse(&render_prometheus(&sentinel));
        for resource in ["a", "b"] {
            assert_eq!(
                counters(&samples, resource),
                model.0[resource],
                "{resource}"
            );
        }
        let a = model.0["a"];
        assert!(a[1] > 0.0 && a[3] > 0.0, "blocks and errors happened");
        assert_eq!(
            samples[&key("sentinel_concurrency", &[("resource", "b")])],
            1.0
        );
        drop(inside);
        let (samples, _) = parse(&render_prometheus(&sentinel));
        assert_eq!(counters(&samples, "b")[2], model.0["b"][2] + 1.0);
    }

    #[test]
    fn counters_never_go_down_across_scrapes() {
        // Scraped every 250 ms for three minutes of traffic: each counter is
        // at least its previous value and exactly what was done so far.
        let (clock, sentinel) = limited();
        let mut model = Model::default();
        let mut last: HashMap<Key, f64> = HashMap::new();
        for s in 0..180 {
            model.second(&clock, &sentinel, s);
            for quarter in 0..4 {
                clock.set(T0 + s * 1_000 + 200 + quarter * 250);
                let (samples, types) = parse(&render_prometheus(&sentinel));
                for (key, value) in samples {
                    if types[&key.0] == "counter" {
                        let previous = last.insert(key.clone(), value).unwrap_or(0.0);
                        assert!(value >= previous, "{key:?} went down at {s} s");
                    }
                }
                for (resource, counts) in &model.0 {
                    let now = counters(&last, resource);
                    assert_eq!(&now, counts, "{resource} at {s} s");
                }
            }
        }
    }

    #[test]
    fn resource_names_are_escaped_in_labels() {
        let (_clock, sentinel) = instance();
        let names = [
            "back\\slash",
            "quote\"d",
            "two\nlines",
            "\\\"\n\\n",
            "a,b=c}{",
            "ünïcödé ✓",
        ];
        for name in names {
            drop(sentinel.entry(name).unwrap());
        }
        let text = render_prometheus(&sentinel);
        assert!(text.contains("sentinel_pass_total{resource=\"back\\\\slash\"} 1\n"));
        assert!(text.contains("sentinel_pass_total{resource=\"quote\\\"d\"} 1\n"));
        assert!(text.contains("sentinel_pass_total{resource=\"two\\nlines\"} 1\n"));
        assert!(text.contains("sentinel_pass_total{resource=\"\\\\\\\"\\n\\\\n\"} 1\n"));
        // Every line is a comment or one sample: no name broke a line.
        let (samples, types) = parse(&text);
        let lines = text.lines().count();
        assert_eq!(lines, 2 * types.len() + samples.len());
        for name in names {
            assert_eq!(counters(&samples, name), [1.0, 0.0, 1.0, 0.0], "{name:?}");
        }
    }
}
