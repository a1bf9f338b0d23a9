//! The four control behaviours, with Sentinel's formulas.
//!
//! A controller decides; it never waits. A rate limiter's decision to let a
//! request through later is a [`Decision::Wait`] that the entry serves (by
//! sleeping the thread, or by awaiting a timer in `enter_async`) after every
//! check has run and with nothing held.

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed};
use std::sync::atomic::{AtomicI64, AtomicU64};

use super::rule::{ControlBehavior, FlowGrade, FlowRule};

/// What a controller decided for one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    Pass,
    Block,
    /// Let it through after waiting this many nanoseconds.
    Wait(u64),
}

/// What a controller reads of the node its rule selected.
pub(crate) trait Usage {
    /// The current figure the threshold applies to: passed QPS, or calls
    /// inside (concurrency grade).
    fn current(&self) -> f64;
    /// Passed requests per second in the previous whole second.
    fn previous_pass_qps(&self) -> f64;
}

/// A rule's controller, with its state (warm-up tokens, pacing time).
#[derive(Debug)]
pub(crate) enum Controller {
    /// The whole part of the rule's count.
    Reject(f64),
    WarmUp(WarmUp),
    RateLimiter(Pacer),
    WarmUpRateLimiter(WarmUp, Pacer),
}

impl Controller {
    pub(crate) fn new(rule: &FlowRule) -> Self {
        // The concurrency grade only rejects, whatever behaviour it names.
        if rule.grade == FlowGrade::Concurrency {
            return Controller::Reject(rule.count.floor());
        }
        match rule.control_behavior {
            ControlBehavior::Reject => Controller::Reject(rule.count.floor()),
            ControlBehavior::WarmUp => Controller::WarmUp(WarmUp::new(rule)),
            ControlBehavior::RateLimiter => Controller::RateLimiter(Pacer::new(rule)),
            ControlBehavior::WarmUpRateLimiter => {
                Controller::WarmUpRateLimiter(WarmUp::new(rule), Pacer::new(rule))
            }
        }
    }

    /// Decides for `acquire` permits at `now_ms` (`now_ns` on the same
    /// clock, for pacing). `count` is the rule's threshold.
    #[inline]
    pub(crate) fn decide(
        &self,
        count: f64,
        usage: &impl Usage,
        acquire: u32,
        now_ms: u64,
        now_ns: impl FnOnce() -> u64,
    ) -> Decision {
        let acquire = f64::from(acquire);
        match self {
            &Controller::Reject(whole_count) => {
                // Sentinel passes while whole(current) + acquire <= count:
                // with whole numbers on the left, that is current <
                // whole(count) - acquire + 1, a compare without converting
                // the rate to an integer.
                if usage.current() < whole_count - acquire + 1.0 {
                    Decision::Pass
                } else {
                    Decision::Block
                }
            }
            Controller::WarmUp(warm) => {
                warm.sync(now_ms, usage);
                if whole(usage.current()) + acquire <= warm.admitted_qps() {
                    Decision::Pass
                } else {
                    Decision::Block
                }
            }
            Controller::RateLimiter(pacer) => pacer.decide(count, acquire, now_ns()),
            Controller::WarmUpRateLimiter(warm, pacer) => {
                warm.sync(now_ms, usage);
                pacer.decide(warm.admitted_qps(), acquire, now_ns())
            }
        }
    }
}

/// Sentinel's warm-up token bucket (a variant of Guava's `SmoothWarmingUp`).
///
/// Tokens accumulate while traffic is low, up to `max_token`; above
/// `warning_token` the admitted rate falls from `count` to
/// `count / cold_factor` along `slope`. Once per second the bucket is synced:
/// refilled by the time elapsed (unless the resource is busy above the
/// warning line) and drained by the previous second's passes.
#[derive(Debug)]
pub(crate) struct WarmUp {
    count: f64,
    cold_factor: f64,
    warning_token: i64,
    max_token: i64,
    slope: f64,
    stored_tokens: AtomicI64,
    last_filled_ms: AtomicU64,
}

impl WarmUp {
    pub(crate) fn new(rule: &FlowRule) -> Self {
        let count = rule.count;
        let period = f64::from(rule.warm_up_period_sec);
        // Validation keeps the factor > 1; a rule compiled unchecked gets 2
        // rather than a division by zero.
        let factor = rule.warm_up_cold_factor.max(2);
        let cold_factor = f64::from(factor);
        // Sentinel truncates these to whole tokens, in this order. The
        // float-to-integer casts saturate, and the sum saturates: a count
        // as large as `u64::MAX` gives a bucket of `i64::MAX` tokens.
        let warning_token = (period * count) as i64 / i64::from(factor - 1);
        let max_token =
            warning_token.saturating_add((2.0 * period * count / (1.0 + cold_factor)) as i64);
        let slope = (cold_factor - 1.0) / count / max_token.saturating_sub(warning_token) as f64;
        WarmUp {
            count,
            cold_factor,
            warning_token,
            max_token,
            slope,
            stored_tokens: AtomicI64::new(0),
            last_filled_ms: AtomicU64::new(0),
        }
    }

