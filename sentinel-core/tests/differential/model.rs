//! The differential stress test's workload and reference model, shared by
//! `sentinel-core/tests/differential.rs` (short, fixed seeds) and
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

// ---- running ----

/// How the clock is driven.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The clock moves only while every worker is parked.
    Phase,
    /// The clock moves while workers run.
    Racing,
}

impl Mode {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Mode::Phase => "phase",
            Mode::Racing => "racing",
        }
    }
}

/// One run.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) seed: u64,
    pub(crate) threads: usize,
    pub(crate) mode: Mode,
    /// Phases (phase mode) or rounds (racing mode).
    pub(crate) steps: usize,
    /// Operations per worker and phase (phase mode).
    pub(crate) ops: usize,
    /// Clock steps per round (racing mode).
    pub(crate) ticks: usize,
    /// A checkpoint every this many phases (every round in racing mode).
    pub(crate) checkpoint_every: usize,
    /// Renders the Prometheus text (feature `prometheus`), if available.
    pub(crate) prometheus: Option<fn(&Sentinel) -> String>,
}

/// What the workers are told at a barrier.
const RUN: u8 = 0;
const DRAIN: u8 = 1;
const QUIT: u8 = 2;

/// What the driver and the workers share.
struct Shared<'s> {
    sentinel: &'s Sentinel,
    mode: Mode,
    ops: usize,
    barrier: Barrier,
    command: AtomicU8,
    stop: AtomicBool,
    phase: AtomicU64,
    /// Racing mode: this round's operations per millisecond and worker.
    ops_per_ms: AtomicU32,
    logs: Vec<Mutex<Vec<Call>>>,
    /// Entries of `concurrency` held now (after their entry, before their
    /// exit), and the most ever.
    held: AtomicU64,
    held_max: AtomicU64,
    /// The same per hot parameter value of `hot_concurrency`.
    hot_held: [AtomicU64; ARGS.len()],
    hot_max: AtomicU64,
}

/// An entry a worker holds.
struct Held<'s> {
    entry: Entry<'s>,
    index: usize,
    due: u64,
    resource: usize,
    arg: Option<usize>,
}

impl<'s> Shared<'s> {
    fn log(&self, thread: usize, call: Call) -> usize {
        let mut log = self.logs[thread].lock().expect("log");
        log.push(call);
        log.len() - 1
    }

    fn worker(&self, me: usize, seed: u64) {
        let mut rng = Rng::new(seed ^ (me as u64 + 1).wrapping_mul(0xD6E8_FEB8_6659_FD93));
        let mut held: Vec<Held<'s>> = Vec::new();
        loop {
            self.barrier.wait();
            let command = self.command.load(SeqCst);
            if command == QUIT {
                break;
            }
            match self.mode {
                Mode::Phase => {
                    let phase = self.phase.load(SeqCst);
                    for _ in 0..self.ops {
                        self.step(me, &mut rng, &mut held, phase);
                    }
                }
                Mode::Racing => {
                    // A few operations per millisecond of the clock, so
                    // that the threads' share does not depend on how the
                    // scheduler treats the driver.
                    let (mut last, mut ops) = (0, 0);
                    let ops_per_ms = self.ops_per_ms.load(SeqCst);
                    while !self.stop.load(SeqCst) {
                        let now = self.sentinel.now_ms();
                        if now != last {
                            (last, ops) = (now, 0);
                        }
                        if ops >= ops_per_ms {
                            std::thread::yield_now();
                            continue;
                        }
                        ops += 1;
                        self.step(me, &mut rng, &mut held, now);
                    }
                }
            }
            if command == DRAIN {
                for h in held.drain(..) {
                    self.exit(me, h);
                }
            }
            self.barrier.wait();
        }
        for h in held.drain(..) {
            self.exit(me, h);
        }
    }

    /// One operation: exit a held entry that is due, or enter.
    fn step(&self, me: usize, rng: &mut Rng, held: &mut Vec<Held<'s>>, now: u64) {
        if !held.is_empty() {
            let i = rng.below(held.len() as u64) as usize;
            if held.len() >= MAX_HELD || (held[i].due <= now && rng.chance(1, 2)) {
                let h = held.swap_remove(i);
                self.exit(me, h);
                return;
            }
        }
        self.enter(me, rng, held, now);
    }

    fn pick_resource(rng: &mut Rng) -> usize {
        let total: u64 = RESOURCES.iter().map(|s| s.weight).sum();
        let mut pick = rng.below(total);
        for (i, spec) in RESOURCES.iter().enumerate() {
            if pick < spec.weight {
                return i;
            }
            pick -= spec.weight;
        }
        unreachable!("weights add up")
    }

    fn enter(&self, me: usize, rng: &mut Rng, held: &mut Vec<Held<'s>>, now: u64) {
        let resource = Self::pick_resource(rng);
        let spec = &RESOURCES[resource];
        let origin = rng.below(ORIGINS.len() as u64) as usize;
        let context = usize::from(rng.chance(1, 4));
        let inbound = rng.chance(1, 3);
        let batch = if rng.chance(3, 4) {
            1
        } else {
            rng.between(2, 4)
        };
        let arg = match spec.guard {
            Guard::HotParam | Guard::HotConcurrency if rng.chance(7, 8) => {
                Some(rng.below(ARGS.len() as u64) as usize)
            }
            _ => None,
        };
        let args = [ParamValue::from(ARGS[arg.unwrap_or(0)])];
        let mut builder = self
            .sentinel
            .entry_builder(spec.name)
            .entry_type(if inbound {
                EntryType::Inbound
            } else {
                EntryType::Outbound
            })
            .batch_count(batch as u32)
            .origin(ORIGINS[origin]);
        if context == 1 {
            builder = builder.context(CONTEXT);
        }
        if arg.is_some() {
            builder = builder.args(&args);
        }
        let before = self.sentinel.now_ms();
        let result = builder.enter();
        let after = self.sentinel.now_ms();
        let mut call = Call {
            thread: me,
            resource,
            origin,
            context,
            inbound,
            batch,
            arg,
            enter: Span { before, after },
            outcome: Outcome::Blocked(BlockKind::Flow),
        };
        let entry = match result {
            Ok(entry) => entry,
            Err(block) => {
                call.outcome = Outcome::Blocked(block.kind());
                self.log(me, call);
                return;
            }
        };
        match (spec.guard, arg) {
            (Guard::Concurrency, _) => {
                let now_held = self.held.fetch_add(1, SeqCst) + 1;
                self.held_max.fetch_max(now_held, SeqCst);
            }
            (Guard::HotConcurrency, Some(a)) => {
                let now_held = self.hot_held[a].fetch_add(1, SeqCst) + 1;
                self.hot_max.fetch_max(now_held, SeqCst);
            }
            _ => {}
        }
        let error = rng.chance(spec.error_pct, 100);
        if error {
            entry.set_error("differential");
        }
        call.outcome = Outcome::Passed { error, exit: None };
        let index = self.log(me, call);
        let mut h = Held {
            entry,
            index,
            due: 0,
            resource,
            arg,
        };
        if rng.chance(spec.hold_pct, 100) {
            h.due = match self.mode {
                Mode::Phase => now + [0, 1, 1, 2, 3, 6][rng.below(6) as usize],
                Mode::Racing => {
                    after
                        + match rng.below(8) {
                            0..=2 => rng.below(5),
                            3..=5 => rng.between(10, 80),
                            6 => rng.between(100, 700),
                            _ => rng.between(900, 1_600),
                        }
                }
            };
            held.push(h);
        } else {
            self.exit(me, h);
        }
    }

