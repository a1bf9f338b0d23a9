//! What a QPS rule has left in its current window: the figures of the
//! IETF rate-limit headers (`RateLimit-Policy`, `RateLimit`). Read on
//! demand, off the entry path.

use super::{CompiledFlow, FlowGrade, FlowRule, FlowStrategy, LIMIT_APP_DEFAULT, own_window};
use crate::Resource;
use crate::engine::rules::InstanceRules;
use crate::node::{ResourceNode, StatisticNode};
use crate::stat::MetricEvent;

/// A QPS flow rule's quota in its current window, as
/// [`Resource::flow_quota`] reads it.
///
/// - `limit`: the passes the rule's check admits in one window. As in
///   Sentinel, the check passes an entry while the window's whole rate
///   (passes per second) plus its permit is at most the whole `count`, so
///   a window of `w` seconds admits `whole(count) × w` passes (rounded
///   up): the whole count for the default one-second window;
/// - `remaining`: `limit` minus the passes counted in the window the rule
///   checks (the resource's one-second window, or the rule's own
///   `stat_interval_ms` window), at least 0;
/// - `reset_ms`: the time until the window's oldest bucket leaves it (the
///   next bucket edge), when the passes counted in that bucket stop
///   counting.
///
/// A rule's warm-up or rate limiter may admit less than `remaining` (its
/// limit during warm-up is below its count; a rate limiter spaces
/// passes): the figure is what the count allows, as Sentinel's check reads
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowQuota {
    /// Passes the rule admits per window.
    pub limit: u64,
    /// The window's length in milliseconds.
    pub window_ms: u64,
    /// Passes left in the current window.
    pub remaining: u64,
    /// Milliseconds until the window's oldest bucket leaves it.
    pub reset_ms: u64,
}

impl Resource<'_> {
    /// The quota left by a QPS flow rule of this resource: `rule` if given
    /// (a rule as loaded, e.g. the one in a [`BlockError`](crate::BlockError)),
    /// else the first QPS rule of the resource. `None` for a concurrency
    /// rule, a rule that limits one origin or other origins, a relate or
    /// chain rule (their counts are read from other nodes), a rule not
    /// loaded for this resource, or a handle made past the resource cap.
    ///
    /// Costs a rule-set read and a window sum: call it when a response
    /// needs it, not on every entry.
    ///
    /// ```
    /// use sentinel_flow_core::flow::FlowRule;
    /// use sentinel_flow_core::{ManualClock, Sentinel};
    ///
    /// let sentinel = Sentinel::builder().clock(ManualClock::new(10_200)).build();
    /// sentinel.flow_rules().load(vec![FlowRule::new("r", 5.0)])?;
    /// let resource = sentinel.resource("r");
    /// drop(resource.entry());
    /// let quota = resource.flow_quota(None).unwrap();
    /// assert_eq!((quota.limit, quota.remaining, quota.window_ms), (5, 4, 1_000));
    /// assert_eq!(quota.reset_ms, 300); // the 500 ms bucket of 10 000 leaves at 10 500
    /// # Ok::<(), sentinel_flow_core::RuleErrors>(())
    /// ```
    pub fn flow_quota(&self, rule: Option<&FlowRule>) -> Option<FlowQuota> {
        let engine = self.engine();
        quota(
            &engine.rules,
            self.node()?,
            rule,
            engine.parts.clock.now_ms(),
        )
    }

    /// The quota `rule` reports when it has just refused an entry: as
    /// [`flow_quota`](Self::flow_quota) for that rule, with nothing
    /// `remaining`, and the window not summed (a rate-limited response
    /// tells the limit, the window and the reset; what a refusal leaves is
    /// nothing). For a 429's headers, read from the rule as given (the
    /// one in the [`BlockError`](crate::BlockError), loaded when it
    /// refused) and the clock: no rule-set read, no window read. `None`
    /// where `flow_quota` gives none for that rule, and for a rule of
    /// another resource.
    ///
    /// ```
    /// use sentinel_flow_core::flow::FlowRule;
    /// use sentinel_flow_core::{BlockKind, ManualClock, Sentinel};
    ///
    /// let sentinel = Sentinel::builder().clock(ManualClock::new(10_200)).build();
    /// sentinel.flow_rules().load(vec![FlowRule::new("r", 1.0)])?;
    /// let resource = sentinel.resource("r");
    /// drop(resource.entry());
    /// let block = resource.entry().unwrap_err();
    /// assert_eq!(block.kind(), BlockKind::Flow);
    /// let rule = block.rule_as::<FlowRule>().unwrap();
    /// let quota = resource.flow_quota_refused(rule).unwrap();
    /// assert_eq!((quota.limit, quota.remaining, quota.reset_ms), (1, 0, 300));
    /// # Ok::<(), sentinel_flow_core::RuleErrors>(())
    /// ```
    pub fn flow_quota_refused(&self, rule: &FlowRule) -> Option<FlowQuota> {
        let node = self.node()?;
        if rule.resource != node.name() {
            return None;
        }
        let figures = Figures::of(rule, node.stats())?;
        Some(figures.quota(self.engine().parts.clock.now_ms(), 0))
    }
}