    /// The QPS the stored tokens allow now.
    #[inline]
    pub(crate) fn admitted_qps(&self) -> f64 {
        let rest = self.stored_tokens.load(Acquire);
        if rest >= self.warning_token {
            let above = rest.saturating_sub(self.warning_token) as f64;
            next_up(1.0 / (above * self.slope + 1.0 / self.count))
        } else {
            self.count
        }
    }

    /// Refills and drains the bucket once per second.
    #[inline]
    pub(crate) fn sync(&self, now_ms: u64, usage: &impl Usage) {
        let second = now_ms - now_ms % 1_000;
        let last = self.last_filled_ms.load(Acquire);
        if second <= last {
            return;
        }
        self.sync_slow(second, last, usage.previous_pass_qps() as i64);
    }

    #[cold]
    fn sync_slow(&self, second: u64, last: u64, previous_qps: i64) {
        let old = self.stored_tokens.load(Acquire);
        let new = self.cool_down(old, second, last, previous_qps);
        if self
            .stored_tokens
            .compare_exchange(old, new, AcqRel, Relaxed)
            .is_ok()
        {
            let current = self
                .stored_tokens
                .fetch_sub(previous_qps, AcqRel)
                .saturating_sub(previous_qps);
            if current < 0 {
                self.stored_tokens.store(0, Relaxed);
            }
            self.last_filled_ms.store(second, Relaxed);
        }
    }

    fn cool_down(&self, old: i64, second: u64, last: u64, previous_qps: i64) -> i64 {
        // Below the warning line the bucket always refills; above it, only
        // while the traffic stays under count / cold_factor (Sentinel's
        // integer division).
        let refills = old < self.warning_token
            || (old > self.warning_token
                && (previous_qps as f64) < ((self.count as i64) as f64 / self.cold_factor).trunc());
        let new = if refills {
            old.saturating_add(((second - last) as f64 * self.count / 1_000.0) as i64)
        } else {
            old
        };
        new.min(self.max_token)
    }

    #[cfg(test)]
    pub(crate) fn tokens(&self) -> (i64, i64, i64) {
        (
            self.warning_token,
            self.max_token,
            self.stored_tokens.load(Relaxed),
        )
    }
}

/// The whole part of a non-negative rate, as Java's `(long)` cast: a
/// conversion instruction, where `f64::trunc` is a libm call on baseline
/// x86-64.
#[inline(always)]
fn whole(x: f64) -> f64 {
    x as i64 as f64
}

/// The smallest `f64` above `x` (Java's `Math.nextUp`), for positive `x`.
fn next_up(x: f64) -> f64 {
    if x.is_finite() && x >= 0.0 {
        f64::from_bits(x.to_bits() + 1)
    } else {
        x
    }
}

/// Sentinel's throttling controller (leaky bucket), in nanoseconds: each
/// admitted request reserves the next slot `1 / rate` after the previous
/// one, with a compare-and-swap so that no two requests take one slot.
#[derive(Debug)]
pub(crate) struct Pacer {
    max_wait_ns: u64,
    latest_ns: AtomicU64,
}

impl Pacer {
    pub(crate) fn new(rule: &FlowRule) -> Self {
        Pacer {
            max_wait_ns: rule.max_queueing_time_ms.saturating_mul(1_000_000),
            latest_ns: AtomicU64::new(0),
        }
    }

