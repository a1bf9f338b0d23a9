//! The differential stress test's workload and reference model, shared by
//! `sentinel-core/tests/differential/main.rs` (short, fixed seeds) and
//! `examples/stress` (as long as asked).
//!
//! Worker threads make random entries on an isolated instance driven by a
//! `ManualClock`, and log every call: the clock read just before and just
//! after it, its outcome, batch, origin, context, entry type, argument, and
//! when it exits, the clock around the exit. A driver steps the clock. At
//! checkpoints, while every worker is parked, the model recomputes from the
//! logs alone what each reading of the library must be, and compares:
//! node snapshots (resource, origin, context and inbound nodes, and
//! `Sentinel::resources`), lifetime totals, the metric log lines,
//! `Sentinel::block_counts` and the Prometheus counters; at the end, the
//! block log.
//!
//! Two modes. In phase mode the clock moves only while every worker is at a
//! barrier, so every call of a phase reads one time and every reading must
//! equal the model. In racing mode the clock moves while workers run; an
//! event is known to lie in its logged interval only, so a window reading
//! must lie between the events certainly in the window and those possibly
//! in it, while totals that need no time (lifetime, block counts,
//! Prometheus counters, concurrency) stay exact.
//!
//! On top of the statistics, the rules' own promises: a reject QPS rule
//! never admits more than its count in a bucket-aligned second (and refusals
//! it need not have made are counted), a concurrency rule (and a hot
//! parameter's concurrency rule) never holds more than its count, authority
//! lists refuse exactly their origins, and each refusal's kind is one the
//! resource's rules can give.
//!
//! The files: this one the workload (resources, rules, the PRNG, the log of
//! calls); `run.rs` running a seed (workers, the clock's driver,
//! checkpoints); `reference.rs` the model of each node and the report;
//! `check.rs` and `logs.rs` the checker (readings, then the metric and
//! block logs and the rules' promises). They share one namespace: each file
//! imports `super::*`, and this one imports theirs.

mod check;
mod logs;
mod reference;
mod run;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{Barrier, Mutex};

use sentinel_flow_core::authority::{AuthorityRule, AuthorityStrategy};
use sentinel_flow_core::degrade::{DegradeGrade, DegradeRule};
use sentinel_flow_core::flow::{ControlBehavior, FlowGrade, FlowRule};
use sentinel_flow_core::log::{MetricLine, MetricLogConfig, MetricSearcher, MetricWriter};
use sentinel_flow_core::node::{NodeSnapshot, StatisticNode, Totals};
use sentinel_flow_core::param_flow::{ParamFlowGrade, ParamFlowRule};
use sentinel_flow_core::stat::DEFAULT_MAX_RT_MS;
use sentinel_flow_core::system::{ManualStatus, SystemRule};
use sentinel_flow_core::{
    BlockKind, DEFAULT_CONTEXT, Entry, EntryType, ManualClock, ParamValue, Sentinel,
};

use check::*;
use logs::*;
pub(crate) use reference::Report;
use reference::*;
pub(crate) use run::{Config, Mode, run};

/// 2023-11-14 22:13:20 UTC, on a second.
pub(crate) const T0: u64 = 1_700_000_000_000;
/// The second window's bucket.
const BUCKET: u64 = 500;
/// The response time ceiling of the default windows.
const MAX_RT: u64 = DEFAULT_MAX_RT_MS;
/// The metric log's app name.
const APP: &str = "differential";

/// The reject QPS rule's count.
pub(crate) const REJECT_COUNT: u64 = 10;
/// The concurrency rule's count.
pub(crate) const CONCURRENCY_COUNT: u64 = 3;
/// The hot parameters' concurrency rule's count per value.
pub(crate) const HOT_CONCURRENCY_COUNT: u64 = 2;
/// Entries one worker holds at most.
const MAX_HELD: usize = 6;
/// Operations per worker and millisecond of the clock in racing mode, one
/// picked per round: few (calls spread over the clock) or many (calls back
/// to back, so that clock steps land inside them).
const OPS_PER_MS: [u32; 3] = [2, 6, 16];

