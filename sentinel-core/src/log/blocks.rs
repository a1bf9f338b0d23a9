//! Blocks aggregated per second: the block log, its `tracing` events, and
//! the per-kind block counts.
//!
//! Each thread counts its blocks by key (resource, kind, rule, origin) and
//! by second, with no atomic read-modify-write
//! ([`tally`](crate::stat::tally)). An instance's [`BlockLedger`] takes
//! those counts when asked: for [`Sentinel::block_counts`] (running totals
//! per resource and kind, which the Prometheus exporter renders) and for
//! the block log, which a [`MetricWriter`](super::MetricWriter) writes.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::io;
use std::sync::Arc;

use parking_lot::Mutex;

use super::date::date_time;
use super::files::RollingFiles;
use crate::stat::tally::{self, BlockKey, BlockRule, BlockSource};
use crate::{BlockKind, Rule};

/// How long after a second ends its blocks are written: an entry that read
/// the clock just before the second ended is counted a moment later. A
/// count later still is written as one more line for its second, never
/// lost.
const GRACE_MS: u64 = 1_000;
/// Seconds of blocks kept for a block log that stopped writing.
const KEEP_SECONDS: u64 = 120;
/// Bytes of a rule's text, and of its `limit_app`, in a block log line;
/// past them the text is cut (at a character boundary) and ends in `…`.
const MAX_RULE_TEXT: usize = 1_024;

/// Blocks of one resource and kind since the instance was made.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlockCount {
    /// The resource refused.
    pub resource: String,
    /// The kind of check that refused it.
    pub kind: BlockKind,
    /// How many entries (counting a batch as its size).
    pub count: u64,
}

/// An instance's running block totals and the seconds not logged yet.
#[derive(Default)]
pub(crate) struct BlockLedger {
    state: Mutex<Ledger>,
}

#[derive(Default)]
struct Ledger {
    /// Blocks so far by resource id and kind.
    totals: HashMap<(u32, BlockKind), (Arc<str>, u64)>,
    /// Blocks by second and key, not logged yet; kept while `logging`.
    pending: BTreeMap<u64, HashMap<BlockKey, Pending>>,
    logging: bool,
    /// When a writer last took lines (instance clock): a writer silent for
    /// [`KEEP_SECONDS`] is taken for gone, and seconds are no longer kept.
    last_take_ms: u64,
}

/// The blocks of one second under one key, not logged yet.
struct Pending {
    source: Arc<BlockSource>,
    /// The rule as the line shows it, written when the first of these
    /// blocks was taken (the rule may be replaced before the line is);
    /// `None`: no rule.
    rule: Option<Arc<RuleText>>,
    count: u64,
}

/// A rule as a block log line shows it, each part at most
/// [`MAX_RULE_TEXT`] bytes (and a final `…`).
#[derive(Debug)]
struct RuleText {
    limit_app: Box<str>,
    text: Box<str>,
}

impl RuleText {
    fn of(rule: &dyn Rule) -> RuleText {
        RuleText {
            limit_app: cut(|w| fmt::Write::write_str(w, &rule.limit_app())),
            text: cut(|w| fmt::write(w, format_args!("{rule}"))),
        }
    }
}

/// What `write` writes, cut at [`MAX_RULE_TEXT`] bytes.
fn cut(write: impl FnOnce(&mut Cut) -> fmt::Result) -> Box<str> {
    let mut text = Cut(String::new(), false);
    // An error is the cut (or the rule's own Display failing): what was
    // written stands.
    let _ = write(&mut text);
    if text.1 {
        text.0.push('…');
    }
    text.0.into_boxed_str()
}

/// A `String` that takes at most [`MAX_RULE_TEXT`] bytes, then refuses
/// (the flag says it did), so that a large rule is never formatted whole.
struct Cut(String, bool);

impl fmt::Write for Cut {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = MAX_RULE_TEXT - self.0.len();
        if s.len() <= room {
            self.0.push_str(s);
            return Ok(());
        }
        let end = (0..=room)
            .rev()
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(0);
        self.0.push_str(&s[..end]);
        self.1 = true;
        Err(fmt::Error)
    }
}

impl BlockLedger {
    /// Takes every thread's new counts of instance `uid` at `now_ms`: a
    /// rule load calls it before the rules it replaces are freed, so that
    /// their lines still show them.
    pub(crate) fn gather(&self, uid: u64, now_ms: u64) {
        drop(self.harvest(uid, now_ms));
    }