/// The quota `rule` (or the first QPS rule of `node`) of the rules in
/// force has left at `now`.
fn quota(
    rules: &InstanceRules,
    node: &ResourceNode,
    rule: Option<&FlowRule>,
    now: u64,
) -> Option<FlowQuota> {
    let version = rules.rules_version();
    rules.with_rules_if_any(version, |set| {
        let flow = &set?.for_resource(node)?.flow;
        let compiled = match rule {
            // The rule of a block is the loaded one: the same allocation.
            Some(rule) => flow
                .iter()
                .find(|c| std::ptr::eq(&*c.rule, rule) || *c.rule == *rule)?,
            None => flow.iter().find(|c| c.rule.grade == FlowGrade::Qps)?,
        };
        quota_of(compiled, node.stats(), now)
    })
}

/// What a QPS rule's headers state of its window, from the rule's fields
/// and its node's second window: what `CompiledFlow::compile` decides
/// from the same fields (the node the rule counts on, its own window).
struct Figures {
    limit: u64,
    window_ms: u64,
    bucket_ms: u64,
}

impl Figures {
    /// `None` for a concurrency rule or one that counts on another node
    /// (an origin's, a related resource's, a context's).
    fn of(rule: &FlowRule, node: &StatisticNode) -> Option<Self> {
        let own_node = rule.limit_app == LIMIT_APP_DEFAULT && rule.strategy == FlowStrategy::Direct;
        if rule.grade != FlowGrade::Qps || !own_node {
            return None;
        }
        let (window_ms, bucket_ms) = own_window(rule).map_or_else(
            || node.second_window_ms(),
            |w| (w.interval_ms(), w.bucket_ms()),
        );
        // The check passes an entry while `whole(passes / w) + 1 <=
        // whole(count)`, i.e. while `passes < whole(count) * w`.
        let limit = (rule.count.max(0.0).floor() as u64)
            .saturating_mul(window_ms)
            .div_ceil(1_000);
        Some(Figures {
            limit,
            window_ms,
            bucket_ms,
        })
    }

    /// The quota at `now` with `remaining` passes left.
    fn quota(&self, now: u64, remaining: u64) -> FlowQuota {
        FlowQuota {
            limit: self.limit,
            window_ms: self.window_ms,
            remaining,
            reset_ms: self.bucket_ms - now % self.bucket_ms.max(1),
        }
    }
}

