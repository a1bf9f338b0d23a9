//! User slots: their place among the checks, their order, what they see
//! of an entry, its origin and its exit, and blocks before or at the
//! statistic slot.

use std::sync::{Arc, Mutex};

use sentinel_flow_core::slot::{self, EntryContext, ExitContext, Slot};
use sentinel_flow_core::{BlockError, BlockKind, DEFAULT_CONTEXT, EntryType, ParamValue};

use crate::support::{T0, instance_with};
use crate::{Oops, ctx_node, origin, res};

/// Blocks every entry, among the checks.
#[derive(Debug)]
pub(crate) struct BlockAll;

impl Slot for BlockAll {
    fn order(&self) -> i32 {
        slot::order::FLOW
    }
    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        Err(ctx.block(BlockKind::Custom("all")))
    }
}

/// Blocks entries carrying the argument `bad`, or from origin `evil`.
#[derive(Debug)]
struct Guard {
    order: i32,
}

impl Slot for Guard {
    fn order(&self) -> i32 {
        self.order
    }
    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        if ctx.args().contains(&ParamValue::from("bad")) {
            return Err(ctx.block(BlockKind::Custom("bad_arg")));
        }
        if ctx.origin() == "evil" {
            return Err(ctx.block(BlockKind::Custom("evil_origin")));
        }
        Ok(())
    }
}

#[test]
fn a_slot_among_the_checks_blocks_and_the_block_is_counted() {
    let (_clock, sentinel) = instance_with(|builder| {
        builder.slot(Guard {
            order: slot::order::FLOW,
        })
    });
    let bad = [ParamValue::from(1), ParamValue::from("bad")];
    let good = [ParamValue::from(1), ParamValue::from("good")];

    let err = sentinel.entry_builder("A").args(&bad).enter().unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("bad_arg"));
    assert_eq!(err.kind().as_str(), "bad_arg");
    assert_eq!(err.resource(), "A");
    assert!(err.rule().is_none());
    assert_eq!(err.to_string(), "blocked by bad_arg on resource `A`");
    let dyn_err: &dyn std::error::Error = &err;
    assert!(dyn_err.source().is_none());

    let s = res(&sentinel, "A");
    assert_eq!((s.total_pass, s.total_block, s.block_qps), (0, 1, 1.0));
    assert_eq!((s.total_success, s.concurrency, s.pass_qps), (0, 0, 0.0));

    // A batch is blocked by its count, on every node of the entry.
    let err = sentinel
        .entry_builder("A")
        .args(&bad)
        .batch_count(3)
        .context("web")
        .origin("app")
        .entry_type(EntryType::Inbound)
        .enter()
        .unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("bad_arg"));
    assert_eq!(res(&sentinel, "A").total_block, 4);
    let web = ctx_node(&sentinel, "web", "A");
    assert_eq!((web.total_block, web.total_pass), (3, 0));
    assert_eq!(origin(&sentinel, "A", "app").total_block, 3);
    assert_eq!(sentinel.inbound_node().total_block(sentinel.now_ms()), 3);
    assert_eq!(sentinel.inbound_node().total_pass(sentinel.now_ms()), 0);
    assert_eq!(ctx_node(&sentinel, DEFAULT_CONTEXT, "A").total_block, 1);

    // By origin.
    let err = sentinel
        .entry_builder("A")
        .origin("evil")
        .enter()
        .unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("evil_origin"));
    assert_eq!(err.to_string(), "blocked by evil_origin on resource `A`");
    assert_eq!(origin(&sentinel, "A", "evil").total_block, 1);

    // Others pass.
    drop(sentinel.entry_builder("A").args(&good).enter().unwrap());
    drop(sentinel.entry_builder("A").origin("app").enter().unwrap());
    let s = res(&sentinel, "A");
    assert_eq!((s.total_pass, s.total_block, s.concurrency), (2, 5, 0));
    assert_eq!(s.block_qps, 5.0);
}

#[test]
fn a_slot_sees_the_inherited_origin_of_a_nested_entry() {
    let (_clock, sentinel) = instance_with(|builder| builder.slot(EvilOnDb));
    let api = sentinel
        .entry_builder("api")
        .origin("evil")
        .enter()
        .unwrap();
    let err = sentinel
        .entry_builder("db")
        .parent(&api)
        .enter()
        .unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("evil_on_db"));
    assert_eq!(err.resource(), "db");
    drop(api);
    assert_eq!(res(&sentinel, "db").total_block, 1);
    assert_eq!(origin(&sentinel, "db", "evil").total_block, 1);
    assert_eq!(res(&sentinel, "api").total_pass, 1);
}

#[derive(Debug)]
struct EvilOnDb;

impl Slot for EvilOnDb {
    fn order(&self) -> i32 {
        slot::order::AUTHORITY
    }
    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        if ctx.resource_name() == "db" && ctx.origin() == "evil" {
            return Err(ctx.block(BlockKind::Custom("evil_on_db")));
        }
        Ok(())
    }
}

