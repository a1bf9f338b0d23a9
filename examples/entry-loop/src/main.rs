//! `cargo run --release -p entry-loop -- CASE [N]` (N default 100 000)
//!
//! Entries in a loop on a `ManualClock`, for counting instructions per
//! entry and exit with `valgrind --tool=callgrind` (noise-free, unlike
//! timings on a shared machine). Cases: `name` (`entry("res")`, no rule),
//! `handle` (a `Resource` handle, no rule), `pass` (a reject QPS rule that
//! never blocks, of a count above what quota leases serve: the window
//! sum's path), `lease` (one of a count that leases serve, as every real
//! count is), `pacer` (a rate limiter that never queues), `block` (one
//! that always blocks), `breaker` (one closed
//! circuit breaker), `param` (a hot-parameter QPS rule on a short string),
//! `authority` (a white list with the caller's origin), `system` (a system
//! QPS limit on an inbound entry), `user` (a user slot that never
//! refuses, among the rule checks), `concurrency` (a flow rule of the
//! concurrency grade that never blocks), `adaptive` (an adaptive rule,
//! Gradient2's defaults, whose limit one call in flight never reaches). No case but `block` refuses. Run it
//! with 0 and with N entries and divide the difference by N, so that setup
//! cancels out:
//!
//! ```sh
//! //! cargo build --release -p entry-loop
//! valgrind --tool=callgrind target/release/entry-loop handle 0
//! valgrind --tool=callgrind target/release/entry-loop handle 100000
//! ```
//!
//! (`target` is `$CARGO_TARGET_DIR` when that is set.) A tracing subscriber
//! prints the library's log on stderr; it adds no instructions per entry
//! (the counts are the same without it).

use sentinel_flow::adaptive::{AdaptiveAlgorithm, AdaptiveRule};
use sentinel_flow::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow::flow::{ControlBehavior, FlowGrade, FlowRule};
use sentinel_flow::param_flow::ParamFlowRule;
use sentinel_flow::slot::{EntryContext, Slot, order};
use sentinel_flow::system::SystemRule;
use sentinel_flow::{BlockError, EntryType, ManualClock, ParamValue, Sentinel};

/// A threshold no case reaches.
const NEVER: f64 = 1e12;
/// A threshold no case reaches, that a reject rule's quota leases serve
/// (up to 2^39 per second).
const LEASED: f64 = 1e11;
/// Per second per value: the most a hot-parameter rule takes, and more
/// than one thread reaches here.
const PER_VALUE: f64 = 6e7;

/// A user slot that lets every entry through.
#[derive(Debug)]
struct Open;

impl Slot for Open {
    fn order(&self) -> i32 {
        order::FLOW - 1
    }
    fn entry(&self, _: &EntryContext<'_>) -> Result<(), BlockError> {
        Ok(())
    }
}

fn main() {
    tracing_subscriber::fmt()
        .with_max_level(tracing_subscriber::filter::LevelFilter::INFO)
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args().skip(1);
    let case = args.next().unwrap_or_default();
    let n: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let clock = ManualClock::new(1_700_000_000_000);
    // `pacer_sys`: the pacer on the system clock (a rate limiter reads the
    // precise time).
    let mut builder = match case.as_str() {
        "pacer_sys" => Sentinel::builder(),
        _ => Sentinel::builder().clock(clock.clone()),
    };
    if case == "user" {
        builder = builder.slot(Open);
    }
    let sentinel = builder.build();
    let load = |result: Result<_, _>| {
        result.expect("valid rules");
    };
    match case.as_str() {
        "pass" => load(
            sentinel
                .flow_rules()
                .load(vec![FlowRule::new("res", NEVER)]),
        ),
        "pacer" | "pacer_sys" => load(sentinel.flow_rules().load(vec![FlowRule {
            control_behavior: ControlBehavior::RateLimiter,
            ..FlowRule::new("res", NEVER)
        }])),
        "lease" => load(
            sentinel
                .flow_rules()
                .load(vec![FlowRule::new("res", LEASED)]),
        ),
        "block" => load(sentinel.flow_rules().load(vec![FlowRule::new("res", 0.0)])),
        "breaker" => load(sentinel.degrade_rules().load(vec![DegradeRule::new(
            "res",
            DegradeGrade::ErrorRatio,
            0.5,
        )])),
        "param" => load(
            sentinel
                .param_flow_rules()
                .load(vec![ParamFlowRule::new("res", 0, PER_VALUE)]),
        ),
        "authority" => load(sentinel.authority_rules().load(vec![AuthorityRule::new(
            "res",
            AuthorityStrategy::White,
            ["checkout", "ops"],
        )])),
        "concurrency" => load(sentinel.flow_rules().load(vec![FlowRule {
            grade: FlowGrade::Concurrency,
            ..FlowRule::new("res", NEVER)
        }])),
        "adaptive" => load(sentinel.adaptive_rules().load(vec![AdaptiveRule::new(
            "res",
            AdaptiveAlgorithm::gradient2(),
        )])),
        "system" => load(sentinel.system_rules().load(vec![SystemRule {
            qps: Some(NEVER),
            ..SystemRule::default()
        }])),
        _ => {}
    }
    let handle = sentinel.resource("res");
    let mut passed = 0u64;
    for i in 0..n {
        let entry = match case.as_str() {
            "name" => sentinel.entry("res"),
            "param" => handle
                .builder()
                .args(&[ParamValue::from("sku-12345")])
                .enter(),
            "authority" => handle.builder().origin("checkout").enter(),
            "system" => handle.builder().entry_type(EntryType::Inbound).enter(),
            _ => handle.entry(),
        };
        passed += u64::from(entry.is_ok());
        drop(entry);
        if i % 64 == 63 {
            clock.advance_ms(1);
        }
    }
    let expected = if case == "block" { 0 } else { n };
    assert_eq!(passed, expected, "case {case}: passed {passed} of {n}");
    std::hint::black_box(passed);
}
