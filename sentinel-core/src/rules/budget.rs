//! The rule memory budget: the most memory the rules in force may take,
//! every kind together, checked before a load is applied.
//!
//! Each rule states the most it may take ([`Footprint`]); a load adds up
//! the rules it would put in force (its own, and the other kinds' rules
//! that stay) and is refused whole when the sum passes the instance's
//! budget ([`SentinelBuilder::rule_memory_budget`](crate::SentinelBuilder::rule_memory_budget)),
//! naming the rule that takes it past, with the figures.

use super::kinds::{self, Kind};
use super::set::RuleSet;
use crate::rule::RuleError;
use crate::rule::footprint::Footprint;

/// The rule that took a sum past the budget.
struct Crossing {
    kind: &'static str,
    index: usize,
    resource: String,
    footprint: Footprint,
}

/// The sum of the footprints of the rules a load would put in force.
pub(crate) struct Tally {
    budget: u64,
    total: u64,
    crossing: Option<Crossing>,
}

impl Tally {
    /// An empty sum, against `budget` bytes.
    pub(crate) fn new(budget: u64) -> Self {
        Tally {
            budget,
            total: 0,
            crossing: None,
        }
    }

    /// Adds every rule of the kinds in force in `set` but `except` (the
    /// kind being loaded), which stay in force.
    pub(crate) fn in_force_except(&mut self, set: &RuleSet, except: &str) {
        fn add<R>(tally: &mut Tally, kind: &Kind<R>, set: &RuleSet, except: &str) {
            if kind.name != except {
                let rules = (kind.rules)(set);
                let bytes = rules.iter().map(|rule| (kind.footprint)(rule).bytes);
                tally.total = bytes.fold(tally.total, u64::saturating_add);
            }
        }
        add(self, &kinds::FLOW, set, except);
        add(self, &kinds::DEGRADE, set, except);
        add(self, &kinds::SYSTEM, set, except);
        add(self, &kinds::AUTHORITY, set, except);
        add(self, &kinds::PARAM_FLOW, set, except);
    }

    /// Adds `rules` of `kind`, being loaded; the first that takes the sum
    /// past the budget is remembered.
    pub(crate) fn loaded<R>(&mut self, kind: &Kind<R>, rules: &[R]) {
        for (index, rule) in rules.iter().enumerate() {
            let footprint = (kind.footprint)(rule);
            self.total = self.total.saturating_add(footprint.bytes);
            if self.total > self.budget && self.crossing.is_none() {
                let names = (kind.names)(rule);
                self.crossing = Some(Crossing {
                    kind: kind.name,
                    index,
                    resource: names.first().map_or("", |name| name.name).to_owned(),
                    footprint,
                });
            }
        }
    }

    /// The sum in bytes, or the error naming the rule that took it past
    /// the budget.
    pub(crate) fn finish(&mut self) -> Result<u64, RuleError> {
        let Some(crossing) = self.crossing.take() else {
            return Ok(self.total);
        };
        let message = format!(
            "takes the rules past the rule memory budget: with them the rules in force would \
             take up to {} at worst, over the budget of {} (SentinelBuilder::rule_memory_budget); \
             this rule takes up to {}",
            bytes(self.total),
            bytes(self.budget),
            bytes(crossing.footprint.bytes),
        );
        Err(RuleError::new(
            crossing.kind,
            crossing.index,
            &crossing.resource,
            crossing.footprint.field,
            message,
        ))
    }
}

/// `n` bytes, with the figure in MiB beside.
fn bytes(n: u64) -> String {
    format!("{n} bytes ({:.1} MiB)", n as f64 / f64::from(1 << 20))
}