// ---- the workload ----

/// What guards a resource of the scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Guard {
    Reject,
    Concurrency,
    WarmUp,
    RateLimiter,
    ErrorRatio,
    SlowRatio,
    HotParam,
    HotConcurrency,
    BlackList,
    WhiteList,
    Nothing,
}

impl Guard {
    /// The kind of refusal this resource's own rules give.
    fn block_kind(self) -> Option<BlockKind> {
        match self {
            Guard::Reject | Guard::Concurrency | Guard::WarmUp | Guard::RateLimiter => {
                Some(BlockKind::Flow)
            }
            Guard::ErrorRatio | Guard::SlowRatio => Some(BlockKind::Degrade),
            Guard::HotParam | Guard::HotConcurrency => Some(BlockKind::ParamFlow),
            Guard::BlackList | Guard::WhiteList => Some(BlockKind::Authority),
            Guard::Nothing => None,
        }
    }

    /// The name results are reported under.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Guard::Reject => "flow reject qps",
            Guard::Concurrency => "flow concurrency",
            Guard::WarmUp => "flow warm-up",
            Guard::RateLimiter => "flow rate limiter",
            Guard::ErrorRatio => "breaker error ratio",
            Guard::SlowRatio => "breaker slow ratio",
            Guard::HotParam => "hot param qps",
            Guard::HotConcurrency => "hot param concurrency",
            Guard::BlackList => "authority black list",
            Guard::WhiteList => "authority white list",
            Guard::Nothing => "no rule",
        }
    }
}

/// One resource of the scenario.
#[derive(Debug)]
pub(crate) struct Spec {
    pub(crate) name: &'static str,
    pub(crate) guard: Guard,
    /// Relative frequency among entries.
    weight: u64,
    /// Percent of passed calls that record an error.
    error_pct: u64,
    /// Percent of passed calls held for a while before they exit.
    hold_pct: u64,
}

const fn spec(
    name: &'static str,
    guard: Guard,
    weight: u64,
    error_pct: u64,
    hold_pct: u64,
) -> Spec {
    Spec {
        name,
        guard,
        weight,
        error_pct,
        hold_pct,
    }
}

/// The resources: one per rule kind, and two without rules.
pub(crate) const RESOURCES: [Spec; 12] = [
    spec("reject", Guard::Reject, 6, 10, 30),
    spec("concurrency", Guard::Concurrency, 3, 10, 75),
    spec("warm_up", Guard::WarmUp, 2, 10, 30),
    spec("rate_limiter", Guard::RateLimiter, 1, 10, 30),
    spec("error_ratio", Guard::ErrorRatio, 2, 45, 30),
    spec("slow_ratio", Guard::SlowRatio, 2, 10, 60),
    spec("hot", Guard::HotParam, 2, 10, 30),
    spec("hot_concurrency", Guard::HotConcurrency, 2, 10, 75),
    spec("black_list", Guard::BlackList, 1, 10, 30),
    spec("white_list", Guard::WhiteList, 1, 10, 30),
    spec("plain", Guard::Nothing, 2, 10, 40),
    spec("plain_too", Guard::Nothing, 1, 20, 20),
];
/// Origins: the first is none.
pub(crate) const ORIGINS: [&str; 5] = ["", "app", "web", "evil", "bot"];
const BLACK_LIST: [&str; 2] = ["evil", "bot"];
const WHITE_LIST: [&str; 2] = ["app", "web"];
/// The named context (context 1; context 0 is the default one).
const CONTEXT: &str = "checkout";
/// Values of the hot parameter.
const ARGS: [&str; 3] = ["alice", "bob", "carol"];

