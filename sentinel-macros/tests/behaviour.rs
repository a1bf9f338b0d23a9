//! Behaviour of `#[sentinel_resource]`: passes, blocks with and without a
//! handler, error recording and `exceptions_to_ignore`, fallbacks, early
//! returns, panics, methods, generics, `async fn`s (completed, blocked,
//! cancelled, and waiting in a rate limiter's queue), and the entry's
//! settings.
//!
//! Every function enters one instance of these tests, on a [`ManualClock`]
//! that no test moves, and each function is a resource of its own, so the
//! tests run in parallel. Resources that must block get a flow rule of 0 QPS
//! (the queue test a rate limiter) when the instance is made; no test
//! changes rules afterwards.

use std::future::Future;
use std::pin::pin;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use once_cell::sync::Lazy;
use sentinel_flow_core::flow::{ControlBehavior, FlowRule};
use sentinel_flow_core::node::NodeSnapshot;
use sentinel_flow_core::slot::{EntryContext, Slot};
use sentinel_flow_core::{BlockError, BlockKind, EntryType, ManualClock, ParamValue, Sentinel};
use sentinel_flow_macros::sentinel_resource;

const T0: u64 = 1_700_000_000_000;

/// Resources refused by a 0 QPS flow rule.
const BLOCKED: &[&str] = &[
    "blocked:no_handler",
    "blocked:handler",
    "blocked:handler_unit",
    "blocked:fallback",
    "blocked:method",
    "blocked:async",
    "blocked:async_fallback",
];

static CLOCK: Lazy<ManualClock> = Lazy::new(|| ManualClock::new(T0));

static SENTINEL: Lazy<Sentinel> = Lazy::new(|| {
    let sentinel = Sentinel::builder()
        .clock(CLOCK.clone())
        .slot(Recorder)
        .build();
    let mut rules: Vec<_> = BLOCKED
        .iter()
        .map(|name| FlowRule::new(*name, 0.0))
        .collect();
    // 10 QPS, paced: one entry per 100 ms, waiting up to 500 ms for its turn.
    rules.push(FlowRule {
        control_behavior: ControlBehavior::RateLimiter,
        max_queueing_time_ms: 500,
        ..FlowRule::new("queued:async", 10.0)
    });
    sentinel.flow_rules().load(rules).unwrap();
    sentinel
});

fn sentinel() -> &'static Sentinel {
    &SENTINEL
}

/// What the slot chain saw of one entry.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    resource: String,
    entry_type: EntryType,
    batch: u32,
    args: Vec<ParamValue>,
}

static SEEN: Mutex<Vec<Seen>> = Mutex::new(Vec::new());

/// A slot that records every entry, so tests can see its settings.
#[derive(Debug)]
struct Recorder;

impl Slot for Recorder {
    fn order(&self) -> i32 {
        sentinel_flow_core::slot::order::STATISTIC - 1
    }

    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        SEEN.lock().unwrap().push(Seen {
            resource: ctx.resource_name().to_owned(),
            entry_type: ctx.entry_type(),
            batch: ctx.batch_count(),
            args: ctx.args().to_vec(),
        });
        Ok(())
    }
}

/// The entries of `resource` the chain saw.
fn seen(resource: &str) -> Vec<Seen> {
    let seen = SEEN.lock().unwrap();
    seen.iter()
        .filter(|s| s.resource == resource)
        .cloned()
        .collect()
}

/// Everything the node of `name` reports now.
fn stats(name: &str) -> NodeSnapshot {
    sentinel()
        .resource_node(name)
        .unwrap_or_else(|| panic!("no resource node for {name}"))
        .stats()
        .snapshot(sentinel().now_ms())
}

/// Calls in progress on `name` now.
fn concurrency(name: &str) -> u64 {
    stats(name).concurrency
}

#[derive(Debug, Clone, PartialEq)]
enum AppError {
    Blocked(BlockKind),
    NotFound,
    Invalid(u32),
    Io,
}

impl From<BlockError> for AppError {
    fn from(block: BlockError) -> Self {
        AppError::Blocked(block.kind())
    }
}

