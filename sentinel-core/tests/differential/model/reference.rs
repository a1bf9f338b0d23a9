//! The reference model: what each node's counts and windows must be,
//! computed from the logs alone, and the report of a run.

use super::*;

// ---- the model ----

/// Counts of one node over one window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Tally {
    pub(super) pass: u64,
    pub(super) block: u64,
    pub(super) success: u64,
    pub(super) exception: u64,
    pub(super) rt_sum: u64,
}

/// What a window must hold: at least `lo` (the events certainly in it), at
/// most `hi` (those possibly in it), and the smallest RT's bounds.
#[derive(Clone, Copy, Debug)]
pub(super) struct Bounds {
    pub(super) lo: Tally,
    pub(super) hi: Tally,
    /// The smallest RT low bound among exits possibly in the window.
    pub(super) min_rt_lo: u64,
    /// The smallest RT high bound among exits certainly in it.
    pub(super) min_rt_hi: u64,
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
pub(super) enum Window {
    Range(u64, u64),
    All,
}

impl Window {
    pub(super) fn certain(self, span: Span) -> bool {
        match self {
            Window::Range(from, to) => span.certainly_in(from, to),
            Window::All => true,
        }
    }

    pub(super) fn maybe(self, span: Span) -> bool {
        match self {
            Window::Range(from, to) => span.maybe_in(from, to),
            Window::All => true,
        }
    }
}

impl Bounds {
    pub(super) fn add(&mut self, call: &Call, window: Window) {
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
    pub(super) fn difference(&self, whole: &Bounds, part: &Bounds) -> Bounds {
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
    pub(super) fn min_rt_reading(&self) -> (u64, u64) {
        let reading = |m: u64| m.clamp(1, MAX_RT);
        (reading(self.min_rt_lo), reading(self.min_rt_hi))
    }
}

/// Everything the model says of one node at a checkpoint.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct NodeModel {
    pub(super) calls: u64,
    pub(super) second: Bounds,
    pub(super) minute: Bounds,
    pub(super) life: Bounds,
    pub(super) concurrency: u64,
}

impl NodeModel {
    pub(super) fn add(&mut self, call: &Call, second: Window, minute: Window) {
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
pub(super) enum Node {
    Resource(usize),
    Origin(usize, usize),
    Context(usize, usize),
    Inbound,
}

impl Node {
    /// The nodes one call counts on.
    pub(super) fn of(call: &Call) -> impl Iterator<Item = Node> {
        [
            Some(Node::Resource(call.resource)),
            (call.origin != 0).then_some(Node::Origin(call.resource, call.origin)),
            Some(Node::Context(call.resource, call.context)),
            call.inbound.then_some(Node::Inbound),
        ]
        .into_iter()
        .flatten()
    }

    pub(super) fn label(self) -> String {
        match self {
            Node::Resource(r) => format!("resource {}", RESOURCES[r].name),
            Node::Origin(r, o) => format!("resource {} origin {}", RESOURCES[r].name, ORIGINS[o]),
            Node::Context(r, 0) => format!("resource {} default context", RESOURCES[r].name),
            Node::Context(r, _) => format!("resource {} context {CONTEXT}", RESOURCES[r].name),
            Node::Inbound => "inbound total".to_owned(),
        }
    }

    pub(super) fn kind(self) -> &'static str {
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
pub(super) const KEPT_MISMATCHES: usize = 40;

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
