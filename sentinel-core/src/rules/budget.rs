//! The rule memory budget: the most memory the rules in force may take,
//! every kind together, checked before a load is applied.
//!
//! Each rule states the most it may take ([`Footprint`]); a load adds up
//! the rules it would put in force (its own, and the other kinds' rules
//! that stay) and is refused whole when the sum passes the instance's
//! budget ([`SentinelBuilder::rule_memory_budget`](crate::SentinelBuilder::rule_memory_budget)),
//! naming the rule that takes it past, with the figures.

use super::kinds::Kind;
use super::list::{EachKind, Listed, each_kind};
use super::set::RuleSet;
use crate::rule::RuleError;
use crate::rule::footprint::Footprint;
use crate::rule::kind::RuleKind;

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
    /// kinds being loaded), which stay in force.
    pub(crate) fn in_force_except(&mut self, set: &RuleSet, except: &[&str]) {
        struct InForce<'t, 's> {
            tally: &'t mut Tally,
            set: &'s RuleSet,
            except: &'s [&'s str],
        }
        impl EachKind for InForce<'_, '_> {
            fn kind<K: Listed>(&mut self) {
                if !self.except.contains(&K::NAME) {
                    let rules = self.set.rules_of::<K>();
                    let bytes = rules.iter().map(|rule| K::footprint(rule).bytes);
                    self.tally.total = bytes.fold(self.tally.total, u64::saturating_add);
                }
            }
        }
        each_kind(&mut InForce {
            tally: self,
            set,
            except,
        });
    }

    /// Adds `rules` of kind `K`, being loaded; the first that takes the
    /// sum past the budget is remembered.
    pub(crate) fn loaded<K: RuleKind>(&mut self, rules: &[K::Rule]) {
        self.add(K::NAME, K::footprint, K::names, rules);
    }

    /// Adds `rules` of `kind`, being loaded.
    pub(crate) fn loaded_of<R>(&mut self, kind: &Kind<R>, rules: &[R]) {
        self.add(kind.name, kind.footprint, kind.names, rules);
    }

    fn add<R>(
        &mut self,
        kind: &'static str,
        footprint: fn(&R) -> crate::rule::footprint::Footprint,
        names: crate::rule::names::NamesOf<R>,
        rules: &[R],
    ) {
        for (index, rule) in rules.iter().enumerate() {
            let footprint = footprint(rule);
            self.total = self.total.saturating_add(footprint.bytes);
            if self.total > self.budget && self.crossing.is_none() {
                let names = names(rule);
                self.crossing = Some(Crossing {
                    kind,
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