// ---- pass, names, settings ----

#[sentinel_resource("pass", sentinel = sentinel)]
fn pass(x: u32) -> Result<u32, AppError> {
    // Inside the body the call is counted as in progress.
    assert_eq!(concurrency("pass"), 1);
    Ok(x + 1)
}

#[test]
fn a_passing_call_is_counted_and_exits() {
    assert_eq!(pass(1), Ok(2));
    assert_eq!(pass(2), Ok(3));
    let s = stats("pass");
    assert_eq!((s.total_pass, s.total_block, s.total_success), (2, 0, 2));
    assert_eq!((s.total_exception, s.concurrency), (0, 0));
}

#[sentinel_resource(sentinel = sentinel)]
fn named_by_path() -> Result<(), AppError> {
    Ok(())
}

#[test]
fn the_default_name_is_the_function_path() {
    named_by_path().unwrap();
    assert_eq!(stats("behaviour::named_by_path").total_pass, 1);
}

#[sentinel_resource(
    name = "settings",
    entry_type = inbound,
    batch_count = 3,
    args(user_id, sku, owned, by_ref, flag),
    sentinel = sentinel
)]
fn with_settings(
    user_id: u64,
    sku: &str,
    owned: String,
    by_ref: &String,
    flag: bool,
    _ignored: i8,
) -> Result<String, AppError> {
    // The arguments were converted, not consumed.
    Ok(format!("{user_id}{sku}{owned}{by_ref}{flag}"))
}

#[test]
fn entry_type_batch_count_and_args_reach_the_chain() {
    let inbound_before = sentinel().inbound_node().total_pass(sentinel().now_ms());
    let out = with_settings(7, "sku", "own".into(), &"ref".into(), true, 0).unwrap();
    assert_eq!(out, "7skuownreftrue");
    let expected = Seen {
        resource: "settings".into(),
        entry_type: EntryType::Inbound,
        batch: 3,
        args: vec![
            ParamValue::from(7u64),
            ParamValue::from("sku"),
            ParamValue::from("own"),
            ParamValue::from("ref"),
            ParamValue::from(true),
        ],
    };
    assert_eq!(seen("settings"), [expected]);
    assert_eq!(stats("settings").total_pass, 3);
    let inbound_after = sentinel().inbound_node().total_pass(sentinel().now_ms());
    assert!(inbound_after >= inbound_before + 3);
}

// ---- blocks ----

#[sentinel_resource("blocked:no_handler", sentinel = sentinel)]
fn blocked_no_handler() -> Result<u32, AppError> {
    Ok(1)
}

#[test]
fn a_block_without_handler_is_err_from_block_error() {
    assert_eq!(
        blocked_no_handler(),
        Err(AppError::Blocked(BlockKind::Flow))
    );
    let s = stats("blocked:no_handler");
    assert_eq!((s.total_pass, s.total_block, s.concurrency), (0, 1, 0));
    assert_eq!(s.total_exception, 0, "a block is not an error of the call");
}

#[sentinel_resource("blocked:handler", block_handler = on_block, sentinel = sentinel)]
fn blocked_handler(a: u32, b: &str) -> Result<String, AppError> {
    Ok(format!("body {a} {b}"))
}

fn on_block(a: u32, b: &str, block: BlockError) -> Result<String, AppError> {
    Ok(format!(
        "handler {a} {b} {} {}",
        block.kind(),
        block.resource()
    ))
}

#[test]
fn a_block_with_handler_returns_what_the_handler_returns() {
    assert_eq!(
        blocked_handler(4, "x").unwrap(),
        "handler 4 x flow blocked:handler"
    );
    let s = stats("blocked:handler");
    assert_eq!((s.total_pass, s.total_block, s.concurrency), (0, 1, 0));
}

#[sentinel_resource("blocked:handler_unit", block_handler = count_block, sentinel = sentinel)]
fn blocked_unit(counter: &AtomicUsize) {
    counter.fetch_add(100, Ordering::Relaxed);
}

