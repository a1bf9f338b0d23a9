//! Blocks aggregated per second, on a `ManualClock`: the per-kind counts,
//! the block log's lines (exact, late, retried after a disk error), and its
//! `tracing` events.

use std::path::Path;
use std::sync::{Arc, Mutex};

use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::flow::FlowRule;
use sentinel_flow_core::log::{BlockCount, MetricLogConfig, MetricWriter};
use sentinel_flow_core::system::SystemRule;
use sentinel_flow_core::{BlockKind, EntryType, ManualClock, Sentinel};

use crate::support::{instance, instance_with, load};

/// An instance whose resource `a` refuses every entry.
fn blocking_a() -> (ManualClock, Sentinel) {
    let (clock, sentinel) = instance();
    load(&sentinel, [FlowRule::new("a", 0.0)]);
    (clock, sentinel)
}

/// `n` entries to `resource` from `origin`; how many were blocked.
fn hit(sentinel: &Sentinel, resource: &str, origin: &str, n: usize) -> usize {
    (0..n)
        .filter(|_| {
            sentinel
                .entry_builder(resource)
                .origin(origin)
                .entry_type(EntryType::Inbound)
                .enter()
                .is_err()
        })
        .count()
}

fn counts(sentinel: &Sentinel) -> Vec<(String, BlockKind, u64)> {
    sentinel
        .block_counts()
        .into_iter()
        .map(
            |BlockCount {
                 resource,
                 kind,
                 count,
                 ..
             }| (resource, kind, count),
        )
        .collect()
}

fn writer(sentinel: &Sentinel, dir: &Path) -> MetricWriter {
    sentinel.metric_writer(MetricLogConfig::new("app").dir(dir).block_events(None))
}

/// The block log's lines, in file order.
fn block_lines(dir: &Path) -> Vec<String> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with("app-block.log."))
        .collect();
    names.sort();
    names
        .iter()
        .flat_map(|name| {
            std::fs::read_to_string(dir.join(name))
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn blocks_are_counted_per_resource_and_kind() {
    let (_clock, sentinel) = instance();
    load(&sentinel, [FlowRule::new("a", 2.0)]);
    load(
        &sentinel,
        [AuthorityRule::new("b", AuthorityStrategy::Black, ["bad"])],
    );
    assert!(counts(&sentinel).is_empty());
    assert_eq!(hit(&sentinel, "a", "", 5), 3);
    assert_eq!(hit(&sentinel, "b", "bad", 4), 4);
    assert_eq!(hit(&sentinel, "b", "good", 4), 0);
    assert_eq!(
        counts(&sentinel),
        vec![
            ("a".into(), BlockKind::Flow, 3),
            ("b".into(), BlockKind::Authority, 4),
        ]
    );
    // A batch counts as its size.
    assert!(sentinel.entry_builder("a").batch_count(3).enter().is_err());
    assert_eq!(counts(&sentinel)[0], ("a".into(), BlockKind::Flow, 6));

    #[cfg(feature = "prometheus")]
    {
        let text = sentinel_flow_core::prometheus::render_prometheus(&sentinel);
        let blocks: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("sentinel_block_total"))
            .collect();
        assert_eq!(
            blocks,
            [
                "sentinel_block_total{resource=\"a\",kind=\"flow\"} 6",
                "sentinel_block_total{resource=\"b\",kind=\"authority\"} 4",
            ]
        );
    }
}

#[test]
fn blocks_of_threads_are_all_counted() {
    let (clock, sentinel) = blocking_a();
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(&sentinel, dir.path());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| assert_eq!(hit(&sentinel, "a", "", 10_000), 10_000));
        }
        // Gathered while they block: nothing lost or counted twice.
        for _ in 0..50 {
            sentinel.block_counts();
        }
    });
    assert_eq!(
        counts(&sentinel),
        vec![("a".into(), BlockKind::Flow, 40_000)]
    );
    clock.advance_ms(2_000);
    assert_eq!(writer.write_blocks(&sentinel).unwrap(), 1);
    let lines = block_lines(dir.path());
    assert_eq!(
        lines,
        vec![
            "2023-11-14 22:13:20|1|a,FlowException,default,|40000,0|flow rule on a: Qps <= 0 (Reject, limit_app default)"
        ]
    );
}