    fn exit(&self, me: usize, h: Held<'s>) {
        match (RESOURCES[h.resource].guard, h.arg) {
            (Guard::Concurrency, _) => {
                self.held.fetch_sub(1, SeqCst);
            }
            (Guard::HotConcurrency, Some(a)) => {
                self.hot_held[a].fetch_sub(1, SeqCst);
            }
            _ => {}
        }
        let before = self.sentinel.now_ms();
        drop(h.entry);
        let after = self.sentinel.now_ms();
        let mut log = self.logs[me].lock().expect("log");
        if let Outcome::Passed { exit, .. } = &mut log[h.index].outcome {
            *exit = Some(Span { before, after });
        }
    }

    fn calls(&self) -> Vec<Call> {
        self.logs
            .iter()
            .flat_map(|log| log.lock().expect("log").clone())
            .collect()
    }
}

/// A clock step between phases, or between checkpoints.
fn phase_step(rng: &mut Rng, now: u64) -> u64 {
    let to_edge = BUCKET - now % BUCKET;
    match rng.below(20) {
        0 => 0,
        1..=6 => rng.between(1, 30),
        7..=9 => to_edge,
        10 | 11 => to_edge.saturating_sub(1).max(1),
        12..=16 => rng.between(100, 600),
        _ => rng.between(600, 2_500),
    }
}

/// A clock step while workers run.
fn racing_step(rng: &mut Rng, now: u64) -> u64 {
    match rng.below(100) {
        0..=89 => 1,
        90..=93 => BUCKET - now % BUCKET,
        94..=98 => rng.between(2, 20),
        _ => rng.between(500, 1_600),
    }
}

/// Runs one scenario and checks it; the report says what was compared and
/// every mismatch.
pub(crate) fn run(config: &Config) -> Report {
    let clock = ManualClock::new(T0);
    let sentinel = Sentinel::builder()
        .clock(clock.clone())
        .system_status(ManualStatus::new())
        .build();
    load_rules(&sentinel, config.threads);
    let dir = tempfile::tempdir().expect("temporary directory");
    let mut checker = Checker::new(config, &sentinel, dir.path());
    let shared = Shared {
        sentinel: &sentinel,
        mode: config.mode,
        ops: config.ops,
        barrier: Barrier::new(config.threads + 1),
        command: AtomicU8::new(RUN),
        stop: AtomicBool::new(false),
        phase: AtomicU64::new(0),
        ops_per_ms: AtomicU32::new(OPS_PER_MS[0]),
        logs: (0..config.threads)
            .map(|_| Mutex::new(Vec::new()))
            .collect(),
        held: AtomicU64::new(0),
        held_max: AtomicU64::new(0),
        hot_held: std::array::from_fn(|_| AtomicU64::new(0)),
        hot_max: AtomicU64::new(0),
    };
    let mut rng = Rng::new(config.seed);
    std::thread::scope(|s| {
        for me in 0..config.threads {
            let shared = &shared;
            let seed = config.seed;
            s.spawn(move || shared.worker(me, seed));
        }
        for step in 0..config.steps {
            let last = step + 1 == config.steps;
            shared.command.store(if last { DRAIN } else { RUN }, SeqCst);
            let checkpoint = match config.mode {
                Mode::Phase => {
                    shared.phase.store(step as u64, SeqCst);
                    shared.barrier.wait();
                    shared.barrier.wait();
                    last || step % config.checkpoint_every == config.checkpoint_every - 1
                }
                Mode::Racing => {
                    shared.stop.store(false, SeqCst);
                    let ops = OPS_PER_MS[rng.below(OPS_PER_MS.len() as u64) as usize];
                    shared.ops_per_ms.store(ops, SeqCst);
                    shared.barrier.wait();
                    for tick in 0..config.ticks {
                        clock.advance_ms(racing_step(&mut rng, sentinel.now_ms()));
                        if tick % 20 == 19 {
                            // The block log's writer runs beside the
                            // entries, as its background thread does.
                            checker.write_blocks();
                        }
                        // Let the workers run: give up the core, or spin
                        // a while beside them (a tick in the middle of
                        // their calls).
                        match rng.below(3) {
                            0 => std::thread::yield_now(),
                            _ => {
                                for _ in 0..rng.below(4_000) {
                                    std::hint::spin_loop();
                                }
                            }
                        }
                    }
                    shared.stop.store(true, SeqCst);
                    shared.barrier.wait();
                    true
                }
            };
            if checkpoint {
                checker.checkpoint(&shared.calls());
            }
            if !last {
                let jump = checkpoint && rng.chance(1, 30);
                let by = match (jump, config.mode) {
                    (true, _) => rng.between(30_000, 75_000),
                    (false, Mode::Phase) => phase_step(&mut rng, sentinel.now_ms()),
                    (false, Mode::Racing) => rng.below(3),
                };
                clock.advance_ms(by);
            }
        }
        shared.command.store(QUIT, SeqCst);
        shared.barrier.wait();
    });
    // The workers have exited: their block tallies are retired, their
    // entries all exited.
    let calls = shared.calls();
    clock.advance_ms(phase_step(&mut rng, sentinel.now_ms()));
    checker.checkpoint(&calls);
    checker.properties(&calls);
    checker.writer.finish(&sentinel);
    checker.block_log(&calls);
    checker.report.max_concurrency = shared.held_max.load(SeqCst);
    checker.report.max_hot_concurrency = shared.hot_max.load(SeqCst);
    if checker.report.max_concurrency > CONCURRENCY_COUNT {
        let max = checker.report.max_concurrency;
        checker.fail(
            "concurrency",
            format_args!("entries held at once: {max} > count {CONCURRENCY_COUNT}"),
        );
    }
    if checker.report.max_hot_concurrency > HOT_CONCURRENCY_COUNT {
        let max = checker.report.max_hot_concurrency;
        checker.fail(
            "hot_concurrency",
            format_args!(
                "entries of one value held at once: {max} > count {HOT_CONCURRENCY_COUNT}"
            ),
        );
    }
    checker.report.calls = calls.len() as u64;
    checker.report.straddling = calls
        .iter()
        .filter(|c| match c.outcome {
            Outcome::Passed {
                exit: Some(exit), ..
            } => c.enter.before != c.enter.after || exit.before != exit.after,
            _ => c.enter.before != c.enter.after,
        })
        .count() as u64;
    for call in &calls {
        let label = RESOURCES[call.resource].guard.label();
        checker.report.by_kind.entry(label).or_default().events += 1;
    }
    checker.report
}

