//! `KindSet`: one kind's rules, compiled per resource, with the state of
//! unchanged rules carried across loads. A kind says how to compile one
//! rule ([`CompiledRule`]); the set compiles its list.

use std::collections::HashMap;
use std::sync::Arc;

use crate::rule::compiled::{CompiledRule, List};
use crate::rule::kind::CompiledKind;

/// Maps keyed by resource name (foldhash: the names come from rule
/// files and APIs, and a load hashes each a few times). A key is shared
/// with the rule set's index of resources, not copied.
pub(crate) type ByResource<V> = HashMap<Arc<str>, V, foldhash::quality::RandomState>;

/// The rules of one kind, as loaded and compiled per resource in check
/// order.
#[derive(Debug)]
pub(crate) struct KindSet<C: CompiledRule> {
    pub(crate) rules: Vec<C::Rule>,
    pub(crate) by_resource: ByResource<List<C>>,
    /// The list of a resource with no rule of the kind.
    empty: List<C>,
}

impl<C: CompiledRule> Default for KindSet<C> {
    fn default() -> Self {
        KindSet {
            rules: Vec::new(),
            by_resource: ByResource::default(),
            empty: Arc::new([]),
        }
    }
}

/// The compiled rules of one resource in the set being replaced, each
/// reused at most once.
struct Reusable<'o, C> {
    old: &'o [Arc<C>],
    /// Which of the first 64 of `old` are reused, a bit each.
    taken: u64,
    /// Which of the rest are reused (allocated at the first reuse of one).
    taken_more: Vec<bool>,
    /// Where the next rule is looked for first: a list loaded again in the
    /// same order finds each rule there, in one comparison.
    next: usize,
}

impl<'o, C: CompiledRule> Reusable<'o, C> {
    fn new(old: &'o [Arc<C>]) -> Self {
        Reusable {
            old,
            taken: 0,
            taken_more: Vec::new(),
            next: 0,
        }
    }

    fn is_taken(&self, i: usize) -> bool {
        match i.checked_sub(64) {
            None => self.taken >> i & 1 == 1,
            Some(i) => self.taken_more.get(i).copied().unwrap_or(false),
        }
    }

    /// An unchanged compiled rule of `rule` not reused yet.
    fn take(&mut self, rule: &C::Rule) -> Option<Arc<C>> {
        let len = self.old.len();
        let at = (0..len)
            .map(|i| (self.next + i) % len)
            .find(|&i| !self.is_taken(i) && self.old[i].source() == rule)?;
        match at.checked_sub(64) {
            None => self.taken |= 1 << at,
            Some(i) => {
                if self.taken_more.is_empty() {
                    self.taken_more = vec![false; len - 64];
                }
                self.taken_more[i] = true;
            }
        }
        self.next = at + 1;
        Some(Arc::clone(&self.old[at]))
    }
}

/// A resource's compiled rules so far: one (the usual case, kept out of a
/// vector of its own), or more.
enum Building<C> {
    One(Arc<C>),
    More(Vec<Arc<C>>),
}

impl<C: CompiledRule> Building<C> {
    fn push(&mut self, compiled: Arc<C>) {
        match self {
            Building::One(first) => {
                *self = Building::More(vec![Arc::clone(first), compiled]);
            }
            Building::More(list) => list.push(compiled),
        }
    }

    /// The list in check order.
    fn finish(self) -> List<C> {
        match self {
            Building::One(only) => Arc::new([only]),
            Building::More(mut list) => {
                list.sort_by_key(|c| c.rank());
                list.into()
            }
        }
    }
}

