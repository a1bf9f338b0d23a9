//! `SourceState`: what an operator sees of a source.

use std::fmt::Write;

/// A source's state at one moment: [`SourceHandle::state`](super::SourceHandle::state).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SourceState {
    /// The store, as its source names it.
    pub name: String,
    /// Whether the store is connected now.
    pub connected: bool,
    /// The revision of the rules in force from this source: the store's,
    /// or `h:` and a hash of the values for a store without revisions.
    pub revision: Option<String>,
    /// When they were put in force, milliseconds since the Unix epoch by
    /// the instance's clock.
    pub applied_at_ms: Option<u64>,
    /// The last error (a lost connection, a refused value), cleared by the
    /// next good apply.
    pub last_error: Option<String>,
    /// Whether the rules in force came from the local last-known-good copy
    /// (the store was unreachable at start, or its value bad).
    pub from_last_known_good: bool,
    /// Rule sets put in force.
    pub applies: u64,
    /// Values refused (bad, too large).
    pub refusals: u64,
    /// Connections lost.
    pub disconnects: u64,
}

impl SourceState {
    /// The state as Prometheus text (gauges and counters labelled with
    /// `source`), to append to a scrape:
    /// `sentinel_rule_source_connected{source="redis://..."} 1`.
    ///
    /// ```
    /// let state = sentinel_flow_rules::source::SourceState::default();
    /// assert!(state.prometheus().contains("sentinel_rule_source_connected{source=\"\"} 0"));
    /// ```
    pub fn prometheus(&self) -> String {
        SourceState::prometheus_of(std::slice::from_ref(self))
    }

    /// The states of several sources as one Prometheus text: each family
    /// once (its `# HELP` and `# TYPE`), a sample per source.
    ///
    /// ```
    /// use sentinel_flow_rules::source::SourceState;
    ///
    /// let (mut a, mut b) = (SourceState::default(), SourceState::default());
    /// (a.name, b.name) = ("a".into(), "b".into());
    /// let text = SourceState::prometheus_of(&[a, b]);
    /// assert_eq!(text.matches("# TYPE sentinel_rule_source_connected gauge").count(), 1);
    /// assert!(text.contains("sentinel_rule_source_connected{source=\"b\"} 0"));
    /// ```
    pub fn prometheus_of(states: &[SourceState]) -> String {
        type Read = fn(&SourceState) -> u64;
        let families: [(&str, &str, &str, Read); 7] = [
            (
                "sentinel_rule_source_connected",
                "gauge",
                "Whether the rule source is connected (1) or not (0).",
                |s| u64::from(s.connected),
            ),
            (
                "sentinel_rule_source_last_known_good",
                "gauge",
                "Whether the rules in force came from the local last-known-good copy.",
                |s| u64::from(s.from_last_known_good),
            ),
            (
                "sentinel_rule_source_error",
                "gauge",
                "Whether the source's last attempt ended in an error.",
                |s| u64::from(s.last_error.is_some()),
            ),
            (
                "sentinel_rule_source_applied_timestamp_ms",
                "gauge",
                "When the rules in force from the source were applied (Unix ms, 0: never).",
                |s| s.applied_at_ms.unwrap_or(0),
            ),
            (
                "sentinel_rule_source_applies_total",
                "counter",
                "Rule sets from the source put in force.",
                |s| s.applies,
            ),
            (
                "sentinel_rule_source_refusals_total",
                "counter",
                "Values from the source refused.",
                |s| s.refusals,
            ),
            (
                "sentinel_rule_source_disconnects_total",
                "counter",
                "Connections to the source lost.",
                |s| s.disconnects,
            ),
        ];
        let mut out = String::new();
        for (name, kind, help, read) in families {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for state in states {
                let label = escape(&state.name);
                let _ = writeln!(out, "{name}{{source=\"{label}\"}} {}", read(state));
            }
        }
        out
    }
}

/// A Prometheus label value: backslash, quote and newline escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