    /// Blocks of instance `uid` per resource and kind, up to `now_ms`,
    /// sorted by resource then kind.
    pub(crate) fn counts(&self, uid: u64, now_ms: u64) -> Vec<BlockCount> {
        let ledger = self.harvest(uid, now_ms);
        let mut counts: Vec<BlockCount> = ledger
            .totals
            .iter()
            .map(|(&(_, kind), (resource, count))| BlockCount {
                resource: resource.to_string(),
                kind,
                count: *count,
            })
            .collect();
        counts.sort_by(|a, b| (&a.resource, a.kind.as_str()).cmp(&(&b.resource, b.kind.as_str())));
        counts
    }

    /// Takes every thread's new counts of instance `uid` at `now_ms`.
    fn harvest(&self, uid: u64, now_ms: u64) -> parking_lot::MutexGuard<'_, Ledger> {
        let mut guard = self.state.lock();
        let ledger = &mut *guard;
        if ledger.logging && now_ms > ledger.last_take_ms + KEEP_SECONDS * 1_000 {
            ledger.logging = false;
            ledger.pending.clear();
            tracing::warn!(
                "sentinel: no block log writer took lines for {KEEP_SECONDS} s; \
                 blocks are no longer kept for it"
            );
        }
        // The rules of new lines, held until their text is written (after
        // the harvest, so that no thread waits on a shard's lock for it).
        let mut untold: Vec<(u64, BlockKey, Arc<dyn Rule>)> = Vec::new();
        tally::harvest(uid, |source, second, count| {
            let total = ledger
                .totals
                .entry((source.resource_id(), source.kind))
                .or_insert_with(|| (Arc::clone(&source.resource), 0));
            total.1 += count;
            if ledger.logging {
                ledger
                    .pending
                    .entry(second)
                    .or_default()
                    .entry(source.key)
                    .or_insert_with(|| {
                        if let Some(rule) = source.rule.as_ref().and_then(BlockRule::get) {
                            untold.push((second, source.key, rule));
                        }
                        Pending {
                            source: Arc::clone(source),
                            rule: None,
                            count: 0,
                        }
                    })
                    .count += count;
            }
        });
        // Each rule's text once (by its address: `untold` holds it).
        let mut texts: HashMap<usize, Arc<RuleText>> = HashMap::new();
        for (second, key, rule) in untold {
            let address = Arc::as_ptr(&rule).cast::<()>() as usize;
            let text = texts
                .entry(address)
                .or_insert_with(|| Arc::new(RuleText::of(&*rule)));
            let pending = ledger.pending.get_mut(&second);
            if let Some(pending) = pending.and_then(|keys| keys.get_mut(&key)) {
                pending.rule = Some(Arc::clone(text));
            }
        }
        guard
    }

    /// Starts keeping seconds for the block log: the blocks counted so far
    /// go to the totals only.
    fn start_logging(&self, uid: u64, now_ms: u64) {
        let mut ledger = self.harvest(uid, now_ms);
        ledger.logging = true;
        ledger.last_take_ms = now_ms;
    }

    /// The lines of every second complete at `now_ms` (every second, if
    /// `all`), oldest first, taken out of the ledger.
    fn take_complete(&self, uid: u64, now_ms: u64, all: bool) -> Vec<(u64, Vec<BlockLine>)> {
        let mut ledger = self.harvest(uid, now_ms);
        ledger.last_take_ms = now_ms;
        let now_second = now_ms / 1_000;
        let too_old = now_second.saturating_sub(KEEP_SECONDS);
        let stale: Vec<u64> = ledger.pending.range(..too_old).map(|(&s, _)| s).collect();
        if !stale.is_empty() {
            tracing::warn!(
                seconds = stale.len(),
                "sentinel: block log lines older than {KEEP_SECONDS} s dropped (no writer took them)"
            );
        }
        let complete: Vec<u64> = ledger
            .pending
            .keys()
            .copied()
            .filter(|&second| all || (second + 1) * 1_000 + GRACE_MS <= now_ms)
            .collect();
        let mut seconds = Vec::new();
        for second in stale.into_iter().chain(complete) {
            let Some(keys) = ledger.pending.remove(&second) else {
                continue;
            };
            if second < too_old {
                continue;
            }
            let mut lines: Vec<BlockLine> = keys
                .into_values()
                .map(|pending| BlockLine::new(second, &pending))
                .collect();
            lines.sort_by(|a, b| {
                (&a.resource, a.kind.as_str(), &a.origin, &a.rule).cmp(&(
                    &b.resource,
                    b.kind.as_str(),
                    &b.origin,
                    &b.rule,
                ))
            });
            for (i, line) in lines.iter_mut().enumerate() {
                line.index = i as u32 + 1;
            }
            seconds.push((second, lines));
        }
        seconds
    }
}