fn count_block(counter: &AtomicUsize, _block: BlockError) {
    counter.fetch_add(1, Ordering::Relaxed);
}

#[test]
fn a_function_returning_unit_blocks_into_its_handler() {
    let counter = AtomicUsize::new(0);
    blocked_unit(&counter);
    blocked_unit(&counter);
    assert_eq!(counter.load(Ordering::Relaxed), 2, "the body never ran");
    assert_eq!(stats("blocked:handler_unit").total_block, 2);
}

// ---- errors, exceptions_to_ignore, fallback ----

#[sentinel_resource("errors", exceptions_to_ignore(AppError::NotFound, AppError::Invalid(0..=9)), sentinel = sentinel)]
fn errors(outcome: Result<u32, AppError>) -> Result<u32, AppError> {
    outcome
}

#[test]
fn an_err_is_recorded_unless_ignored() {
    assert_eq!(errors(Ok(1)), Ok(1));
    assert_eq!(stats("errors").total_exception, 0);
    assert_eq!(errors(Err(AppError::NotFound)), Err(AppError::NotFound));
    assert_eq!(errors(Err(AppError::Invalid(3))), Err(AppError::Invalid(3)));
    assert_eq!(stats("errors").total_exception, 0, "ignored errors");
    assert_eq!(
        errors(Err(AppError::Invalid(10))),
        Err(AppError::Invalid(10))
    );
    assert_eq!(errors(Err(AppError::Io)), Err(AppError::Io));
    let s = stats("errors");
    assert_eq!((s.total_pass, s.total_exception, s.concurrency), (5, 2, 0));
}

fn fails(ok: bool) -> Result<u32, AppError> {
    if ok { Ok(5) } else { Err(AppError::Io) }
}

#[sentinel_resource("early_exits", sentinel = sentinel)]
fn early_exits(how: u8) -> Result<u32, AppError> {
    if how == 0 {
        return Err(AppError::NotFound);
    }
    if how == 1 {
        return Ok(1);
    }
    let value = fails(how == 2)?;
    Ok(value * 2)
}

#[test]
fn early_return_and_question_mark_exit_and_record() {
    assert_eq!(early_exits(0), Err(AppError::NotFound));
    assert_eq!(early_exits(1), Ok(1));
    assert_eq!(early_exits(2), Ok(10));
    assert_eq!(early_exits(3), Err(AppError::Io));
    let s = stats("early_exits");
    assert_eq!((s.total_pass, s.total_success), (4, 4));
    assert_eq!((s.total_exception, s.concurrency), (2, 0));
}

/// Ok for 0, else an error: 1 `NotFound`, 2 `Io`.
fn outcome(code: u8) -> Result<u32, AppError> {
    match code {
        0 => Ok(1),
        1 => Err(AppError::NotFound),
        _ => Err(AppError::Io),
    }
}

/// A fallback receives the arguments the body borrowed, plus the error.
#[sentinel_resource(
    "fallback",
    fallback = recover,
    exceptions_to_ignore(AppError::NotFound),
    sentinel = sentinel
)]
fn with_fallback(name: String, code: u8) -> Result<String, AppError> {
    let n = outcome(code)?;
    Ok(format!("{name}:{n}"))
}

fn recover(name: String, code: u8, error: AppError) -> Result<String, AppError> {
    Ok(format!("{name} ({code}) recovered from {error:?}"))
}

#[test]
fn a_fallback_gets_the_arguments_and_the_error_and_the_error_is_recorded() {
    assert_eq!(with_fallback("a".into(), 0).unwrap(), "a:1");
    assert_eq!(
        with_fallback("b".into(), 2).unwrap(),
        "b (2) recovered from Io"
    );
    assert_eq!(
        with_fallback("c".into(), 1),
        Err(AppError::NotFound),
        "an ignored error skips the fallback"
    );
    let s = stats("fallback");
    assert_eq!((s.total_pass, s.total_exception, s.concurrency), (3, 1, 0));
}