#[test]
fn the_block_log_has_a_line_per_second_resource_kind_rule_and_origin() {
    let (clock, sentinel) = instance();
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(&sentinel, dir.path());
    let mut per_origin = FlowRule::new("a", 1.0);
    per_origin.limit_app = "app1".into();
    load(&sentinel, [per_origin, FlowRule::new("a", 1.0)]);
    load(
        &sentinel,
        [SystemRule {
            qps: Some(100.0),
            ..SystemRule::default()
        }],
    );

    // Second 0: app1 goes past its rule, everyone past the other.
    assert_eq!(hit(&sentinel, "a", "app1", 4), 3);
    assert_eq!(hit(&sentinel, "a", "app2", 3), 3);
    clock.advance_ms(1_000);
    // Second 1: three more from app2.
    assert_eq!(hit(&sentinel, "a", "app2", 4), 3);
    // Second 2: the system limit blocks resource `c`.
    clock.advance_ms(1_000);
    assert_eq!(hit(&sentinel, "c", "", 150), 50);

    // Second 0 is written once a second (the grace) has passed after it.
    assert_eq!(writer.write_blocks(&sentinel).unwrap(), 2);
    let first = block_lines(dir.path());
    assert_eq!(
        first,
        vec![
            "2023-11-14 22:13:20|1|a,FlowException,app1,app1|3,0|flow rule on a: Qps <= 1 (Reject, limit_app app1)",
            "2023-11-14 22:13:20|2|a,FlowException,default,app2|3,0|flow rule on a: Qps <= 1 (Reject, limit_app default)",
        ]
    );
    assert_eq!(writer.write_blocks(&sentinel).unwrap(), 0, "nothing twice");
    clock.advance_ms(2_000);
    assert_eq!(writer.write_blocks(&sentinel).unwrap(), 2);
    let lines = block_lines(dir.path());
    assert_eq!(lines[..2], first[..]);
    assert_eq!(
        lines[2..],
        [
            "2023-11-14 22:13:21|1|a,FlowException,default,app2|3,0|flow rule on a: Qps <= 1 (Reject, limit_app default)",
            "2023-11-14 22:13:22|1|c,SystemBlockException,default,|50,0|system rule: qps <= 100",
        ]
    );
    assert_eq!(
        counts(&sentinel),
        vec![
            ("a".into(), BlockKind::Flow, 9),
            ("c".into(), BlockKind::System, 50),
        ]
    );
}

#[test]
fn a_late_writer_writes_every_second_under_its_own_time() {
    let (clock, sentinel) = blocking_a();
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(&sentinel, dir.path());
    for second in 1..=5 {
        assert_eq!(hit(&sentinel, "a", "", second), second);
        clock.advance_ms(1_000);
    }
    clock.advance_ms(5_000);
    assert_eq!(writer.write_blocks(&sentinel).unwrap(), 5);
    let counts: Vec<(String, String)> = block_lines(dir.path())
        .iter()
        .map(|line| {
            let fields: Vec<&str> = line.split('|').collect();
            (fields[0].to_owned(), fields[3].to_owned())
        })
        .collect();
    assert_eq!(
        counts,
        (0..5)
            .map(|s| (format!("2023-11-14 22:13:2{s}"), format!("{},0", s + 1)))
            .collect::<Vec<_>>()
    );
}

#[test]
fn a_disk_error_keeps_the_lines_until_they_can_be_written() {
    let (clock, sentinel) = blocking_a();
    let parent = tempfile::tempdir().unwrap();
    // A directory under a file cannot be made, even by root.
    let blocker = parent.path().join("file");
    std::fs::write(&blocker, "not a directory").unwrap();
    let dir = blocker.join("logs");
    let mut writer = writer(&sentinel, &dir);
    assert_eq!(hit(&sentinel, "a", "", 2), 2);
    clock.advance_ms(2_000);
    assert!(writer.write_blocks(&sentinel).is_err());
    assert_eq!(hit(&sentinel, "a", "", 1), 1);
    clock.advance_ms(1_000);
    assert!(writer.write_blocks(&sentinel).is_err());
    // The disk comes back: both seconds are written, once.
    std::fs::remove_file(&blocker).unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    clock.advance_ms(1_000);
    assert_eq!(
        writer.write_blocks(&sentinel).unwrap(),
        1,
        "the newer second"
    );
    assert_eq!(writer.write_blocks(&sentinel).unwrap(), 0);
    assert_eq!(
        block_lines(&dir),
        vec![
            "2023-11-14 22:13:20|1|a,FlowException,default,|2,0|flow rule on a: Qps <= 0 (Reject, limit_app default)",
            "2023-11-14 22:13:22|1|a,FlowException,default,|1,0|flow rule on a: Qps <= 0 (Reject, limit_app default)",
        ]
    );
}

