//! The names the rules in force mention: resources, contexts, and origins
//! per resource. Entries consult them when they make a node, so that a
//! name a rule mentions has its node whatever filled the caps; rule loads
//! swap them whole and make no node themselves.
//!
//! A load's names cost one set entry each and leave with the load that
//! replaces it: loads of new names never accumulate. A node is made only
//! when an entry uses a name, and then lives as long as the instance (an
//! entry, a [`Resource`](crate::Resource) handle or a reader may borrow it
//! for that long).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;

/// The hasher of the name sets (the registry's, not imported from it: the
/// registry reaches this module through its overflow budget).
type NameHasher = foldhash::fast::RandomState;

/// The names of the rules in force, swapped whole by each load, shared by
/// the registries that consult them.
pub(crate) type RuleNames = Arc<ArcSwap<ReservedNames>>;

/// The default bound on the distinct names the rules in force may mention
/// (see [`SentinelBuilder::max_rule_names`](crate::SentinelBuilder::max_rule_names)).
pub const DEFAULT_MAX_RULE_NAMES: usize = 100_000;

/// The names the rules in force mention.
#[derive(Default)]
pub(crate) struct ReservedNames {
    /// Resource -> the origins rules name on it.
    resources: HashMap<Arc<str>, HashSet<Arc<str>, NameHasher>, NameHasher>,
    contexts: HashSet<Arc<str>, NameHasher>,
    /// Distinct names: resources, contexts, and (resource, origin) pairs.
    count: usize,
}

/// More distinct names than a rule set may mention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TooManyNames {
    pub(crate) max: usize,
}

impl ReservedNames {
    /// No names yet, with room for `resources` resources (the tables are
    /// not grown and rehashed name by name).
    pub(crate) fn with_capacity(resources: usize) -> Self {
        ReservedNames {
            resources: HashMap::with_capacity_and_hasher(resources, NameHasher::default()),
            ..ReservedNames::default()
        }
    }

    /// Whether a rule mentions resource `name`.
    #[inline]
    pub(crate) fn resource(&self, name: &str) -> bool {
        self.resources.contains_key(name)
    }

    /// Whether a rule on `resource` names origin `origin`.
    #[inline]
    pub(crate) fn origin(&self, resource: &str, origin: &str) -> bool {
        self.resources
            .get(resource)
            .is_some_and(|origins| origins.contains(origin))
    }

    /// Whether a rule names context `name`.
    #[inline]
    pub(crate) fn context(&self, name: &str) -> bool {
        self.contexts.contains(name)
    }

    /// How many distinct names: resources, contexts and (resource, origin)
    /// pairs.
    pub(crate) fn len(&self) -> usize {
        self.count
    }

    /// Every resource named.
    pub(crate) fn resources(&self) -> impl Iterator<Item = &str> + '_ {
        self.resources.keys().map(|name| &**name)
    }

    /// Adds resource `name`; `Err` past `max` distinct names.
    pub(crate) fn add_resource(&mut self, name: &str, max: usize) -> Result<(), TooManyNames> {
        self.resource_entry(name, max).map(|_| ())
    }

    fn resource_entry(
        &mut self,
        name: &str,
        max: usize,
    ) -> Result<&mut HashSet<Arc<str>, NameHasher>, TooManyNames> {
        if self.resources.contains_key(name) {
            return self.resources.get_mut(name).ok_or(TooManyNames { max });
        }
        self.count_one(max)?;
        Ok(self.resources.entry(name.into()).or_default())
    }

    /// Adds origin `origin` of `resource` (and the resource).
    pub(crate) fn add_origin(
        &mut self,
        resource: &str,
        origin: &str,
        max: usize,
    ) -> Result<(), TooManyNames> {
        if self.origin(resource, origin) {
            return Ok(());
        }
        self.resource_entry(resource, max)?;
        self.count_one(max)?;
        if let Some(origins) = self.resources.get_mut(resource) {
            origins.insert(origin.into());
        }
        Ok(())
    }

    /// Adds context `name`.
    pub(crate) fn add_context(&mut self, name: &str, max: usize) -> Result<(), TooManyNames> {
        if !self.contexts.contains(name) {
            self.count_one(max)?;
            self.contexts.insert(name.into());
        }
        Ok(())
    }

    fn count_one(&mut self, max: usize) -> Result<(), TooManyNames> {
        if self.count >= max {
            return Err(TooManyNames { max });
        }
        self.count += 1;
        Ok(())
    }
}

impl fmt::Debug for ReservedNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReservedNames")
            .field("resources", &self.resources.len())
            .field("contexts", &self.contexts.len())
            .field("names", &self.count)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_counted_once_and_bounded() {
        let mut names = ReservedNames::default();
        names.add_resource("a", 4).unwrap();
        names.add_resource("a", 4).unwrap();
        names.add_origin("a", "app", 4).unwrap();
        names.add_origin("a", "app", 4).unwrap();
        names.add_context("ctx", 4).unwrap();
        assert_eq!(names.len(), 3);
        assert!(names.resource("a") && !names.resource("app"));
        assert!(names.origin("a", "app") && !names.origin("b", "app"));
        assert!(names.context("ctx") && !names.context("a"));
        // A new origin on a new resource needs two names: one is left.
        assert_eq!(
            names.add_origin("b", "app", 4),
            Err(TooManyNames { max: 4 })
        );
        assert_eq!(names.add_context("other", 4), Err(TooManyNames { max: 4 }));
        assert_eq!(names.len(), 4);
    }
}