/// The quota of `compiled` at `now`, its window's passes counted.
fn quota_of(compiled: &CompiledFlow, node: &StatisticNode, now: u64) -> Option<FlowQuota> {
    let figures = Figures::of(&compiled.rule, node)?;
    let passes = match &compiled.window {
        Some(window) => window.sum(now, MetricEvent::Pass),
        None => node.sum(now, MetricEvent::Pass),
    };
    Some(figures.quota(now, figures.limit.saturating_sub(passes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::LIMIT_APP_OTHER;
    use crate::{ManualClock, Sentinel};

    fn sentinel(rules: Vec<FlowRule>) -> (Sentinel, ManualClock) {
        let clock = ManualClock::new(20_000);
        let sentinel = Sentinel::builder().clock(clock.clone()).build();
        sentinel.flow_rules().load(rules).unwrap();
        (sentinel, clock)
    }

    #[test]
    fn remaining_is_the_count_minus_the_passes_of_the_window() {
        let (sentinel, clock) = sentinel(vec![FlowRule::new("r", 3.0)]);
        let resource = sentinel.resource("r");
        let quota = || {
            let q = resource.flow_quota(None).unwrap();
            (q.limit, q.remaining, q.reset_ms)
        };
        assert_eq!(quota().0, 3);
        drop(resource.entry().unwrap());
        clock.advance_ms(100);
        drop(resource.entry().unwrap());
        assert_eq!(quota().1, 1);
        assert_eq!(quota().2, 400);
        drop(resource.entry().unwrap());
        assert!(resource.entry().is_err());
        assert_eq!(quota().1, 0, "floored at 0, blocks not counted");
        // The bucket of 20 000 leaves the window at 21 000.
        clock.set(21_000);
        assert_eq!(quota().1, 3);
    }

    #[test]
    fn a_refusal_reports_the_same_quota_with_nothing_remaining() {
        let mut own = FlowRule::new("w", 2.0);
        own.stat_interval_ms = 4_000;
        own.stat_sample_count = 4;
        let (instance, clock) = sentinel(vec![FlowRule::new("r", 3.0), own.clone()]);
        for (name, rule) in [("r", FlowRule::new("r", 3.0)), ("w", own)] {
            let resource = instance.resource(name);
            drop(resource.entry().unwrap());
            clock.advance_ms(700);
            let read = resource.flow_quota(Some(&rule)).unwrap();
            assert!(read.remaining > 0, "{name}: {read:?}");
            let refused = resource.flow_quota_refused(&rule).unwrap();
            assert_eq!(
                refused,
                FlowQuota {
                    remaining: 0,
                    ..read
                },
                "{name}"
            );
        }
        // Rules the headers do not describe give none either way.
        let mut threads = FlowRule::new("t", 2.0);
        threads.grade = FlowGrade::Concurrency;
        let (instance, _) = sentinel(vec![threads.clone()]);
        assert_eq!(instance.resource("t").flow_quota_refused(&threads), None);
        // Nor does a rule of another resource.
        assert_eq!(
            instance
                .resource("t")
                .flow_quota_refused(&FlowRule::new("r", 3.0)),
            None
        );
        let mut origin = FlowRule::new("t", 2.0);
        origin.limit_app = "checkout".into();
        assert_eq!(instance.resource("t").flow_quota_refused(&origin), None);
    }

    #[test]
    fn a_rule_with_its_own_window_reads_that_window() {
        let mut rule = FlowRule::new("r", 2.0);
        rule.stat_interval_ms = 4_000;
        rule.stat_sample_count = 4;
        let (sentinel, clock) = sentinel(vec![rule.clone()]);
        let resource = sentinel.resource("r");
        drop(resource.entry().unwrap());
        clock.advance_ms(2_500);
        let quota = resource.flow_quota(Some(&rule)).unwrap();
        // 2 a second over 4 s.
        assert_eq!(
            (quota.limit, quota.window_ms, quota.remaining),
            (8, 4_000, 7)
        );
        assert_eq!(quota.reset_ms, 500);
        // The figure is what the check admits.
        let mut entries = Vec::new();
        while let Ok(entry) = resource.entry() {
            entries.push(entry);
        }
        assert_eq!(entries.len(), 7);
        assert_eq!(resource.flow_quota(None).unwrap().remaining, 0);
    }

    #[test]
    fn the_limit_of_the_default_window_is_the_count() {
        for (count, limit) in [(3.0, 3), (2.5, 2), (1.0, 1), (0.5, 0)] {
            let (sentinel, _) = sentinel(vec![FlowRule::new("r", count)]);
            let resource = sentinel.resource("r");
            assert_eq!(resource.flow_quota(None).unwrap().limit, limit);
            let mut passed = 0;
            while let Ok(entry) = resource.entry() {
                passed += 1;
                drop(entry);
                assert!(passed <= limit, "the check admitted more than {limit}");
            }
            assert_eq!(passed, limit, "count {count}");
        }
    }

    #[test]
    fn rules_on_other_nodes_and_concurrency_give_none() {
        let mut other = FlowRule::new("r", 2.0);
        other.limit_app = LIMIT_APP_OTHER.into();
        let mut threads = FlowRule::new("t", 2.0);
        threads.grade = FlowGrade::Concurrency;
        let (sentinel, _) = sentinel(vec![other.clone(), threads]);
        assert_eq!(sentinel.resource("r").flow_quota(Some(&other)), None);
        assert_eq!(sentinel.resource("t").flow_quota(None), None);
        assert_eq!(sentinel.resource("none").flow_quota(None), None);
    }
}
