//! The warm-up curve, second by second, against a model of Sentinel's
//! `WarmUpController`.

use std::collections::BTreeMap;

use sentinel_flow_core::flow::{ControlBehavior, FlowRule};

use crate::one_second_of_traffic;
use crate::support::{T0, instance, load};

/// Sentinel's `WarmUpController` and the 1 s / 2-bucket pass window, written
/// from the Java formulas, for one resource whose every pass goes through it.
#[derive(Debug)]
struct WarmUpModel {
    count: f64,
    cold_factor: i64,
    warning_token: i64,
    max_token: i64,
    slope: f64,
    stored_tokens: i64,
    last_filled_ms: u64,
    /// Passes by 500 ms bucket start.
    passed: BTreeMap<u64, u64>,
}

/// Java's `Math.nextUp` for a positive finite `x`.
fn next_up(x: f64) -> f64 {
    f64::from_bits(x.to_bits() + 1)
}

impl WarmUpModel {
    fn new(count: f64, period_sec: i64, cold_factor: i64) -> Self {
        // warningToken = (int)(period * count) / (coldFactor - 1)
        let warning_token = (period_sec as f64 * count) as i64 / (cold_factor - 1);
        // maxToken = warningToken + (int)(2 * period * count / (1.0 + coldFactor))
        let max_token =
            warning_token + (2.0 * period_sec as f64 * count / (1.0 + cold_factor as f64)) as i64;
        let slope = (cold_factor as f64 - 1.0) / count / (max_token - warning_token) as f64;
        WarmUpModel {
            count,
            cold_factor,
            warning_token,
            max_token,
            slope,
            stored_tokens: 0,
            last_filled_ms: 0,
            passed: BTreeMap::new(),
        }
    }

    fn passed_in(&self, from: u64, len: u64) -> u64 {
        self.passed.range(from..from + len).map(|(_, n)| n).sum()
    }

    /// The sliding window at `now`: the current 500 ms bucket and the one
    /// before it.
    fn pass_qps(&self, now: u64) -> u64 {
        let bucket = now - now % 500;
        self.passed_in(bucket - 500, 1_000)
    }

    /// Passes in the previous whole second.
    fn previous_qps(&self, now: u64) -> i64 {
        let second = now - now % 1_000;
        self.passed_in(second - 1_000, 1_000) as i64
    }

    fn cool_down_tokens(&self, current: u64, previous_qps: i64) -> i64 {
        let old = self.stored_tokens;
        // Below the warning line: refill. Above it: refill only while the
        // previous second passed fewer than (int) count / coldFactor (Java's
        // integer division). Exactly at it: no refill.
        let below = old < self.warning_token;
        let above_and_quiet =
            old > self.warning_token && previous_qps < (self.count as i64) / self.cold_factor;
        let new = if below || above_and_quiet {
            (old as f64 + (current - self.last_filled_ms) as f64 * self.count / 1_000.0) as i64
        } else {
            old
        };
        new.min(self.max_token)
    }

    fn sync_token(&mut self, now: u64) {
        let current = now - now % 1_000;
        if current <= self.last_filled_ms {
            return;
        }
        let previous_qps = self.previous_qps(now);
        let new = self.cool_down_tokens(current, previous_qps);
        self.stored_tokens = (new - previous_qps).max(0);
        self.last_filled_ms = current;
    }

    fn try_pass(&mut self, now: u64) -> bool {
        self.sync_token(now);
        let rest = self.stored_tokens;
        let limit = if rest >= self.warning_token {
            let above = (rest - self.warning_token) as f64;
            next_up(1.0 / (above * self.slope + 1.0 / self.count))
        } else {
            self.count
        };
        let pass = (self.pass_qps(now) + 1) as f64 <= limit;
        if pass {
            *self.passed.entry(now - now % 500).or_default() += 1;
        }
        pass
    }
}

pub(crate) fn warm_up_rule(resource: &str, count: f64) -> FlowRule {
    FlowRule {
        control_behavior: ControlBehavior::WarmUp,
        ..FlowRule::new(resource, count)
    }
}

#[test]
fn warm_up_follows_sentinels_curve_second_by_second() {
    let (clock, sentinel) = instance();
    let rule = warm_up_rule("r", 100.0);
    assert_eq!((rule.warm_up_period_sec, rule.warm_up_cold_factor), (10, 3));
    load(&sentinel, [rule]);
    let mut model = WarmUpModel::new(100.0, 10, 3);
    assert_eq!((model.warning_token, model.max_token), (500, 1_000));

    let mut library = Vec::new();
    let mut modelled = Vec::new();
    let mut disagreements = Vec::new();
    for _ in 0..14 {
        let mut expected = 0;
        let admitted = one_second_of_traffic(&clock, &sentinel, "r", |t, passed| {
            let model_passed = model.try_pass(t);
            expected += usize::from(model_passed);
            if passed != model_passed {
                disagreements.push((t - T0, passed));
            }
        });
        library.push(admitted);
        modelled.push(expected);
    }
    assert_eq!(library, modelled, "admitted per second: library vs model");
    assert!(
        disagreements.is_empty(),
        "attempts decided differently (ms after T0, library passed): {disagreements:?}"
    );

    // The shape: a cold start at count / cold_factor, rising to the count.
    assert!((30..=36).contains(&library[0]), "first second {library:?}");
    for (k, &n) in library.iter().enumerate().skip(11) {
        assert!((95..=100).contains(&n), "second {k}: {library:?}");
    }
    for k in 1..library.len() {
        assert!(
            library[k] + 1 >= library[k - 1],
            "non-decreasing at second {k}: {library:?}"
        );
    }
}