// ---- the model ----

/// Counts of one node over one window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tally {
    pass: u64,
    block: u64,
    success: u64,
    exception: u64,
    rt_sum: u64,
}

/// What a window must hold: at least `lo` (the events certainly in it), at
/// most `hi` (those possibly in it), and the smallest RT's bounds.
#[derive(Clone, Copy, Debug)]
struct Bounds {
    lo: Tally,
    hi: Tally,
    /// The smallest RT low bound among exits possibly in the window.
    min_rt_lo: u64,
    /// The smallest RT high bound among exits certainly in it.
    min_rt_hi: u64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            lo: Tally::default(),
            hi: Tally::default(),
            min_rt_lo: u64::MAX,
            min_rt_hi: u64::MAX,
        }
    }
}

/// Where events count: a window of time, or all time.
#[derive(Clone, Copy)]
enum Window {
    Range(u64, u64),
    All,
}

impl Window {
    fn certain(self, span: Span) -> bool {
        match self {
            Window::Range(from, to) => span.certainly_in(from, to),
            Window::All => true,
        }
    }

    fn maybe(self, span: Span) -> bool {
        match self {
            Window::Range(from, to) => span.maybe_in(from, to),
            Window::All => true,
        }
    }
}

impl Bounds {
    fn add(&mut self, call: &Call, window: Window) {
        let n = call.batch;
        let (certain, maybe) = (window.certain(call.enter), window.maybe(call.enter));
        match call.outcome {
            Outcome::Blocked(_) => {
                self.lo.block += n * u64::from(certain);
                self.hi.block += n * u64::from(maybe);
            }
            Outcome::Passed { error, exit } => {
                self.lo.pass += n * u64::from(certain);
                self.hi.pass += n * u64::from(maybe);
                let Some(exit) = exit else { return };
                let (rt_lo, rt_hi) = call.rt(exit);
                let errors = if error { n } else { 0 };
                if window.certain(exit) {
                    self.lo.success += n;
                    self.lo.exception += errors;
                    self.lo.rt_sum += rt_lo;
                    self.min_rt_hi = self.min_rt_hi.min(rt_hi);
                }
                if window.maybe(exit) {
                    self.hi.success += n;
                    self.hi.exception += errors;
                    self.hi.rt_sum += rt_hi;
                    self.min_rt_lo = self.min_rt_lo.min(rt_lo);
                }
            }
        }
    }

    /// The bounds of a reading of `whole` less a reading of `part` (never
    /// below zero), with this difference's own RT minimum: exact when both
    /// readings are.
    fn difference(&self, whole: &Bounds, part: &Bounds) -> Bounds {
        let sub = |a: &Tally, b: &Tally| Tally {
            pass: a.pass.saturating_sub(b.pass),
            block: a.block.saturating_sub(b.block),
            success: a.success.saturating_sub(b.success),
            exception: a.exception.saturating_sub(b.exception),
            rt_sum: a.rt_sum.saturating_sub(b.rt_sum),
        };
        Bounds {
            lo: sub(&whole.lo, &part.hi),
            hi: sub(&whole.hi, &part.lo),
            ..*self
        }
    }

    /// The bounds of `min_rt()`: the ceiling when none completed, never
    /// below 1.
    fn min_rt_reading(&self) -> (u64, u64) {
        let reading = |m: u64| m.clamp(1, MAX_RT);
        (reading(self.min_rt_lo), reading(self.min_rt_hi))
    }
}

/// Everything the model says of one node at a checkpoint.
#[derive(Clone, Copy, Debug, Default)]
struct NodeModel {
    calls: u64,
    second: Bounds,
    minute: Bounds,
    life: Bounds,
    concurrency: u64,
}

impl NodeModel {
    fn add(&mut self, call: &Call, second: Window, minute: Window) {
        self.calls += 1;
        self.second.add(call, second);
        self.minute.add(call, minute);
        self.life.add(call, Window::All);
        if matches!(call.outcome, Outcome::Passed { exit: None, .. }) {
            self.concurrency += 1;
        }
    }
}

/// A node of the library, as the model names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Node {
    Resource(usize),
    Origin(usize, usize),
    Context(usize, usize),
    Inbound,
}

impl Node {
    /// The nodes one call counts on.
    fn of(call: &Call) -> impl Iterator<Item = Node> {
        [
            Some(Node::Resource(call.resource)),
            (call.origin != 0).then_some(Node::Origin(call.resource, call.origin)),
            Some(Node::Context(call.resource, call.context)),
            call.inbound.then_some(Node::Inbound),
        ]
        .into_iter()
        .flatten()
    }

    fn label(self) -> String {
        match self {
            Node::Resource(r) => format!("resource {}", RESOURCES[r].name),
            Node::Origin(r, o) => format!("resource {} origin {}", RESOURCES[r].name, ORIGINS[o]),
            Node::Context(r, 0) => format!("resource {} default context", RESOURCES[r].name),
            Node::Context(r, _) => format!("resource {} context {CONTEXT}", RESOURCES[r].name),
            Node::Inbound => "inbound total".to_owned(),
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Node::Resource(r) | Node::Origin(r, _) | Node::Context(r, _) => {
                RESOURCES[r].guard.label()
            }
            Node::Inbound => "instance",
        }
    }
}

/// Events and readings compared for one rule kind.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KindCounts {
    pub(crate) events: u64,
    pub(crate) readings: u64,
}

/// What the reject QPS rule did.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RejectStats {
    /// Bucket-aligned windows with a pass certainly in them.
    pub(crate) windows: u64,
    /// The most passes certainly in one window.
    pub(crate) max_window_passes: u64,
    /// Windows holding more passes than the count.
    pub(crate) windows_over: u64,
    /// Per-second metric lines of the resource checked against the count.
    pub(crate) lines: u64,
    /// Calls of the resource during which the clock crossed a bucket's
    /// edge (where a thread may find the rule gone to the next bucket).
    pub(crate) edge_calls: u64,
    /// Refusals that the rule would have admitted (see `properties`).
    pub(crate) refusals: u64,
    pub(crate) wrongful: u64,
    pub(crate) max_wrongful_per_window: u64,
    pub(crate) max_wrongful_per_thread_window: u64,
}

/// What a run compared and found.
#[derive(Clone, Debug, Default)]
pub(crate) struct Report {
    pub(crate) runs: u64,
    pub(crate) calls: u64,
    /// Calls during which the clock moved (entry or exit).
    pub(crate) straddling: u64,
    pub(crate) checkpoints: u64,
    pub(crate) readings: u64,
    pub(crate) by_kind: BTreeMap<&'static str, KindCounts>,
    pub(crate) reject: RejectStats,
    pub(crate) max_concurrency: u64,
    pub(crate) max_hot_concurrency: u64,
    pub(crate) mismatch_count: u64,
    pub(crate) mismatches: Vec<String>,
}