    /// Paces `acquire` permits at `rate` per second.
    #[inline]
    pub(crate) fn decide(&self, rate: f64, acquire: f64, now_ns: u64) -> Decision {
        if acquire <= 0.0 {
            return Decision::Pass;
        }
        if rate <= 0.0 || rate.is_nan() {
            return Decision::Block;
        }
        let cost = (1e9 * acquire / rate).round().min(u64::MAX as f64) as u64;
        let mut latest = self.latest_ns.load(Acquire);
        loop {
            let expected = latest.saturating_add(cost);
            let (next, wait) = if expected <= now_ns {
                (now_ns, 0)
            } else {
                let wait = expected - now_ns;
                if wait > self.max_wait_ns {
                    return Decision::Block;
                }
                (expected, wait)
            };
            match self
                .latest_ns
                .compare_exchange_weak(latest, next, AcqRel, Acquire)
            {
                Ok(_) if wait == 0 => return Decision::Pass,
                Ok(_) => return Decision::Wait(wait),
                Err(actual) => latest = actual,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed(f64, f64);

    impl Usage for Fixed {
        fn current(&self) -> f64 {
            self.0
        }
        fn previous_pass_qps(&self) -> f64 {
            self.1
        }
    }

    fn rule(behavior: ControlBehavior, count: f64) -> FlowRule {
        FlowRule {
            control_behavior: behavior,
            ..FlowRule::new("r", count)
        }
    }

    #[test]
    fn reject_passes_up_to_the_count() {
        let c = Controller::new(&rule(ControlBehavior::Reject, 10.0));
        assert_eq!(c.decide(10.0, &Fixed(9.0, 0.0), 1, 0, || 0), Decision::Pass);
        assert_eq!(
            c.decide(10.0, &Fixed(9.0, 0.0), 2, 0, || 0),
            Decision::Block
        );
        assert_eq!(
            c.decide(10.0, &Fixed(10.0, 0.0), 1, 0, || 0),
            Decision::Block
        );
    }

    #[test]
    fn reject_compares_whole_numbers_as_sentinel_does() {
        // whole(current) + acquire <= count, with fractions on both sides.
        let c = Controller::new(&rule(ControlBehavior::Reject, 2.5));
        let decide =
            |current: f64, acquire: u32| c.decide(2.5, &Fixed(current, 0.0), acquire, 0, || 0);
        assert_eq!(decide(1.99, 1), Decision::Pass, "1 + 1 <= 2.5");
        assert_eq!(decide(2.0, 1), Decision::Block, "2 + 1 > 2.5");
        assert_eq!(decide(0.5, 2), Decision::Pass, "0 + 2 <= 2.5");
        assert_eq!(decide(1.0, 2), Decision::Block, "1 + 2 > 2.5");
        let zero = Controller::new(&rule(ControlBehavior::Reject, 0.0));
        assert_eq!(
            zero.decide(0.0, &Fixed(0.0, 0.0), 1, 0, || 0),
            Decision::Block
        );
        assert_eq!(
            zero.decide(0.0, &Fixed(0.0, 0.0), 0, 0, || 0),
            Decision::Pass
        );
    }

    #[test]
    fn warm_up_tokens_follow_sentinels_formulas() {
        let warm = WarmUp::new(&FlowRule {
            control_behavior: ControlBehavior::WarmUp,
            ..FlowRule::new("r", 100.0)
        });
        // warning = 10 * 100 / 2; max = 500 + 2 * 10 * 100 / 4.
        assert_eq!(warm.tokens(), (500, 1_000, 0));
        warm.sync(1_000_500, &Fixed(0.0, 0.0));
        assert_eq!(warm.tokens().2, 1_000, "a cold start fills the bucket");
        let cold = warm.admitted_qps();
        assert!((cold - 100.0 / 3.0).abs() < 1e-9, "{cold}");
        // The same second does not sync again.
        warm.sync(1_000_999, &Fixed(0.0, 50.0));
        assert_eq!(warm.tokens().2, 1_000);
        // A busy previous second drains it (and no refill above warning
        // while the traffic is at or above count / cold_factor).
        warm.sync(1_001_000, &Fixed(0.0, 40.0));
        assert_eq!(warm.tokens().2, 960);
    }

    #[test]
    fn warm_up_tokens_saturate_at_the_largest_counts() {
        for count in [u64::MAX as f64, 1e19, f64::MAX] {
            let warm = WarmUp::new(&FlowRule {
                control_behavior: ControlBehavior::WarmUp,
                warm_up_period_sec: crate::flow::MAX_WARM_UP_PERIOD_SEC,
                ..FlowRule::new("r", count)
            });
            let (warning, max, _) = warm.tokens();
            assert_eq!(max, i64::MAX, "{count}");
            assert!(warning > 0 && warning < max, "{count}: {warning}");
            // A previous second as busy as can be drains a full bucket to 0.
            warm.sync(1_000_000, &Fixed(0.0, f64::MAX));
            assert_eq!(warm.tokens().2, 0, "{count}");
            assert_eq!(warm.admitted_qps(), count);
            // A cold second fills it to the top, and the rate stays > 0.
            warm.sync(2_000_000, &Fixed(0.0, 0.0));
            assert_eq!(warm.tokens().2, i64::MAX, "{count}");
            assert!(warm.admitted_qps() > 0.0, "{count}");
        }
    }

    #[test]
    fn pacer_spaces_requests_and_bounds_the_queue() {
        let pacer = Pacer::new(&FlowRule {
            max_queueing_time_ms: 1,
            ..FlowRule::new("r", 0.0)
        });
        // 10 000 per second: 100 µs apart; the queue holds 1 ms.
        let t = 5_000_000_000;
        assert_eq!(pacer.decide(10_000.0, 1.0, t), Decision::Pass);
        for i in 1..=10 {
            assert_eq!(pacer.decide(10_000.0, 1.0, t), Decision::Wait(i * 100_000));
        }
        assert_eq!(pacer.decide(10_000.0, 1.0, t), Decision::Block);
        // Time catches up: the next slot is free.
        assert_eq!(pacer.decide(10_000.0, 1.0, t + 1_100_000), Decision::Pass);
    }
}