#[test]
fn blocks_before_the_writer_only_go_to_the_counts() {
    let (clock, sentinel) = blocking_a();
    assert_eq!(hit(&sentinel, "a", "", 3), 3);
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(&sentinel, dir.path());
    assert_eq!(hit(&sentinel, "a", "", 1), 1);
    clock.advance_ms(3_000);
    assert_eq!(writer.write_blocks(&sentinel).unwrap(), 1);
    assert!(block_lines(dir.path())[0].contains("|1,0|"));
    assert_eq!(counts(&sentinel), vec![("a".into(), BlockKind::Flow, 4)]);
}

// ---- tracing events ----

/// The `count` and `resource` fields of every event seen.
#[derive(Default, Clone)]
struct Seen(Arc<Mutex<Vec<(tracing::Level, String, u64)>>>);

struct Fields {
    resource: String,
    count: u64,
}

impl tracing::field::Visit for Fields {
    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        if field.name() == "count" {
            self.count = value;
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "resource" {
            self.resource = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for Seen {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut fields = Fields {
            resource: String::new(),
            count: 0,
        };
        event.record(&mut fields);
        if event.metadata().fields().field("count").is_some() {
            let level = *event.metadata().level();
            self.0
                .lock()
                .unwrap()
                .push((level, fields.resource, fields.count));
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[test]
fn blocks_are_sent_as_one_event_per_line_at_the_chosen_level() {
    let (clock, sentinel) = instance();
    load(
        &sentinel,
        [FlowRule::new("a", 0.0), FlowRule::new("b", 0.0)],
    );
    let config = MetricLogConfig::new("app")
        .block_log(false)
        .block_events(Some(tracing::Level::WARN));
    let dir = tempfile::tempdir().unwrap();
    let mut writer = sentinel.metric_writer(config.dir(dir.path()));
    assert_eq!(hit(&sentinel, "a", "", 1_000), 1_000);
    assert_eq!(hit(&sentinel, "b", "", 2), 2);
    clock.advance_ms(2_000);
    let seen = Seen::default();
    tracing::subscriber::with_default(seen.clone(), || {
        assert_eq!(writer.write_blocks(&sentinel).unwrap(), 2);
        assert_eq!(writer.write_blocks(&sentinel).unwrap(), 0);
    });
    assert_eq!(
        *seen.0.lock().unwrap(),
        vec![
            (tracing::Level::WARN, "a".to_owned(), 1_000),
            (tracing::Level::WARN, "b".to_owned(), 2),
        ]
    );
    assert!(block_lines(dir.path()).is_empty(), "no file asked for");
}

#[test]
fn finishing_writes_the_seconds_still_in_their_grace() {
    let (clock, sentinel) = blocking_a();
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(&sentinel, dir.path());
    assert_eq!(hit(&sentinel, "a", "", 2), 2);
    clock.advance_ms(1_500);
    assert_eq!(hit(&sentinel, "a", "", 1), 1);
    assert_eq!(writer.write_blocks(&sentinel).unwrap(), 0, "in their grace");
    writer.finish(&sentinel);
    let lines = block_lines(dir.path());
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("2023-11-14 22:13:20|1|a,") && lines[0].contains("|2,0|"));
    assert!(lines[1].starts_with("2023-11-14 22:13:21|1|a,") && lines[1].contains("|1,0|"));
}

/// Refuses every entry with a rule made for the occasion.
#[derive(Debug)]
struct FreshRuleSlot;

#[derive(Debug)]
struct Throwaway(u64);

impl std::fmt::Display for Throwaway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "throwaway #{}", self.0)
    }
}

impl sentinel_flow_core::Rule for Throwaway {
    fn resource(&self) -> &str {
        "a"
    }

