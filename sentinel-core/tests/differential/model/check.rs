//! The checker: compares each reading of the library (node snapshots,
//! lifetime totals, block counts, the Prometheus counters) with the model.

use super::*;

/// Compares the library's readings with the model.
pub(super) struct Checker<'s> {
    pub(super) seed: u64,
    pub(super) mode: Mode,
    pub(super) threads: usize,
    pub(super) sentinel: &'s Sentinel,
    pub(super) prometheus: Option<fn(&Sentinel) -> String>,
    pub(super) writer: MetricWriter,
    pub(super) searcher: MetricSearcher,
    pub(super) dir: PathBuf,
    /// The model of the writer's next second.
    pub(super) next_ms: u64,
    pub(super) now: u64,
    pub(super) report: Report,
}

impl<'s> Checker<'s> {
    pub(super) fn new(config: &Config, sentinel: &'s Sentinel, dir: &Path) -> Self {
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

    pub(super) fn fail(&mut self, what: &str, detail: std::fmt::Arguments<'_>) {
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

    pub(super) fn count(&mut self, kind: &'static str) {
        self.report.readings += 1;
        self.report.by_kind.entry(kind).or_default().readings += 1;
    }

    /// `got` must lie in `lo..=hi`.
    pub(super) fn range(
        &mut self,
        kind: &'static str,
        node: &str,
        reading: &str,
        lo: f64,
        hi: f64,
        got: f64,
    ) {
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

    pub(super) fn exact(
        &mut self,
        kind: &'static str,
        node: &str,
        reading: &str,
        expected: u64,
        got: u64,
    ) {
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
    pub(super) fn avg_rt(
        &mut self,
        kind: &'static str,
        node: &str,
        b: &Bounds,
        success: f64,
        avg: f64,
    ) {
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

    pub(super) fn snapshot(
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

    pub(super) fn lifetime(&mut self, node: Node, m: &NodeModel, t: &Totals) {
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
    pub(super) fn exists(&mut self, node: Node, m: &NodeModel, found: bool, named: bool) -> bool {
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
    pub(super) fn checkpoint(&mut self, calls: &[Call]) {
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

    pub(super) fn node_stats(
        &mut self,
        node: Node,
        m: &NodeModel,
        stats: &StatisticNode,
        now: u64,
    ) {
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
    pub(super) fn block_counts(&mut self, calls: &[Call]) -> BTreeMap<(String, String), u64> {
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
    pub(super) fn prometheus(
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
}