/// One line of the block log: the blocks of one second by one resource,
/// kind, rule and origin.
///
/// Written as in Alibaba Sentinel's `sentinel-block.log`, with the rule
/// added as a last field:
///
/// ```text
/// 2024-01-31 10:00:01|1|GET:/orders,FlowException,default,|61,0|flow rule: qps <= 100
/// ```
///
/// Time (UTC) and the line's number within its second, then the resource,
/// the kind as Sentinel's exception name (`FlowException`,
/// `DegradeException`, `SystemBlockException`, `AuthorityException`,
/// `ParamFlowException`, or a user slot's kind), the rule's `limit_app`,
/// the caller's origin (empty when none), the count, an unused `0`, and the
/// rule (empty when none). A user slot's blocks are counted per kind, not
/// per rule (a slot may make a new rule for each block); the line shows a
/// rule it gave.
///
/// The rule and its `limit_app` are each cut at 1 024 bytes (ending in
/// `…`), so that a list of thousands of origins does not fill the log. A
/// line holds the rule as it was when its blocks were gathered: a rule
/// load gathers every block counted so far, so a rule replaced after
/// blocking shows; a block counted after the load by a rule it replaced,
/// on a thread that still ran with it, shows as `default` and no rule if
/// that rule was freed before its line was gathered.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlockLine {
    /// The start of the second, Unix milliseconds.
    pub timestamp_ms: u64,
    /// The line's number within its second, from 1.
    pub index: u32,
    /// The resource refused.
    pub resource: String,
    /// The kind of check.
    pub kind: BlockKind,
    /// The rule's `limit_app` (`default` for kinds without one).
    pub limit_app: String,
    /// The caller's origin, empty when none.
    pub origin: String,
    /// Entries refused in the second.
    pub count: u64,
    /// The rule, as it displays; empty when none.
    pub rule: String,
}

impl BlockLine {
    fn new(second: u64, pending: &Pending) -> BlockLine {
        let source = &pending.source;
        BlockLine {
            timestamp_ms: second * 1_000,
            index: 0,
            resource: source.resource.to_string(),
            kind: source.kind,
            limit_app: pending
                .rule
                .as_ref()
                .map_or("default", |rule| &rule.limit_app)
                .to_owned(),
            origin: source.origin.as_deref().unwrap_or("").to_owned(),
            count: pending.count,
            rule: pending
                .rule
                .as_ref()
                .map_or("", |rule| &rule.text)
                .to_owned(),
        }
    }

    /// The kind as Sentinel's exception name.
    pub fn exception_name(&self) -> &'static str {
        self.kind.exception_name()
    }

    /// Sends the line as a `tracing` event at `level`.
    fn event(&self, level: tracing::Level) {
        macro_rules! at {
            ($level:expr) => {
                tracing::event!(
                    $level,
                    resource = %self.resource,
                    kind = %self.kind,
                    rule = %self.rule,
                    limit_app = %self.limit_app,
                    origin = %self.origin,
                    count = self.count,
                    second = %date_time(self.timestamp_ms),
                    "sentinel: blocked"
                )
            };
        }
        match level {
            tracing::Level::ERROR => at!(tracing::Level::ERROR),
            tracing::Level::WARN => at!(tracing::Level::WARN),
            tracing::Level::INFO => at!(tracing::Level::INFO),
            tracing::Level::DEBUG => at!(tracing::Level::DEBUG),
            tracing::Level::TRACE => at!(tracing::Level::TRACE),
        }
    }
}

impl fmt::Display for BlockLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}|{}|{},{},{},{}|{},0|{}",
            date_time(self.timestamp_ms),
            self.index,
            self.resource,
            self.exception_name(),
            self.limit_app,
            self.origin,
            self.count,
            self.rule,
        )
    }
}

/// The block log of a [`MetricWriter`](super::MetricWriter): a file, events,
/// or both.
pub(crate) struct BlockLog {
    files: Option<RollingFiles>,
    events: Option<tracing::Level>,
    /// Lines taken from the ledger whose write failed, to write first.
    unwritten: Vec<(u64, String)>,
}

impl BlockLog {
    pub(crate) fn new(
        ledger: &BlockLedger,
        uid: u64,
        now: u64,
        files: Option<RollingFiles>,
        events: Option<tracing::Level>,
    ) -> BlockLog {
        if files.is_some() || events.is_some() {
            ledger.start_logging(uid, now);
        }
        BlockLog {
            files,
            events,
            unwritten: Vec::new(),
        }
    }