/// Mismatches kept in full per report (all are counted).
const KEPT_MISMATCHES: usize = 40;

impl Report {
    /// Adds `other` (another run) to this one.
    #[allow(dead_code)] // by the stress example only
    pub(crate) fn merge(&mut self, other: &Report) {
        self.runs += other.runs;
        self.calls += other.calls;
        self.straddling += other.straddling;
        self.checkpoints += other.checkpoints;
        self.readings += other.readings;
        for (kind, counts) in &other.by_kind {
            let mine = self.by_kind.entry(kind).or_default();
            mine.events += counts.events;
            mine.readings += counts.readings;
        }
        let (r, o) = (&mut self.reject, &other.reject);
        r.windows += o.windows;
        r.max_window_passes = r.max_window_passes.max(o.max_window_passes);
        r.windows_over += o.windows_over;
        r.lines += o.lines;
        r.edge_calls += o.edge_calls;
        r.refusals += o.refusals;
        r.wrongful += o.wrongful;
        r.max_wrongful_per_window = r.max_wrongful_per_window.max(o.max_wrongful_per_window);
        r.max_wrongful_per_thread_window = r
            .max_wrongful_per_thread_window
            .max(o.max_wrongful_per_thread_window);
        self.max_concurrency = self.max_concurrency.max(other.max_concurrency);
        self.max_hot_concurrency = self.max_hot_concurrency.max(other.max_hot_concurrency);
        self.mismatch_count += other.mismatch_count;
        for m in &other.mismatches {
            if self.mismatches.len() < KEPT_MISMATCHES {
                self.mismatches.push(m.clone());
            }
        }
    }

    /// A summary, one item per line.
    pub(crate) fn summary(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} run(s), {} calls ({} with the clock moving during entry or exit), {} checkpoints, {} readings compared, {} mismatches",
            self.runs,
            self.calls,
            self.straddling,
            self.checkpoints,
            self.readings,
            self.mismatch_count
        );
        let _ = writeln!(
            out,
            "  {:<24} {:>10} {:>10}",
            "rule kind", "events", "readings"
        );
        for (kind, counts) in &self.by_kind {
            let _ = writeln!(
                out,
                "  {:<24} {:>10} {:>10}",
                kind, counts.events, counts.readings
            );
        }
        let r = &self.reject;
        let _ = writeln!(
            out,
            "  reject qps (count {REJECT_COUNT}): {} windows with passes, at most {} passes in one, {} over the count; {} metric lines checked; {} calls across a bucket edge",
            r.windows, r.max_window_passes, r.windows_over, r.lines, r.edge_calls
        );
        let _ = writeln!(
            out,
            "  reject qps refusals: {}, wrongful {} (at most {} in one window, {} by one thread in one window)",
            r.refusals, r.wrongful, r.max_wrongful_per_window, r.max_wrongful_per_thread_window
        );
        let _ = writeln!(
            out,
            "  concurrency: at most {} held (count {CONCURRENCY_COUNT}); hot parameter value: at most {} held (count {HOT_CONCURRENCY_COUNT})",
            self.max_concurrency, self.max_hot_concurrency
        );
        for m in &self.mismatches {
            let _ = writeln!(out, "  MISMATCH {m}");
        }
        if self.mismatch_count > self.mismatches.len() as u64 {
            let _ = writeln!(
                out,
                "  ... and {} more mismatches",
                self.mismatch_count - self.mismatches.len() as u64
            );
        }
        out
    }
}

/// Compares the library's readings with the model.
struct Checker<'s> {
    seed: u64,
    mode: Mode,
    threads: usize,
    sentinel: &'s Sentinel,
    prometheus: Option<fn(&Sentinel) -> String>,
    writer: MetricWriter,
    searcher: MetricSearcher,
    dir: PathBuf,
    /// The model of the writer's next second.
    next_ms: u64,
    now: u64,
    report: Report,
}

impl<'s> Checker<'s> {
    fn new(config: &Config, sentinel: &'s Sentinel, dir: &Path) -> Self {
        let writer = sentinel.metric_writer(MetricLogConfig::new(APP).dir(dir));
        Checker {
            seed: config.seed,
            mode: config.mode,
            threads: config.threads,
            sentinel,
            prometheus: config.prometheus,
            writer,
            searcher: MetricSearcher::new(dir, APP),
            dir: dir.to_owned(),
            next_ms: second(sentinel.now_ms()),
            now: sentinel.now_ms(),
            report: Report {
                runs: 1,
                ..Report::default()
            },
        }
    }

    fn fail(&mut self, what: &str, detail: std::fmt::Arguments<'_>) {
        self.report.mismatch_count += 1;
        if self.report.mismatches.len() < KEPT_MISMATCHES {
            self.report.mismatches.push(format!(
                "seed {} {} mode, {} threads, t = T0 + {} ms: {what}: {detail}",
                self.seed,
                self.mode.label(),
                self.threads,
                self.now - T0
            ));
        }
    }

    fn count(&mut self, kind: &'static str) {
        self.report.readings += 1;
        self.report.by_kind.entry(kind).or_default().readings += 1;
    }

    /// `got` must lie in `lo..=hi`.
    fn range(&mut self, kind: &'static str, node: &str, reading: &str, lo: f64, hi: f64, got: f64) {
        self.count(kind);
        if !(lo <= got && got <= hi) {
            let expected = if lo == hi {
                format!("{lo}")
            } else {
                format!("{lo}..={hi}")
            };
            self.fail(
                node,
                format_args!("{reading}: expected {expected}, got {got}"),
            );
        }
    }

    fn exact(&mut self, kind: &'static str, node: &str, reading: &str, expected: u64, got: u64) {
        self.range(
            kind,
            node,
            reading,
            expected as f64,
            expected as f64,
            got as f64,
        );
    }

    /// The average RT of a window: exact when its counts are, otherwise
    /// the RT sum it implies must lie in the bounds.
    fn avg_rt(&mut self, kind: &'static str, node: &str, b: &Bounds, success: f64, avg: f64) {
        if b.lo.success == b.hi.success && b.lo.rt_sum == b.hi.rt_sum {
            let expected = match b.lo.success {
                0 => 0.0,
                s => b.lo.rt_sum as f64 / s as f64,
            };
            self.range(kind, node, "avg_rt", expected, expected, avg);
        } else if success == 0.0 {
            self.range(kind, node, "avg_rt (none completed)", 0.0, 0.0, avg);
        } else {
            let rt_sum = (avg * success).round();
            self.range(
                kind,
                node,
                "avg_rt x success_qps (RT sum)",
                b.lo.rt_sum as f64,
                b.hi.rt_sum as f64,
                rt_sum,
            );
        }
    }

