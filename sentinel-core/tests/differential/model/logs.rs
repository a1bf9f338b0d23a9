//! The checker, continued: the metric log's lines, the block log, and the
//! rules' own promises (reject windows, concurrency, authority lists).

use super::*;

impl Checker<'_> {
    /// Writes the metric log's pending seconds and compares the new lines.
    pub(super) fn metric_lines(&mut self, calls: &[Call], models: &BTreeMap<Node, NodeModel>) {
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
    pub(super) fn write_blocks(&mut self) {
        if let Err(e) = self.writer.write_blocks(self.sentinel) {
            self.fail("block log", format_args!("write_blocks: {e}"));
        }
    }

    /// The block log, once the writer has finished: per second, resource
    /// and kind, its counts add up to the refusals logged in that second
    /// (within the bounds of their intervals), and in all to every refusal.
    pub(super) fn block_log(&mut self, calls: &[Call]) {
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
    pub(super) fn properties(&mut self, calls: &[Call]) {
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
    pub(super) fn reject_windows(&mut self, calls: &[Call]) {
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
pub(super) fn exception_name(kind: BlockKind) -> &'static str {
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
pub(super) fn kind_of(resource: &str) -> &'static str {
    RESOURCES
        .iter()
        .find(|s| s.name == resource)
        .map_or("instance", |s| s.guard.label())
}

/// The names the rules in force mention: their nodes exist from the load.
pub(super) struct NamedByRules {
    pub(super) resources: Vec<String>,
    pub(super) origins: Vec<(String, String)>,
}

impl NamedByRules {
    pub(super) fn of(book: &sentinel_flow_core::RuleBook) -> Self {
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

    pub(super) fn resource(&self, name: &str) -> bool {
        self.resources.iter().any(|r| r == name)
    }

    pub(super) fn origin(&self, resource: &str, origin: &str) -> bool {
        self.origins
            .iter()
            .any(|(r, o)| r == resource && o == origin)
    }
}

/// Samples of a Prometheus text by (name, resource, kind label).
pub(super) type Samples = HashMap<(String, String, Option<String>), f64>;

/// Parses the samples of the text format (label values here need no
/// unescaping: the scenario's names are plain).
pub(super) fn parse_prometheus(text: &str) -> Samples {
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