#[sentinel_resource("blocked:fallback", fallback = recover, sentinel = sentinel)]
fn blocked_fallback(name: String, code: u8) -> Result<String, AppError> {
    let n = outcome(code)?;
    Ok(format!("{name}:{n}"))
}

#[test]
fn without_a_handler_a_block_goes_to_the_fallback() {
    assert_eq!(
        blocked_fallback("d".into(), 0).unwrap(),
        "d (0) recovered from Blocked(Flow)"
    );
    let s = stats("blocked:fallback");
    assert_eq!((s.total_pass, s.total_block, s.total_exception), (0, 1, 0));
}

// ---- panics ----

#[sentinel_resource("panics", block_handler = never, sentinel = sentinel)]
fn panics(really: bool) -> u32 {
    assert!(!really, "boom");
    7
}

fn never(_really: bool, _block: BlockError) -> u32 {
    unreachable!("not blocked")
}

#[test]
fn a_panic_exits_the_entry_and_counts_as_an_error() {
    assert_eq!(panics(false), 7);
    let caught = std::panic::catch_unwind(|| panics(true));
    assert!(caught.is_err());
    let s = stats("panics");
    assert_eq!((s.total_pass, s.total_exception, s.concurrency), (2, 1, 0));
}

// ---- methods and generics ----

#[derive(Debug, Default)]
struct Orders {
    created: Vec<u64>,
}

impl Orders {
    #[sentinel_resource("method:ref", args(id), sentinel = sentinel)]
    fn get(&self, id: u64) -> Result<Option<&u64>, AppError> {
        Ok(self.created.iter().find(|&&c| c == id))
    }

    #[sentinel_resource("method:mut", sentinel = sentinel)]
    fn create(&mut self, id: u64) -> Result<usize, AppError> {
        self.created.push(id);
        Ok(self.created.len())
    }

    /// Docs and attributes stay on the method.
    #[must_use]
    #[sentinel_resource("blocked:method", block_handler = Self::on_block, sentinel = sentinel)]
    fn count(&mut self, extra: usize) -> usize {
        self.created.len() + extra
    }

    fn on_block(&mut self, extra: usize, _block: BlockError) -> usize {
        self.created.push(0);
        extra
    }

    #[sentinel_resource("method:owned", sentinel = sentinel)]
    fn into_first(self) -> Result<u64, AppError> {
        self.created.first().copied().ok_or(AppError::NotFound)
    }
}

#[test]
fn methods_on_shared_mutable_and_owned_receivers() {
    let mut orders = Orders::default();
    assert_eq!(orders.create(1), Ok(1));
    assert_eq!(orders.create(2), Ok(2));
    assert_eq!(orders.get(2), Ok(Some(&2)));
    assert_eq!(orders.get(3), Ok(None));
    assert_eq!(orders.count(10), 10, "blocked: the handler got &mut self");
    assert_eq!(orders.created, [1, 2, 0]);
    assert_eq!(orders.into_first(), Ok(1));
    assert_eq!(stats("method:mut").total_pass, 2);
    assert_eq!(stats("method:ref").total_pass, 2);
    assert_eq!(stats("blocked:method").total_block, 1);
    assert_eq!(stats("method:owned").total_pass, 1);
    let args: Vec<_> = seen("method:ref").into_iter().map(|s| s.args).collect();
    assert_eq!(args, [[ParamValue::from(2u64)], [ParamValue::from(3u64)]]);
}

/// No bound is added to `T`: it is neither `Clone` nor `Send` here.
#[sentinel_resource("generic", sentinel = sentinel)]
fn describe<T: std::fmt::Debug>(value: T) -> Result<String, AppError> {
    Ok(format!("{value:?}"))
}

#[test]
fn a_generic_function_shares_one_resource_across_types() {
    assert_eq!(describe(1u8).unwrap(), "1");
    assert_eq!(describe("x").unwrap(), "\"x\"");
    assert_eq!(describe(std::rc::Rc::new(2)).unwrap(), "2");
    assert_eq!(stats("generic").total_pass, 3);
}

// ---- async ----

/// Polls `future` once with a waker that does nothing.
fn poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