    fn snapshot(
        &mut self,
        node: Node,
        m: &NodeModel,
        min_rt: (u64, u64),
        s: &NodeSnapshot,
        what: &str,
    ) {
        let kind = node.kind();
        let label = format!("{} ({what})", node.label());
        let (lo, hi) = (m.second.lo, m.second.hi);
        self.range(
            kind,
            &label,
            "pass_qps",
            lo.pass as f64,
            hi.pass as f64,
            s.pass_qps,
        );
        self.range(
            kind,
            &label,
            "block_qps",
            lo.block as f64,
            hi.block as f64,
            s.block_qps,
        );
        self.range(
            kind,
            &label,
            "success_qps",
            lo.success as f64,
            hi.success as f64,
            s.success_qps,
        );
        self.range(
            kind,
            &label,
            "exception_qps",
            lo.exception as f64,
            hi.exception as f64,
            s.exception_qps,
        );
        self.avg_rt(kind, &label, &m.second, s.success_qps, s.avg_rt);
        self.range(
            kind,
            &label,
            "min_rt",
            min_rt.0 as f64,
            min_rt.1 as f64,
            s.min_rt as f64,
        );
        self.exact(kind, &label, "concurrency", m.concurrency, s.concurrency);
        if matches!(node, Node::Origin(..)) {
            // Origin nodes keep no minute window unless asked for one: their
            // minute totals hold only what the second window does.
            return;
        }
        let (lo, hi) = (m.minute.lo, m.minute.hi);
        self.range(
            kind,
            &label,
            "total_pass",
            lo.pass as f64,
            hi.pass as f64,
            s.total_pass as f64,
        );
        self.range(
            kind,
            &label,
            "total_block",
            lo.block as f64,
            hi.block as f64,
            s.total_block as f64,
        );
        self.range(
            kind,
            &label,
            "total_success",
            lo.success as f64,
            hi.success as f64,
            s.total_success as f64,
        );
        self.range(
            kind,
            &label,
            "total_exception",
            lo.exception as f64,
            hi.exception as f64,
            s.total_exception as f64,
        );
    }

    fn lifetime(&mut self, node: Node, m: &NodeModel, t: &Totals) {
        let kind = node.kind();
        let label = format!("{} (lifetime)", node.label());
        let (lo, hi) = (m.life.lo, m.life.hi);
        self.exact(kind, &label, "pass", lo.pass, t.pass);
        self.exact(kind, &label, "block", lo.block, t.block);
        self.exact(kind, &label, "success", lo.success, t.success);
        self.exact(kind, &label, "exception", lo.exception, t.exception);
        self.range(
            kind,
            &label,
            "rt_sum",
            lo.rt_sum as f64,
            hi.rt_sum as f64,
            t.rt_sum as f64,
        );
        self.exact(kind, &label, "occupied_pass", 0, t.occupied_pass);
    }

    /// A node the library may not have made: it must exist exactly when a
    /// call counted on it. A name a loaded rule mentions gets its node from
    /// the first entry that uses it, past any cap; a load makes none.
    fn exists(&mut self, node: Node, m: &NodeModel, found: bool, named: bool) -> bool {
        self.count(node.kind());
        if found != (m.calls > 0) {
            let label = node.label();
            self.fail(
                &label,
                format_args!(
                    "node exists: {found}, but {} calls counted on it, named by a rule: {named}",
                    m.calls
                ),
            );
        }
        found && m.calls > 0
    }

    /// Every reading at a quiescent instant.
    fn checkpoint(&mut self, calls: &[Call]) {
        let sentinel = self.sentinel;
        let now = sentinel.now_ms();
        self.now = now;
        self.report.checkpoints += 1;
        let second_window = Window::Range(bucket(now) - BUCKET, bucket(now) + BUCKET);
        let minute_window = Window::Range(second(now) - 59_000, second(now) + 1_000);
        let mut models: BTreeMap<Node, NodeModel> = BTreeMap::new();
        for call in calls {
            for node in Node::of(call) {
                models
                    .entry(node)
                    .or_default()
                    .add(call, second_window, minute_window);
            }
        }
        let empty = NodeModel::default();
        let snapshots = sentinel.resources();
        let named = NamedByRules::of(&sentinel.rule_book());
        for (r, spec) in RESOURCES.iter().enumerate() {
            let node = Node::Resource(r);
            let m = models.get(&node).copied().unwrap_or(empty);
            let library = sentinel.resource_node(spec.name);
            if !self.exists(node, &m, library.is_some(), named.resource(spec.name)) {
                continue;
            }
            let library = library.expect("checked");
            let min_rt = m.second.min_rt_reading();
            self.snapshot(node, &m, min_rt, &library.stats().snapshot(now), "node");
            self.lifetime(node, &m, &library.stats().lifetime());
            match snapshots.iter().find(|s| &*s.name == spec.name) {
                Some(snapshot) => self.snapshot(node, &m, min_rt, &snapshot.stats, "resources()"),
                None => self.fail(spec.name, format_args!("missing from resources()")),
            }
            for (o, origin) in ORIGINS.iter().enumerate().skip(1) {
                let node = Node::Origin(r, o);
                let om = models.get(&node).copied().unwrap_or(empty);
                let stats = library.find_origin(origin).map(|o| o.stats());
                let reserved = named.origin(spec.name, origin);
                if self.exists(node, &om, stats.is_some(), reserved) {
                    self.node_stats(node, &om, stats.expect("checked"), now);
                }
            }
            let named = Node::Context(r, 1);
            let cm = models.get(&named).copied().unwrap_or(empty);
            let context = sentinel.context_node(CONTEXT, spec.name);
            if self.exists(named, &cm, context.is_some(), false) {
                let context = context.expect("checked");
                match context.stats() {
                    Some(stats) => self.node_stats(named, &cm, stats, now),
                    None => self.fail(
                        &named.label(),
                        format_args!("a named context keeps no stats"),
                    ),
                }
            }
            // The default context's node is the resource's less the named
            // context's, with the resource's min RT.
            let derived = Node::Context(r, 0);
            let dm = models.get(&derived).copied().unwrap_or(empty);
            let default = sentinel.context_node(DEFAULT_CONTEXT, spec.name);
            if self.exists(derived, &dm, default.is_some(), false) {
                let snapshot = default.expect("checked").snapshot(now);
                // Read as a difference of two nodes' readings: an event
                // of the named context late on one node and not on the
                // other (see `Span::certainly_in`) shows in the difference.
                let dm = NodeModel {
                    second: dm.second.difference(&m.second, &cm.second),
                    minute: dm.minute.difference(&m.minute, &cm.minute),
                    ..dm
                };
                self.snapshot(derived, &dm, min_rt, &snapshot, "derived");
            }
        }
        let inbound = models.get(&Node::Inbound).copied().unwrap_or(empty);
        self.node_stats(Node::Inbound, &inbound, sentinel.inbound_node(), now);
        let blocks = self.block_counts(calls);
        self.prometheus(&models, &blocks);
        self.metric_lines(calls, &models);
    }

    fn node_stats(&mut self, node: Node, m: &NodeModel, stats: &StatisticNode, now: u64) {
        self.snapshot(
            node,
            m,
            m.second.min_rt_reading(),
            &stats.snapshot(now),
            "node",
        );
        self.lifetime(node, m, &stats.lifetime());
    }