impl<C: CompiledRule> KindSet<C> {
    /// Compiles `rules`, reusing the compiled rule (and its state) of every
    /// rule in `old` that is unchanged. Linear in the rules when a list is
    /// loaded again in its order (rules of a resource that moved are looked
    /// for among that resource's rules).
    pub(crate) fn compile(rules: Vec<C::Rule>, old: &KindSet<C>) -> Self {
        // Keyed by the rules' own names: a resource's name is copied once,
        // into the set's key.
        let mut building: HashMap<&str, (Building<C>, Option<Reusable<'_, C>>), _> =
            HashMap::with_capacity_and_hasher(rules.len(), *old.by_resource.hasher());
        for rule in &rules {
            let resource = C::resource(rule);
            let mut fresh = None;
            let (list, reusable) = building.entry(resource).or_insert_with(|| {
                let mut reusable = old.by_resource.get(resource).map(|old| Reusable::new(old));
                let first = reusable.as_mut().and_then(|r| r.take(rule));
                let first = first.unwrap_or_else(|| Arc::new(C::compile(rule)));
                fresh = Some(());
                (Building::One(first), reusable)
            });
            if fresh.is_none() {
                let same = reusable.as_mut().and_then(|r| r.take(rule));
                list.push(same.unwrap_or_else(|| Arc::new(C::compile(rule))));
            }
        }
        let mut by_resource =
            ByResource::with_capacity_and_hasher(building.len(), *building.hasher());
        for (resource, (list, _)) in building {
            by_resource.insert(Arc::from(resource), list.finish());
        }
        KindSet {
            rules,
            by_resource,
            empty: Arc::clone(&old.empty),
        }
    }

    /// The compiled rules of `resource`, in check order.
    pub(crate) fn list_of(&self, resource: &str) -> List<C> {
        Arc::clone(self.by_resource.get(resource).unwrap_or(&self.empty))
    }
}

impl<C: CompiledRule> CompiledKind for KindSet<C> {
    type Rule = C::Rule;
    type PerResource = C::PerResource;
    type Checked = C::PerResource;

    const PER_RESOURCE: bool = true;

    fn compile(rules: Vec<C::Rule>, old: &Self) -> Self {
        KindSet::compile(rules, old)
    }

    fn rules(&self) -> &[C::Rule] {
        &self.rules
    }

    fn resources(&self) -> impl Iterator<Item = &Arc<str>> {
        self.by_resource.keys()
    }

    fn of(&self, resource: &str) -> C::PerResource {
        C::per_resource(self.list_of(resource))
    }

    #[inline(always)]
    fn has_own(own: &C::PerResource) -> bool {
        !own.as_ref().is_empty()
    }

    #[inline(always)]
    fn select_own(own: &C::PerResource) -> Option<&C::PerResource> {
        Some(own)
    }

    #[inline(always)]
    fn select_all(&self) -> Option<&C::PerResource> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{CompiledFlow, FlowRule};

    fn compiled(set: &KindSet<CompiledFlow>, resource: &str) -> Vec<Arc<CompiledFlow>> {
        set.by_resource[resource].to_vec()
    }

    #[test]
    fn unchanged_rules_are_reused_once_each_in_any_order() {
        let rules = vec![
            FlowRule::new("a", 1.0),
            FlowRule::new("a", 1.0),
            FlowRule::new("a", 2.0),
            FlowRule::new("b", 3.0),
        ];
        let first = KindSet::<CompiledFlow>::compile(rules.clone(), &KindSet::default());
        let old_a = compiled(&first, "a");
        // Reversed: every rule finds its compiled form, each used once.
        let mut reversed = rules.clone();
        reversed.reverse();
        let second = KindSet::compile(reversed, &first);
        let new_a = compiled(&second, "a");
        assert!(Arc::ptr_eq(&new_a[0], &old_a[2]));
        assert!(!Arc::ptr_eq(&new_a[1], &new_a[2]));
        for c in &new_a[1..] {
            assert!(old_a[..2].iter().any(|o| Arc::ptr_eq(o, c)));
        }
        assert!(Arc::ptr_eq(
            &compiled(&second, "b")[0],
            &compiled(&first, "b")[0]
        ));
        // A changed rule is compiled afresh; a third copy finds none left.
        let third = KindSet::compile(
            vec![
                FlowRule::new("a", 1.0),
                FlowRule::new("a", 1.0),
                FlowRule::new("a", 1.0),
            ],
            &second,
        );
        let third_a = compiled(&third, "a");
        let reused = third_a
            .iter()
            .filter(|c| new_a.iter().any(|o| Arc::ptr_eq(o, c)))
            .count();
        assert_eq!(reused, 2);
    }
}