    fn block_kind(&self) -> BlockKind {
        BlockKind::Custom("fresh")
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl sentinel_flow_core::slot::Slot for FreshRuleSlot {
    fn order(&self) -> i32 {
        sentinel_flow_core::slot::order::FLOW
    }

    fn entry(
        &self,
        ctx: &sentinel_flow_core::slot::EntryContext<'_>,
    ) -> Result<(), sentinel_flow_core::BlockError> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let rule = Arc::new(Throwaway(
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        ));
        Err(sentinel_flow_core::BlockError::new(
            BlockKind::Custom("fresh"),
            ctx.resource_name().into(),
            Some(rule),
        ))
    }
}

#[test]
fn a_user_slot_s_blocks_are_counted_per_kind_however_many_rules_it_makes() {
    let (clock, sentinel) = instance_with(|builder| builder.slot(FreshRuleSlot));
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(&sentinel, dir.path());
    assert_eq!(hit(&sentinel, "a", "", 500), 500);
    assert_eq!(
        counts(&sentinel),
        vec![("a".into(), BlockKind::Custom("fresh"), 500)]
    );
    clock.advance_ms(2_000);
    assert_eq!(writer.write_blocks(&sentinel).unwrap(), 1);
    let lines = block_lines(dir.path());
    assert_eq!(lines.len(), 1);
    assert!(
        lines[0].starts_with("2023-11-14 22:13:20|1|a,fresh,default,|500,0|throwaway #"),
        "{}",
        lines[0]
    );
}

/// A black list of `origins` on `resource`, told apart by `id`.
fn black_list(resource: &str, id: u64, origins: impl IntoIterator<Item = String>) -> AuthorityRule {
    let mut rule = AuthorityRule::new(resource, AuthorityStrategy::Black, origins);
    rule.id = Some(id);
    rule
}

#[test]
fn a_rule_replaced_after_blocking_still_shows_in_its_line() {
    let (clock, sentinel) = instance();
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(&sentinel, dir.path());
    for id in 1..=2 {
        load(&sentinel, [black_list("a", id, ["x".to_owned()])]);
        assert_eq!(hit(&sentinel, "a", "x", 2), 2);
    }
    // The thread's next entry drops its cached set, the last holder of rule 2.
    load(&sentinel, [black_list("a", 3, ["y".to_owned()])]);
    assert_eq!(hit(&sentinel, "a", "x", 1), 0);
    clock.advance_ms(2_000);
    writer.write_blocks(&sentinel).unwrap();
    assert_eq!(
        block_lines(dir.path()),
        [
            "2023-11-14 22:13:20|1|a,AuthorityException,x,x|2,0|authority rule #1 on a: black list [x]",
            "2023-11-14 22:13:20|2|a,AuthorityException,x,x|2,0|authority rule #2 on a: black list [x]",
        ]
    );
}

#[test]
fn a_rule_listing_a_thousand_origins_is_cut_in_its_line() {
    let (clock, sentinel) = instance();
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(&sentinel, dir.path());
    load(
        &sentinel,
        [black_list(
            "a",
            1,
            (0..1_000).map(|i| format!("caller-{i}")),
        )],
    );
    assert_eq!(hit(&sentinel, "a", "caller-7", 1), 1);
    clock.advance_ms(2_000);
    writer.write_blocks(&sentinel).unwrap();
    let lines = block_lines(dir.path());
    assert_eq!(lines.len(), 1);
    let fields: Vec<&str> = lines[0].split('|').collect();
    let limit_app = fields[2].split(',').nth(2).unwrap();
    assert_eq!(limit_app, "caller-0");
    let rule = fields[4];
    assert!(rule.starts_with("authority rule #1 on a: black list [caller-0, caller-1, "));
    assert!(
        rule.ends_with('…') && rule.len() <= 1_024 + '…'.len_utf8(),
        "{} bytes",
        rule.len()
    );
}

#[test]
fn blocks_of_four_threads_under_reloads_are_all_counted() {
    const PER_THREAD: usize = 5_000;
    let (clock, sentinel) = instance();
    let sentinel = Arc::new(sentinel);
    let dir = tempfile::tempdir().unwrap();
    let mut writer = writer(&sentinel, dir.path());
    load(&sentinel, [black_list("a", 0, ["x".to_owned()])]);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let sentinel = Arc::clone(&sentinel);
            std::thread::spawn(move || hit(&sentinel, "a", "x", PER_THREAD))
        })
        .collect();
    let mut id = 0;
    while threads.iter().any(|t| !t.is_finished()) {
        id += 1;
        load(
            &sentinel,
            [black_list("a", id, ["x".to_owned(), format!("o{id}")])],
        );
        sentinel.block_counts();
        writer.write_blocks(&sentinel).unwrap();
    }
    let blocked: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(blocked, 4 * PER_THREAD, "every entry refused");
    assert_eq!(
        counts(&sentinel),
        vec![("a".into(), BlockKind::Authority, 4 * PER_THREAD as u64)]
    );
    clock.advance_ms(2_000);
    writer.write_blocks(&sentinel).unwrap();
    let logged: u64 = block_lines(dir.path())
        .iter()
        .map(|line| line.split('|').nth(3).unwrap().split(',').next().unwrap())
        .map(|count| count.parse::<u64>().unwrap())
        .sum();
    assert_eq!(logged, 4 * PER_THREAD as u64, "{id} loads");
}