    /// `block_counts()` against the refusals logged, by resource and kind.
    fn block_counts(&mut self, calls: &[Call]) -> BTreeMap<(String, String), u64> {
        let mut expected: BTreeMap<(String, String), u64> = BTreeMap::new();
        for call in calls {
            if let Outcome::Blocked(kind) = call.outcome {
                let key = (
                    RESOURCES[call.resource].name.to_owned(),
                    kind.as_str().to_owned(),
                );
                *expected.entry(key).or_default() += call.batch;
            }
        }
        let got: BTreeMap<(String, String), u64> = self
            .sentinel
            .block_counts()
            .into_iter()
            .map(|b| ((b.resource, b.kind.as_str().to_owned()), b.count))
            .collect();
        let keys: HashSet<&(String, String)> = expected.keys().chain(got.keys()).collect();
        for key in keys {
            let (e, g) = (
                expected.get(key).copied().unwrap_or(0),
                got.get(key).copied().unwrap_or(0),
            );
            let label = format!("resource {} block_counts()", key.0);
            self.exact(kind_of(&key.0), &label, &key.1, e, g);
        }
        expected
    }

    /// The Prometheus counters and gauges against the model.
    fn prometheus(
        &mut self,
        models: &BTreeMap<Node, NodeModel>,
        blocks: &BTreeMap<(String, String), u64>,
    ) {
        let Some(render) = self.prometheus else {
            return;
        };
        let samples = parse_prometheus(&render(self.sentinel));
        let mut seen = 0;
        for (r, spec) in RESOURCES.iter().enumerate() {
            // A resource has its node, and its samples, from its first
            // call on, whether or not a rule names it.
            let m = match models.get(&Node::Resource(r)) {
                Some(m) if m.calls > 0 => m,
                _ => continue,
            };
            let kind = spec.guard.label();
            let label = format!("resource {} (prometheus)", spec.name);
            let mut sample = |checker: &mut Self, name: &str, extra: Option<&str>| {
                let key = (
                    name.to_owned(),
                    spec.name.to_owned(),
                    extra.map(str::to_owned),
                );
                let value = samples.get(&key).copied();
                if value.is_none() {
                    checker.fail(&label, format_args!("no sample {name} {extra:?}"));
                }
                seen += usize::from(value.is_some());
                value.unwrap_or(f64::NAN)
            };
            let life = m.life.lo;
            let v = sample(self, "sentinel_pass_total", None);
            self.range(
                kind,
                &label,
                "sentinel_pass_total",
                life.pass as f64,
                life.pass as f64,
                v,
            );
            let v = sample(self, "sentinel_success_total", None);
            let success = life.success as f64;
            self.range(kind, &label, "sentinel_success_total", success, success, v);
            let v = sample(self, "sentinel_exception_total", None);
            let exception = life.exception as f64;
            self.range(
                kind,
                &label,
                "sentinel_exception_total",
                exception,
                exception,
                v,
            );
            let v = sample(self, "sentinel_concurrency", None);
            let concurrency = m.concurrency as f64;
            self.range(
                kind,
                &label,
                "sentinel_concurrency",
                concurrency,
                concurrency,
                v,
            );
            let avg = sample(self, "sentinel_avg_rt_ms", None);
            let success = self
                .sentinel
                .resource_node(spec.name)
                .map_or(0.0, |n| n.stats().success_qps(self.now));
            self.avg_rt(
                kind,
                &format!("{label} sentinel_avg_rt_ms"),
                &m.second,
                success,
                avg,
            );
            for ((resource, block_kind), count) in blocks {
                if resource == spec.name {
                    let v = sample(self, "sentinel_block_total", Some(block_kind));
                    let what = format!("sentinel_block_total{{kind={block_kind}}}");
                    self.range(kind, &label, &what, *count as f64, *count as f64, v);
                }
            }
        }
        // No cap is reached: nothing is refused.
        for cap in ["resources", "contexts", "origins"] {
            let name = format!("sentinel_refused_{cap}_total");
            let v = samples.get(&(name.clone(), String::new(), None)).copied();
            self.range(
                "instance",
                "prometheus",
                &name,
                0.0,
                0.0,
                v.unwrap_or(f64::NAN),
            );
        }
        // Nothing else is counted (breaker states and caps aside).
        let counted = samples
            .keys()
            .filter(|(name, _, _)| {
                name != "sentinel_breaker_state"
                    && !name.starts_with("sentinel_cap")
                    && !name.starts_with("sentinel_refused_")
            })
            .count();
        self.count("instance");
        if counted != seen {
            self.fail(
                "prometheus",
                format_args!("{counted} samples, the model knows {seen}"),
            );
        }
    }