#[test]
fn a_block_before_the_statistic_slot_is_not_counted() {
    let (_clock, sentinel) = instance_with(|builder| {
        builder.slot(Guard {
            order: slot::order::STATISTIC - 1,
        })
    });
    let bad = [ParamValue::from("bad")];
    let err = sentinel
        .entry_builder("A")
        .args(&bad)
        .entry_type(EntryType::Inbound)
        .origin("app")
        .context("web")
        .enter()
        .unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("bad_arg"));
    let s = res(&sentinel, "A");
    assert_eq!((s.total_pass, s.total_block, s.block_qps), (0, 0, 0.0));
    assert_eq!(ctx_node(&sentinel, "web", "A").total_block, 0);
    assert_eq!(origin(&sentinel, "A", "app").total_block, 0);
    assert_eq!(sentinel.inbound_node().total_block(sentinel.now_ms()), 0);
    drop(sentinel.entry("A").unwrap());
    assert_eq!(res(&sentinel, "A").total_pass, 1);
}

#[test]
fn a_block_at_the_statistic_order_is_counted() {
    let (_clock, sentinel) = instance_with(|builder| {
        builder.slot(Guard {
            order: slot::order::STATISTIC,
        })
    });
    let bad = [ParamValue::from("bad")];
    assert!(sentinel.entry_builder("A").args(&bad).enter().is_err());
    assert_eq!(res(&sentinel, "A").total_block, 1);
}

/// Records its entries and exits into a shared log.
#[derive(Debug)]
struct Recorder {
    name: &'static str,
    order: i32,
    block: bool,
    log: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    fn new(name: &'static str, order: i32, log: &Arc<Mutex<Vec<String>>>) -> Self {
        Recorder {
            name,
            order,
            block: false,
            log: log.clone(),
        }
    }

    fn blocking(mut self) -> Self {
        self.block = true;
        self
    }
}

impl Slot for Recorder {
    fn order(&self) -> i32 {
        self.order
    }
    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        self.log
            .lock()
            .unwrap()
            .push(format!("entry {}", self.name));
        if self.block {
            return Err(ctx.block(BlockKind::Custom(self.name)));
        }
        Ok(())
    }
    fn exit(&self, ctx: &ExitContext<'_>) {
        self.log.lock().unwrap().push(format!(
            "exit {} rt={} error={}",
            self.name,
            ctx.rt_ms(),
            ctx.has_error()
        ));
    }
}

fn take(log: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    std::mem::take(&mut *log.lock().unwrap())
}

#[test]
fn slots_run_by_order_and_see_exits() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (clock, sentinel) = instance_with(|builder| {
        builder
            .slot(Recorder::new("max", i32::MAX, &log))
            .slot(Recorder::new("flow", slot::order::FLOW, &log))
            .slot(Recorder::new("auth", slot::order::AUTHORITY + 1, &log))
            .slot(Recorder::new("pre", slot::order::STATISTIC - 1, &log))
            .slot(Recorder::new("flow2", slot::order::FLOW, &log))
            .slot(Recorder::new("degrade", slot::order::DEGRADE + 1, &log))
            .slot(Recorder::new("min", i32::MIN, &log))
    });
    let entry = sentinel.entry("A").unwrap();
    assert_eq!(
        take(&log),
        [
            "entry min",
            "entry pre",
            "entry auth",
            "entry flow",
            "entry flow2",
            "entry degrade",
            "entry max"
        ]
    );
    clock.advance_ms(9);
    entry.set_error(&Oops);
    drop(entry);
    assert_eq!(
        take(&log),
        [
            "exit min rt=9 error=true",
            "exit pre rt=9 error=true",
            "exit auth rt=9 error=true",
            "exit flow rt=9 error=true",
            "exit flow2 rt=9 error=true",
            "exit degrade rt=9 error=true",
            "exit max rt=9 error=true"
        ]
    );
    drop(sentinel.entry("A").unwrap());
    assert!(take(&log).contains(&"exit flow rt=0 error=false".to_owned()));
}

#[test]
fn the_first_block_wins() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (_clock, sentinel) = instance_with(|builder| {
        builder
            .slot(Recorder::new("late", slot::order::DEGRADE, &log).blocking())
            .slot(Recorder::new("early", slot::order::SYSTEM, &log).blocking())
            .slot(Recorder::new("first", slot::order::AUTHORITY, &log))
    });
    let err = sentinel.entry("A").unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("early"));
    assert_eq!(
        take(&log),
        ["entry first", "entry early"],
        "no exit for a block"
    );
    assert_eq!(res(&sentinel, "A").total_block, 1);
}

