//! Running a seed: the worker threads, the clock's driver, the logs, and
//! the checkpoints where the model is compared.

use super::*;

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
pub(super) const RUN: u8 = 0;
pub(super) const DRAIN: u8 = 1;
pub(super) const QUIT: u8 = 2;

/// What the driver and the workers share.
pub(super) struct Shared<'s> {
    pub(super) sentinel: &'s Sentinel,
    pub(super) mode: Mode,
    pub(super) ops: usize,
    pub(super) barrier: Barrier,
    pub(super) command: AtomicU8,
    pub(super) stop: AtomicBool,
    pub(super) phase: AtomicU64,
    /// Racing mode: this round's operations per millisecond and worker.
    pub(super) ops_per_ms: AtomicU32,
    pub(super) logs: Vec<Mutex<Vec<Call>>>,
    /// Entries of `concurrency` held now (after their entry, before their
    /// exit), and the most ever.
    pub(super) held: AtomicU64,
    pub(super) held_max: AtomicU64,
    /// The same per hot parameter value of `hot_concurrency`.
    pub(super) hot_held: [AtomicU64; ARGS.len()],
    pub(super) hot_max: AtomicU64,
}

/// An entry a worker holds.
pub(super) struct Held<'s> {
    pub(super) entry: Entry<'s>,
    pub(super) index: usize,
    pub(super) due: u64,
    pub(super) resource: usize,
    pub(super) arg: Option<usize>,
}

impl<'s> Shared<'s> {
    pub(super) fn log(&self, thread: usize, call: Call) -> usize {
        let mut log = self.logs[thread].lock().expect("log");
        log.push(call);
        log.len() - 1
    }

    pub(super) fn worker(&self, me: usize, seed: u64) {
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
    pub(super) fn step(&self, me: usize, rng: &mut Rng, held: &mut Vec<Held<'s>>, now: u64) {
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

    pub(super) fn pick_resource(rng: &mut Rng) -> usize {
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

    pub(super) fn enter(&self, me: usize, rng: &mut Rng, held: &mut Vec<Held<'s>>, now: u64) {
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

    pub(super) fn exit(&self, me: usize, h: Held<'s>) {
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

    pub(super) fn calls(&self) -> Vec<Call> {
        self.logs
            .iter()
            .flat_map(|log| log.lock().expect("log").clone())
            .collect()
    }
}

/// A clock step between phases, or between checkpoints.
pub(super) fn phase_step(rng: &mut Rng, now: u64) -> u64 {
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
pub(super) fn racing_step(rng: &mut Rng, now: u64) -> u64 {
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