    /// Writes the metric log's pending seconds and compares the new lines.
    fn metric_lines(&mut self, calls: &[Call], models: &BTreeMap<Node, NodeModel>) {
        let now = self.now;
        let current = second(now);
        let from = self.next_ms.div_ceil(1_000) * 1_000;
        let from = from.max(current - 59_000);
        let written = match self.writer.write_pending(self.sentinel) {
            Ok(n) => n,
            Err(e) => {
                self.fail("metric log", format_args!("write_pending: {e}"));
                return;
            }
        };
        self.write_blocks();
        if from >= current {
            self.exact("instance", "metric log", "lines written", 0, written as u64);
            return;
        }
        let lines = match self.searcher.find(from, current - 1, None) {
            Ok(lines) => lines,
            Err(e) => {
                self.fail("metric log", format_args!("searcher: {e}"));
                return;
            }
        };
        self.exact(
            "instance",
            "metric log",
            "lines written",
            lines.len() as u64,
            written as u64,
        );
        let mut by_key: HashMap<(String, u64), MetricLine> = HashMap::new();
        for line in lines {
            self.next_ms = self.next_ms.max(line.timestamp_ms + 1);
            let key = (line.resource.clone(), line.timestamp_ms);
            if RESOURCES.iter().all(|s| s.name != line.resource) || line.timestamp_ms % 1_000 != 0 {
                self.fail("metric log", format_args!("unexpected line {line:?}"));
            }
            if let Some(old) = by_key.insert(key, line) {
                self.fail("metric log", format_args!("second written twice: {old:?}"));
            }
        }
        // The model of each second in from..current, per resource.
        let mut seconds: HashMap<(usize, u64), Bounds> = HashMap::new();
        for call in calls {
            let mut touched: Vec<u64> = Vec::new();
            let mut spans = vec![call.enter];
            if let Outcome::Passed {
                exit: Some(exit), ..
            } = call.outcome
            {
                spans.push(exit);
            }
            for span in spans {
                let (a, b) = (
                    second(span.before).max(from),
                    second(span.after).min(current - 1),
                );
                let mut s = a;
                while s <= b {
                    if !touched.contains(&s) {
                        touched.push(s);
                    }
                    s += 1_000;
                }
            }
            for s in touched {
                seconds
                    .entry((call.resource, s))
                    .or_default()
                    .add(call, Window::Range(s, s + 1_000));
            }
        }
        let empty = Bounds::default();
        for (r, spec) in RESOURCES.iter().enumerate() {
            let kind = spec.guard.label();
            let concurrency = models.get(&Node::Resource(r)).map_or(0, |m| m.concurrency);
            let mut s = from;
            while s < current {
                let b = seconds.get(&(r, s)).copied().unwrap_or(empty);
                let label = format!("resource {} metric line of T0 + {} ms", spec.name, s - T0);
                match by_key.get(&(spec.name.to_owned(), s)) {
                    None => {
                        self.count(kind);
                        if b.lo != Tally::default() {
                            self.fail(
                                &label,
                                format_args!("missing; expected at least {:?}", b.lo),
                            );
                        }
                    }
                    Some(line) => {
                        let (lo, hi) = (b.lo, b.hi);
                        self.range(
                            kind,
                            &label,
                            "pass",
                            lo.pass as f64,
                            hi.pass as f64,
                            line.pass as f64,
                        );
                        self.range(
                            kind,
                            &label,
                            "block",
                            lo.block as f64,
                            hi.block as f64,
                            line.block as f64,
                        );
                        let (success_lo, success_hi) = (lo.success as f64, hi.success as f64);
                        self.range(
                            kind,
                            &label,
                            "success",
                            success_lo,
                            success_hi,
                            line.success as f64,
                        );
                        let (e_lo, e_hi) = (lo.exception as f64, hi.exception as f64);
                        self.range(kind, &label, "exception", e_lo, e_hi, line.exception as f64);
                        // rt_sum / success, or the RT sum when none completed.
                        let avg_lo = match hi.success {
                            0 => lo.rt_sum,
                            n => lo.rt_sum / n,
                        };
                        let avg_hi = match lo.success {
                            0 => hi.rt_sum,
                            n => hi.rt_sum / n,
                        };
                        self.range(
                            kind,
                            &label,
                            "avg_rt",
                            avg_lo as f64,
                            avg_hi as f64,
                            line.avg_rt as f64,
                        );
                        self.exact(kind, &label, "occupied_pass", 0, line.occupied_pass);
                        self.exact(kind, &label, "concurrency", concurrency, line.concurrency);
                        self.exact(
                            kind,
                            &label,
                            "classification",
                            0,
                            line.classification as u64,
                        );
                        if spec.guard == Guard::Reject {
                            self.report.reject.lines += 1;
                            if line.pass > REJECT_COUNT {
                                self.fail(
                                    &label,
                                    format_args!("reject rule of count {REJECT_COUNT} passed {} in the second", line.pass),
                                );
                            }
                        }
                    }
                }
                s += 1_000;
            }
        }
    }

    /// Writes the block log's complete seconds (at any time: the model
    /// reads the block log only at the end).
    fn write_blocks(&mut self) {
        if let Err(e) = self.writer.write_blocks(self.sentinel) {
            self.fail("block log", format_args!("write_blocks: {e}"));
        }
    }

    /// The block log, once the writer has finished: per second, resource
    /// and kind, its counts add up to the refusals logged in that second
    /// (within the bounds of their intervals), and in all to every refusal.
    fn block_log(&mut self, calls: &[Call]) {
        // The log's second is a UTC date; the metric line's formatting
        // gives the same text for a timestamp.
        let date = |ms: u64| {
            let line = MetricLine {
                timestamp_ms: ms,
                resource: String::new(),
                pass: 0,
                block: 0,
                success: 0,
                exception: 0,
                avg_rt: 0,
                occupied_pass: 0,
                concurrency: 0,
                classification: 0,
            };
            line.to_string().split('|').nth(1).unwrap_or("").to_owned()
        };
        type Key = (String, String, String);
        let mut model: HashMap<Key, (u64, u64)> = HashMap::new();
        let mut totals: HashMap<(String, String), u64> = HashMap::new();
        for call in calls {
            let Outcome::Blocked(kind) = call.outcome else {
                continue;
            };
            let (resource, kind) = (RESOURCES[call.resource].name, exception_name(kind));
            *totals
                .entry((resource.to_owned(), kind.to_owned()))
                .or_default() += call.batch;
            let span = call.enter;
            let mut s = second(span.before);
            while s <= span.after {
                let key = (date(s), resource.to_owned(), kind.to_owned());
                let bounds = model.entry(key).or_default();
                bounds.0 += call.batch * u64::from(span.certainly_in(s, s + 1_000));
                bounds.1 += call.batch;
                s += 1_000;
            }
        }
        let mut got: HashMap<Key, u64> = HashMap::new();
        let mut got_totals: HashMap<(String, String), u64> = HashMap::new();
        let files = std::fs::read_dir(&self.dir).map(|dir| {
            dir.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(&format!("{APP}-block.log")))
                })
                .collect::<Vec<_>>()
        });
        let files = match files {
            Ok(files) => files,
            Err(e) => {
                self.fail("block log", format_args!("cannot list: {e}"));
                return;
            }
        };
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            for line in text.lines() {
                // time|index|resource,exception,limit_app,origin|count,0|rule
                let fields: Vec<&str> = line.splitn(5, '|').collect();
                let parsed = (fields.len() == 5)
                    .then(|| {
                        let mut who = fields[2].split(',');
                        let (resource, kind) = (who.next()?, who.next()?);
                        let count = fields[3].split(',').next()?.parse::<u64>().ok()?;
                        Some((resource.to_owned(), kind.to_owned(), count))
                    })
                    .flatten();
                let Some((resource, kind, count)) = parsed else {
                    self.fail("block log", format_args!("unreadable line {line:?}"));
                    continue;
                };
                *got.entry((fields[0].to_owned(), resource.clone(), kind.clone()))
                    .or_default() += count;
                *got_totals.entry((resource, kind)).or_default() += count;
            }
        }
        let keys: HashSet<&Key> = model.keys().chain(got.keys()).collect();
        for key in keys {
            let (lo, hi) = model.get(key).copied().unwrap_or((0, 0));
            let g = got.get(key).copied().unwrap_or(0);
            let label = format!("resource {} block log at {}", key.1, key.0);
            self.range(
                kind_of(&key.1),
                &label,
                &key.2,
                lo as f64,
                hi as f64,
                g as f64,
            );
        }
        let keys: HashSet<&(String, String)> = totals.keys().chain(got_totals.keys()).collect();
        for key in keys {
            let e = totals.get(key).copied().unwrap_or(0);
            let g = got_totals.get(key).copied().unwrap_or(0);
            let label = format!("resource {} block log, all seconds", key.0);
            self.exact(kind_of(&key.0), &label, &key.1, e, g);
        }
    }

    /// The rules' own promises, over every call of the run.
    fn properties(&mut self, calls: &[Call]) {
        self.reject_windows(calls);
        for call in calls {
            let spec = &RESOURCES[call.resource];
            let kind = spec.guard.label();
            if let Outcome::Blocked(block) = call.outcome {
                self.count(kind);
                let allowed = Some(block) == spec.guard.block_kind()
                    || (block == BlockKind::System && call.inbound);
                if !allowed {
                    self.fail(
                        spec.name,
                        format_args!("refused by {block} (inbound: {}): {call:?}", call.inbound),
                    );
                }
            }
            if call.arg.is_none() && call.outcome == Outcome::Blocked(BlockKind::ParamFlow) {
                self.fail(
                    spec.name,
                    format_args!("a call without the argument was refused: {call:?}"),
                );
            }
            let origin = ORIGINS[call.origin];
            let refuse = match spec.guard {
                Guard::BlackList => BLACK_LIST.contains(&origin),
                Guard::WhiteList => !origin.is_empty() && !WHITE_LIST.contains(&origin),
                _ => continue,
            };
            self.count(kind);
            let refused = call.outcome == Outcome::Blocked(BlockKind::Authority);
            if refuse != refused {
                self.fail(
                    spec.name,
                    format_args!(
                        "origin {origin:?}: refused by authority {refused}, the list says {refuse}"
                    ),
                );
            }
        }
    }

    /// The reject QPS rule: no bucket-aligned window of two buckets holds
    /// more passes than the count (counting the passes whose whole call lies
    /// in the window), and a refusal is wrongful when even every pass
    /// possibly in its window, and its own permits, stay within the count.
    fn reject_windows(&mut self, calls: &[Call]) {
        let Some(r) = RESOURCES.iter().position(|s| s.guard == Guard::Reject) else {
            return;
        };
        let kind = Guard::Reject.label();
        // Windows by the number of their first bucket.
        let mut certain: BTreeMap<u64, u64> = BTreeMap::new();
        let mut possible: HashMap<u64, u64> = HashMap::new();
        self.report.reject.edge_calls = calls
            .iter()
            .filter(|c| c.resource == r && c.enter.before / BUCKET != c.enter.after / BUCKET)
            .count() as u64;
        for call in calls.iter().filter(|c| c.resource == r && c.passed()) {
            let (a, b) = (call.enter.before / BUCKET, call.enter.after / BUCKET);
            if b <= a + 1 {
                for w in b.saturating_sub(1)..=a {
                    *certain.entry(w).or_default() += call.batch;
                }
            }
            for w in a.saturating_sub(1)..=b {
                *possible.entry(w).or_default() += call.batch;
            }
        }
        self.report.reject.windows = certain.len() as u64;
        for (&w, &passes) in &certain {
            self.count(kind);
            let stats = &mut self.report.reject;
            stats.max_window_passes = stats.max_window_passes.max(passes);
            if passes > REJECT_COUNT {
                stats.windows_over += 1;
                let start = w * BUCKET - T0;
                self.fail(
                    "resource reject",
                    format_args!(
                        "window T0 + {start}..{} ms holds {passes} passes, over the count {REJECT_COUNT}",
                        start + 2 * BUCKET
                    ),
                );
            }
        }
        let mut per_window: HashMap<u64, u64> = HashMap::new();
        let mut per_thread_window: HashMap<(usize, u64), u64> = HashMap::new();
        for call in calls.iter().filter(|c| c.resource == r) {
            if call.outcome != Outcome::Blocked(BlockKind::Flow) {
                continue;
            }
            self.report.reject.refusals += 1;
            let (a, b) = (call.enter.before / BUCKET, call.enter.after / BUCKET);
            // The window holding a time in bucket k starts at bucket k - 1.
            let wrongful = (a..=b).all(|k| {
                possible.get(&k.saturating_sub(1)).copied().unwrap_or(0) + call.batch
                    <= REJECT_COUNT
            });
            if wrongful {
                self.report.reject.wrongful += 1;
                let w = a.saturating_sub(1);
                *per_window.entry(w).or_default() += 1;
                *per_thread_window.entry((call.thread, w)).or_default() += 1;
            }
        }
        let stats = &mut self.report.reject;
        stats.max_wrongful_per_window = per_window.values().copied().max().unwrap_or(0);
        stats.max_wrongful_per_thread_window =
            per_thread_window.values().copied().max().unwrap_or(0);
    }
}