    /// Logs every second complete now (every second, if `all`: the
    /// writer is stopping); returns how many lines were taken.
    pub(crate) fn write(
        &mut self,
        ledger: &BlockLedger,
        uid: u64,
        now: u64,
        all: bool,
    ) -> io::Result<usize> {
        if self.files.is_none() && self.events.is_none() {
            return Ok(0);
        }
        let seconds = ledger.take_complete(uid, now, all);
        let mut taken = 0;
        for (second, lines) in seconds {
            taken += lines.len();
            if let Some(level) = self.events {
                lines.iter().for_each(|line| line.event(level));
            }
            if self.files.is_some() {
                let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
                self.unwritten.push((second, text));
            }
        }
        if self.unwritten.len() > KEEP_SECONDS as usize {
            let dropped = self.unwritten.len() - KEEP_SECONDS as usize;
            self.unwritten.drain(..dropped);
            tracing::warn!(
                seconds = dropped,
                "sentinel: block log seconds dropped after failing to write them for {KEEP_SECONDS} s"
            );
        }
        if let Some(files) = &mut self.files {
            while let Some((second, text)) = self.unwritten.first() {
                files.append(second * 1_000, text.as_bytes())?;
                self.unwritten.remove(0);
            }
        }
        Ok(taken)
    }
}

impl fmt::Debug for BlockLog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BlockLog")
            .field("file", &self.files.is_some())
            .field("events", &self.events)
            .field("unwritten", &self.unwritten.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authority::{AuthorityRule, AuthorityStrategy};
    use crate::flow::FlowRule;
    use crate::log::MetricLogConfig;
    use crate::{ManualClock, Sentinel};

    /// Each load of a black list that blocked an entry kept the rule (and
    /// its list of origins) alive in the thread's block tally, and in its
    /// recycled error references; reading the counts released none.
    #[test]
    fn rules_replaced_after_blocking_are_freed() {
        let clock = ManualClock::new(1_700_000_000_000);
        let sentinel = Sentinel::builder().clock(clock.clone()).build();
        // A writer keeps lines per key and second, with their rule.
        let _writer = sentinel.metric_writer(MetricLogConfig::new("t").dir("/nonexistent"));
        let blocked = || sentinel.entry_builder("r").origin("o7").enter();
        let mut rules = Vec::new();
        for id in 0..10 {
            let mut rule = AuthorityRule::new(
                "r",
                AuthorityStrategy::Black,
                (0..100).map(|i| format!("o{i}")),
            );
            rule.id = Some(id);
            sentinel.authority_rules().load(vec![rule]).unwrap();
            let error = blocked().unwrap_err();
            rules.push(std::sync::Arc::downgrade(error.rule_arc().unwrap()));
            drop(error);
            assert_eq!(sentinel.block_counts()[0].count, id + 1);
            clock.advance_ms(1_000);
        }
        let alive = |rules: &[std::sync::Weak<dyn crate::Rule>]| {
            rules.iter().filter(|rule| rule.strong_count() > 0).count()
        };
        assert_eq!(alive(&rules), 1, "the rule in force alone");
        assert!(rules[9].strong_count() > 0);
        sentinel.authority_rules().load(Vec::new()).unwrap();
        assert!(blocked().is_ok());
        // At most the thread's parked error reference, until its next block.
        assert!(alive(&rules) <= 1);
        assert_eq!(sentinel.block_counts()[0].count, 10);
    }

    #[test]
    fn seconds_are_no_longer_kept_once_no_writer_takes_them() {
        let clock = ManualClock::new(1_700_000_000_000);
        let sentinel = Sentinel::builder().clock(clock.clone()).build();
        sentinel
            .flow_rules()
            .load(vec![FlowRule::new("a", 0.0)])
            .unwrap();
        // A writer that is made, then dropped without writing.
        drop(sentinel.metric_writer(MetricLogConfig::new("t").dir("/nonexistent")));
        let kept = |sentinel: &Sentinel| sentinel.engine.parts.ledger.state.lock().pending.len();
        for _ in 0..KEEP_SECONDS {
            assert!(sentinel.entry("a").is_err());
            clock.advance_ms(1_000);
            sentinel.block_counts();
        }
        assert_eq!(kept(&sentinel), KEEP_SECONDS as usize, "kept for a while");
        for _ in 0..10 {
            assert!(sentinel.entry("a").is_err());
            clock.advance_ms(1_000);
            sentinel.block_counts();
        }
        assert_eq!(kept(&sentinel), 0);
        assert!(!sentinel.engine.parts.ledger.state.lock().logging);
        assert_eq!(sentinel.block_counts()[0].count, KEEP_SECONDS + 10);
    }
}