/// Runs a future that never waits.
fn ready<F: Future>(future: F) -> F::Output {
    match poll_once(pin!(future)) {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the future waited"),
    }
}

/// Waits until told to go on, then fails or not.
#[sentinel_resource("async", sentinel = sentinel)]
async fn wait_then(gate: tokio::sync::oneshot::Receiver<bool>) -> Result<u32, AppError> {
    let fail = gate.await.unwrap_or(false);
    if fail {
        return Err(AppError::Io);
    }
    Ok(1)
}

#[test]
fn an_async_entry_is_held_across_await_and_exits_on_completion() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let mut call = pin!(wait_then(rx));
    assert!(poll_once(call.as_mut()).is_pending());
    assert_eq!(concurrency("async"), 1, "held while waiting");
    tx.send(true).unwrap();
    assert_eq!(poll_once(call.as_mut()), Poll::Ready(Err(AppError::Io)));
    let s = stats("async");
    assert_eq!((s.total_pass, s.total_exception, s.concurrency), (1, 1, 0));
}

#[sentinel_resource("async:cancelled", sentinel = sentinel)]
async fn cancelled(gate: tokio::sync::oneshot::Receiver<bool>) -> Result<u32, AppError> {
    gate.await.map_err(|_| AppError::Io)?;
    Ok(1)
}

#[test]
fn a_dropped_future_exits_its_entry_without_an_error() {
    let (_tx, rx) = tokio::sync::oneshot::channel();
    {
        let mut call = pin!(cancelled(rx));
        assert!(poll_once(call.as_mut()).is_pending());
        assert_eq!(concurrency("async:cancelled"), 1);
    }
    let s = stats("async:cancelled");
    assert_eq!((s.total_pass, s.total_exception, s.concurrency), (1, 0, 0));
}

#[sentinel_resource("blocked:async", block_handler = async_on_block, sentinel = sentinel)]
async fn blocked_async(id: u32) -> String {
    format!("body {id}")
}

async fn async_on_block(id: u32, block: BlockError) -> String {
    format!("handler {id} {}", block.kind())
}

#[sentinel_resource("blocked:async_fallback", fallback = async_recover, sentinel = sentinel)]
async fn blocked_async_fallback(id: u32) -> Result<String, AppError> {
    Ok(format!("body {id}"))
}

async fn async_recover(id: u32, error: AppError) -> Result<String, AppError> {
    Ok(format!("fallback {id} {error:?}"))
}

#[test]
fn an_async_block_awaits_the_handler_or_the_fallback() {
    assert_eq!(ready(blocked_async(3)), "handler 3 flow");
    assert_eq!(
        ready(blocked_async_fallback(4)).unwrap(),
        "fallback 4 Blocked(Flow)"
    );
    assert_eq!(stats("blocked:async").total_block, 1);
    assert_eq!(stats("blocked:async_fallback").total_block, 1);
}

#[sentinel_resource("queued:async", sentinel = sentinel)]
async fn queued(id: u32) -> Result<u32, AppError> {
    Ok(id)
}

/// With sentinel-flow-core's `tokio` feature (on in these tests) an `async fn`
/// waits for its turn on the tokio timer instead of sleeping the thread, so
/// a timeout can drop it while it waits, and it then counts nothing.
#[tokio::test(start_paused = true)]
async fn an_async_fn_waits_in_a_rate_limiter_queue_on_the_tokio_timer() {
    assert_eq!(queued(1).await, Ok(1));
    // Its turn is 100 ms away; the timeout fires first and drops it.
    let cancelled = tokio::time::timeout(Duration::from_millis(1), queued(2)).await;
    assert!(cancelled.is_err(), "the second call waited in the queue");
    let s = stats("queued:async");
    assert_eq!((s.total_pass, s.total_block, s.concurrency), (1, 0, 0));
}

#[test]
fn a_guarded_future_is_send() {
    fn assert_send<T: Send>(_: &T) {}
    let (_tx, rx) = tokio::sync::oneshot::channel();
    let call = wait_then(rx);
    assert_send(&call);
}