/// A block kind as the block log names it (Sentinel's exception names).
fn exception_name(kind: BlockKind) -> &'static str {
    match kind {
        BlockKind::Flow => "FlowException",
        BlockKind::Degrade => "DegradeException",
        BlockKind::System => "SystemBlockException",
        BlockKind::Authority => "AuthorityException",
        BlockKind::ParamFlow => "ParamFlowException",
        _ => "unknown",
    }
}

/// The rule kind a resource name is reported under.
fn kind_of(resource: &str) -> &'static str {
    RESOURCES
        .iter()
        .find(|s| s.name == resource)
        .map_or("instance", |s| s.guard.label())
}

/// The names the rules in force mention: their nodes exist from the load.
struct NamedByRules {
    resources: Vec<String>,
    origins: Vec<(String, String)>,
}

impl NamedByRules {
    fn of(book: &sentinel_flow_core::RuleBook) -> Self {
        let mut resources: Vec<String> = Vec::new();
        let mut origins = Vec::new();
        for rule in &book.flow {
            resources.push(rule.resource.clone());
            if rule.strategy == sentinel_flow_core::flow::FlowStrategy::Relate {
                resources.extend(rule.ref_resource.clone());
            }
            if rule.limit_app != "default" && rule.limit_app != "other" {
                origins.push((rule.resource.clone(), rule.limit_app.clone()));
            }
        }
        resources.extend(book.degrade.iter().map(|r| r.resource.clone()));
        resources.extend(book.param_flow.iter().map(|r| r.resource.clone()));
        for rule in &book.authority {
            resources.push(rule.resource.clone());
            for origin in &rule.limit_app {
                origins.push((rule.resource.clone(), origin.clone()));
            }
        }
        NamedByRules { resources, origins }
    }

    fn resource(&self, name: &str) -> bool {
        self.resources.iter().any(|r| r == name)
    }

    fn origin(&self, resource: &str, origin: &str) -> bool {
        self.origins
            .iter()
            .any(|(r, o)| r == resource && o == origin)
    }
}

/// Samples of a Prometheus text by (name, resource, kind label).
type Samples = HashMap<(String, String, Option<String>), f64>;

/// Parses the samples of the text format (label values here need no
/// unescaping: the scenario's names are plain).
fn parse_prometheus(text: &str) -> Samples {
    let mut samples = Samples::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let value: f64 = value.parse().unwrap_or(f64::NAN);
        let (name, labels) = match series.split_once('{') {
            Some((name, labels)) => (name, labels.trim_end_matches('}')),
            None => (series, ""),
        };
        let mut resource = String::new();
        let mut kind = None;
        for pair in labels.split(',').filter(|p| !p.is_empty()) {
            let Some((key, value)) = pair.split_once('=') else {
                continue;
            };
            let value = value.trim_matches('"').to_owned();
            match key {
                "resource" => resource = value,
                "kind" => kind = Some(value),
                _ => {}
            }
        }
        samples.insert((name.to_owned(), resource, kind), value);
    }
    samples
}