/// Every rule of the scenario into `sentinel`; system limits scale with the
/// number of threads.
fn load_rules(sentinel: &Sentinel, threads: usize) {
    let flow = vec![
        FlowRule::new("reject", REJECT_COUNT as f64),
        FlowRule {
            grade: FlowGrade::Concurrency,
            ..FlowRule::new("concurrency", CONCURRENCY_COUNT as f64)
        },
        FlowRule {
            control_behavior: ControlBehavior::WarmUp,
            warm_up_period_sec: 2,
            ..FlowRule::new("warm_up", 30.0)
        },
        FlowRule {
            control_behavior: ControlBehavior::RateLimiter,
            max_queueing_time_ms: 1,
            ..FlowRule::new("rate_limiter", 1_000.0)
        },
    ];
    sentinel.flow_rules().load(flow).expect("flow rules");
    let degrade = vec![
        DegradeRule {
            min_request_amount: 4,
            time_window_sec: 1,
            probe_num: 2,
            ..DegradeRule::new("error_ratio", DegradeGrade::ErrorRatio, 0.4)
        },
        DegradeRule {
            min_request_amount: 4,
            time_window_sec: 1,
            slow_ratio_threshold: 0.5,
            ..DegradeRule::new("slow_ratio", DegradeGrade::SlowRequestRatio, 30.0)
        },
    ];
    sentinel
        .degrade_rules()
        .load(degrade)
        .expect("degrade rules");
    let param = vec![
        ParamFlowRule::new("hot", 0, 4.0),
        ParamFlowRule {
            grade: ParamFlowGrade::Concurrency,
            ..ParamFlowRule::new("hot_concurrency", 0, HOT_CONCURRENCY_COUNT as f64)
        },
    ];
    sentinel.param_flow_rules().load(param).expect("hot rules");
    let authority = vec![
        AuthorityRule::new("black_list", AuthorityStrategy::Black, BLACK_LIST),
        AuthorityRule::new("white_list", AuthorityStrategy::White, WHITE_LIST),
    ];
    sentinel
        .authority_rules()
        .load(authority)
        .expect("authority rules");
    let system = vec![SystemRule {
        qps: Some(25.0 * threads as f64),
        max_thread: Some(4 * threads as u64),
        ..SystemRule::default()
    }];
    sentinel.system_rules().load(system).expect("system rules");
}

// ---- a small PRNG (splitmix64) ----

/// splitmix64: small, fast, and enough for a workload.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A number in `lo..=hi`.
    fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True `num` times in `den`.
    fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

// ---- the log ----

/// A logged interval of the clock: read before and after a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub(crate) before: u64,
    pub(crate) after: u64,
}

impl Span {
    /// Whether an event of this call is certainly counted in a window
    /// holding `from..to`: the whole interval lies in it, and the call was
    /// too short for the event's bucket to have been taken over by a later
    /// one (an event older than its slot's slice is counted in lifetime
    /// totals only; that needs another thread to have read a time a whole
    /// window later before the call ended).
    fn certainly_in(self, from: u64, to: u64) -> bool {
        from <= self.before && self.after < to && self.after < bucket(self.before) + 2 * BUCKET
    }

    /// Whether an event of this call may be counted in `from..to`.
    fn maybe_in(self, from: u64, to: u64) -> bool {
        self.after >= from && self.before < to
    }
}

/// How a logged call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Let through; `exit` once it exited.
    Passed { error: bool, exit: Option<Span> },
    /// Refused.
    Blocked(BlockKind),
}

/// One logged call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Call {
    pub(crate) thread: usize,
    pub(crate) resource: usize,
    pub(crate) origin: usize,
    pub(crate) context: usize,
    pub(crate) inbound: bool,
    pub(crate) batch: u64,
    pub(crate) arg: Option<usize>,
    pub(crate) enter: Span,
    pub(crate) outcome: Outcome,
}

impl Call {
    fn passed(&self) -> bool {
        matches!(self.outcome, Outcome::Passed { .. })
    }

    /// Its response time's bounds, once it exited (capped as the node caps it).
    fn rt(&self, exit: Span) -> (u64, u64) {
        let lo = exit.before.saturating_sub(self.enter.after).min(MAX_RT);
        let hi = exit.after.saturating_sub(self.enter.before).min(MAX_RT);
        (lo, hi)
    }
}

fn bucket(t: u64) -> u64 {
    t - t % BUCKET
}

fn second(t: u64) -> u64 {
    t - t % 1_000
}