#[test]
fn a_block_before_the_statistic_slot_skips_the_checks() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (_clock, sentinel) = instance_with(|builder| {
        builder
            .slot(Recorder::new("check", slot::order::FLOW, &log))
            .slot(Recorder::new("pre", slot::order::NODE_SELECTOR, &log).blocking())
    });
    let err = sentinel.entry("A").unwrap_err();
    assert_eq!(err.kind(), BlockKind::Custom("pre"));
    assert_eq!(take(&log), ["entry pre"]);
    assert_eq!(res(&sentinel, "A").total_block, 0);
}

/// Checks what a slot sees of an entry and of its exit.
#[derive(Debug)]
struct Inspector {
    seen: Arc<Mutex<Vec<String>>>,
}

impl Slot for Inspector {
    fn order(&self) -> i32 {
        slot::order::FLOW
    }
    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        let now = ctx.now_ms();
        self.seen.lock().unwrap().push(format!(
            "entry {} {:?} batch={} origin={} node={} ctx={} ctx_stats={} args={:?} now={} passed_before={}",
            ctx.resource_name(),
            ctx.entry_type(),
            ctx.batch_count(),
            ctx.origin(),
            ctx.origin_node().map_or("-", |o| o.name()),
            ctx.context_name(),
            ctx.context_stats().is_some(),
            ctx.args(),
            now - T0,
            ctx.resource().stats().total_pass(now),
        ));
        Ok(())
    }
    fn exit(&self, ctx: &ExitContext<'_>) {
        let now = ctx.now_ms();
        let stats = ctx.resource().stats();
        self.seen.lock().unwrap().push(format!(
            "exit {} {:?} batch={} origin={} rt={} now={} success={} concurrency={}",
            ctx.resource_name(),
            ctx.entry_type(),
            ctx.batch_count(),
            ctx.origin(),
            ctx.rt_ms(),
            now - T0,
            stats.total_success(now),
            stats.cur_concurrency(),
        ));
    }
}

#[test]
fn slots_see_the_entry_and_its_exit() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (clock, sentinel) = instance_with(|builder| builder.slot(Inspector { seen: seen.clone() }));
    let args = [ParamValue::from(7u8), ParamValue::from("x")];
    let entry = sentinel
        .entry_builder("A")
        .entry_type(EntryType::Inbound)
        .batch_count(2)
        .origin("app")
        .context("web")
        .args(&args)
        .enter()
        .unwrap();
    clock.advance_ms(4);
    drop(entry);
    drop(sentinel.entry("A").unwrap());
    assert_eq!(
        take(&seen),
        [
            "entry A Inbound batch=2 origin=app node=app ctx=web ctx_stats=true args=[7, \"x\"] now=0 passed_before=0",
            "exit A Inbound batch=2 origin=app rt=4 now=4 success=2 concurrency=0",
            "entry A Outbound batch=1 origin= node=- ctx=sentinel_default_context ctx_stats=false args=[] now=4 passed_before=2",
            "exit A Outbound batch=1 origin= rt=0 now=4 success=3 concurrency=0",
        ]
    );
}

/// Records the origin each entry and exit shows.
#[derive(Debug)]
struct OriginLog(Arc<Mutex<Vec<String>>>);

impl Slot for OriginLog {
    fn order(&self) -> i32 {
        slot::order::AUTHORITY
    }
    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        let line = format!("entry {} origin={:?}", ctx.resource_name(), ctx.origin());
        self.0.lock().unwrap().push(line);
        Ok(())
    }
    fn exit(&self, ctx: &ExitContext<'_>) {
        let line = format!("exit {} origin={:?}", ctx.resource_name(), ctx.origin());
        self.0.lock().unwrap().push(line);
    }
}

#[test]
fn slots_see_the_origin_under_the_origin_cap() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (_clock, sentinel) = instance_with(|builder| builder.slot(OriginLog(log.clone())));
    let parent = sentinel.entry_builder("api").origin("app").enter().unwrap();
    drop(
        sentinel
            .entry_builder("db")
            .parent(&parent)
            .enter()
            .unwrap(),
    );
    drop(parent);
    assert_eq!(
        take(&log),
        [
            "entry api origin=\"app\"",
            "entry db origin=\"app\"",
            "exit db origin=\"app\"",
            "exit api origin=\"app\"",
        ]
    );
}

#[test]
fn slots_see_the_origin_past_the_origin_cap() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let (_clock, sentinel) =
        instance_with(|builder| builder.max_origins(0).slot(OriginLog(log.clone())));
    let parent = sentinel.entry_builder("api").origin("app").enter().unwrap();
    drop(
        sentinel
            .entry_builder("db")
            .parent(&parent)
            .enter()
            .unwrap(),
    );
    drop(parent);
    assert_eq!(sentinel.resource_node("api").unwrap().refused_origins(), 1);
    // Regression: past `max_origins` the origin has no node, but the exit and
    // nested entries still see its name.
    assert_eq!(
        take(&log),
        [
            "entry api origin=\"app\"",
            "entry db origin=\"app\"",
            "exit db origin=\"app\"",
            "exit api origin=\"app\"",
        ]
    );
}
