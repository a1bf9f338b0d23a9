//! Rule kinds an application adds: a [`UserKind`] says what its rules are,
//! how one is compiled and checked; its [`UserKindRules`] load and hold
//! them and, registered on an instance's builder
//! ([`SentinelBuilder::kind`](crate::SentinelBuilder::kind)), check every
//! entry at the kind's order among the built-in slots. Its blocks are
//! counted as any rule's, under `BlockKind::Custom(NAME)` (the block log's
//! exception name is the kind's name).
//!
//! The built-in kinds are listed once in the core (`crate::kinds`) and run
//! as a chain compiled in; a user kind runs as a user slot does, one
//! dynamic call per entry, and nothing else in the core, the rules file
//! reader or the transport changes for it.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::rule::{Rule, RuleError, RuleErrors};
use crate::slot::{EntryContext, Slot};
use crate::{BlockError, BlockKind};

/// A kind of rule an application adds.
///
/// ```
/// use std::sync::atomic::{AtomicU64, Ordering};
/// use sentinel_flow_core::slot::{EntryContext, order};
/// use sentinel_flow_core::{BlockKind, ManualClock, Rule, Sentinel, UserKind, UserKindRules};
///
/// /// Lets a resource be entered `n` times, then refuses it.
/// #[derive(Clone, Debug, PartialEq)]
/// struct DenyAfter { resource: String, n: u64 }
///
/// impl std::fmt::Display for DenyAfter {
///     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
///         write!(f, "deny {} after {}", self.resource, self.n)
///     }
/// }
///
/// impl Rule for DenyAfter {
///     fn resource(&self) -> &str { &self.resource }
///     fn block_kind(&self) -> BlockKind { BlockKind::Custom(DenyAfterKind::NAME) }
///     fn as_any(&self) -> &dyn std::any::Any { self }
/// }
///
/// struct DenyAfterKind;
///
/// impl UserKind for DenyAfterKind {
///     type Rule = DenyAfter;
///     type Compiled = AtomicU64;
///     const NAME: &'static str = "deny_after";
///     const ORDER: i32 = order::DEGRADE + 1;
///     fn compile(_: &DenyAfter) -> AtomicU64 { AtomicU64::new(0) }
///     fn check(rule: &DenyAfter, seen: &AtomicU64, _: &EntryContext<'_>) -> bool {
///         seen.fetch_add(1, Ordering::Relaxed) < rule.n
///     }
/// }
///
/// let rules = UserKindRules::<DenyAfterKind>::new();
/// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).kind(&rules).build();
/// rules.load(vec![DenyAfter { resource: "api".into(), n: 1 }])?;
/// drop(sentinel.entry("api").unwrap());
/// assert_eq!(sentinel.entry("api").unwrap_err().kind(), BlockKind::Custom("deny_after"));
/// # Ok::<(), sentinel_flow_core::RuleErrors>(())
/// ```
pub trait UserKind: Send + Sync + 'static {
    /// The rule as loaded.
    type Rule: Rule + Clone + PartialEq;
    /// A rule ready for the hot path, with the state it keeps (kept across
    /// loads while its rule is unchanged).
    type Compiled: Send + Sync + 'static;

    /// The kind's name: its blocks' kind (`BlockKind::Custom(NAME)`) and
    /// the kind its rules' errors name.
    const NAME: &'static str;

    /// Where its check runs among the slots (see
    /// [`order`](crate::slot::order)); above
    /// [`STATISTIC`](crate::slot::order::STATISTIC), so that its blocks
    /// are counted.
    const ORDER: i32;

    /// Every problem of `rule`, at `index` in the list being loaded (none
    /// unless the kind says).
    fn problems(rule: &Self::Rule, index: usize) -> Vec<RuleError> {
        let _ = (rule, index);
        Vec::new()
    }

    /// Compiles `rule` with fresh state.
    fn compile(rule: &Self::Rule) -> Self::Compiled;

    /// Checks an entry of the rule's resource: `false` refuses it.
    fn check(rule: &Self::Rule, compiled: &Self::Compiled, ctx: &EntryContext<'_>) -> bool;
}

/// One rule of a user kind, compiled.
struct Compiled<K: UserKind> {
    rule: Arc<K::Rule>,
    state: K::Compiled,
}

/// The rules in force, as loaded and by resource.
struct InForce<K: UserKind> {
    rules: Vec<K::Rule>,
    by_resource: HashMap<Arc<str>, Vec<Arc<Compiled<K>>>, foldhash::quality::RandomState>,
}

impl<K: UserKind> Default for InForce<K> {
    fn default() -> Self {
        InForce {
            rules: Vec::new(),
            by_resource: HashMap::default(),
        }
    }
}

/// The rules of a user kind `K`: load and read them; register them on an
/// instance's builder with [`SentinelBuilder::kind`](crate::SentinelBuilder::kind)
/// for its entries to be checked. Clones share the rules.
pub struct UserKindRules<K: UserKind> {
    in_force: Arc<ArcSwap<InForce<K>>>,
    /// Serialises loads (each keeps the state of the rules in force).
    lock: Arc<Mutex<()>>,
}

impl<K: UserKind> Clone for UserKindRules<K> {
    fn clone(&self) -> Self {
        UserKindRules {
            in_force: Arc::clone(&self.in_force),
            lock: Arc::clone(&self.lock),
        }
    }
}

impl<K: UserKind> Default for UserKindRules<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: UserKind> UserKindRules<K> {
    /// No rules yet.
    pub fn new() -> Self {
        UserKindRules {
            in_force: Arc::new(ArcSwap::from_pointee(InForce::default())),
            lock: Arc::new(Mutex::new(())),
        }
    }

    /// Replaces every rule of the kind with `rules`, after checking all of
    /// them (an empty resource name is a problem of every kind): when any
    /// is invalid nothing changes and every problem is returned. An
    /// unchanged rule keeps its compiled state.
    pub fn load(&self, rules: Vec<K::Rule>) -> Result<(), RuleErrors> {
        Self::check(&rules)?;
        let _guard = self.lock.lock();
        let old = self.in_force.load_full();
        let mut reusable: Vec<&Arc<Compiled<K>>> = old.by_resource.values().flatten().collect();
        let mut next = InForce {
            by_resource: HashMap::default(),
            rules: Vec::new(),
        };
        for rule in &rules {
            let same = reusable.iter().position(|c| *c.rule == *rule);
            let compiled = match same {
                Some(at) => Arc::clone(reusable.swap_remove(at)),
                None => Arc::new(Compiled {
                    state: K::compile(rule),
                    rule: Arc::new(rule.clone()),
                }),
            };
            let resource: Arc<str> = rule.resource().into();
            next.by_resource.entry(resource).or_default().push(compiled);
        }
        next.rules = rules;
        self.in_force.store(Arc::new(next));
        Ok(())
    }

    /// Every problem [`load`](Self::load) finds in `rule`, at `index` in
    /// its list: an empty resource name, and the kind's own
    /// ([`UserKind::problems`]).
    pub fn problems(rule: &K::Rule, index: usize) -> Vec<RuleError> {
        let mut errors = Vec::new();
        if rule.resource().trim().is_empty() {
            errors.push(RuleError::new(
                K::NAME,
                index,
                rule.resource(),
                "resource",
                "is empty".to_owned(),
            ));
        }
        errors.extend(K::problems(rule, index));
        errors
    }

    /// Checks `rules` as [`load`](Self::load) does, changing nothing: a
    /// list this accepts, `load` puts in force.
    pub fn check(rules: &[K::Rule]) -> Result<(), RuleErrors> {
        let errors: Vec<RuleError> = rules
            .iter()
            .enumerate()
            .flat_map(|(index, rule)| Self::problems(rule, index))
            .collect();
        match errors.is_empty() {
            true => Ok(()),
            false => Err(RuleErrors(errors)),
        }
    }

    /// Whether `self` and `other` are the same rules (one is a clone of
    /// the other).
    pub fn same(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.in_force, &other.in_force)
    }

    /// The rules in force, as loaded.
    pub fn rules(&self) -> Vec<K::Rule> {
        self.in_force.load().rules.clone()
    }
}

impl<K: UserKind> fmt::Debug for UserKindRules<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserKindRules")
            .field("kind", &K::NAME)
            .field("rules", &self.in_force.load().rules.len())
            .finish()
    }
}

/// A user kind's check, as a slot of the chain.
pub(crate) struct UserKindSlot<K: UserKind>(pub(crate) UserKindRules<K>);

impl<K: UserKind> fmt::Debug for UserKindSlot<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<K: UserKind> Slot for UserKindSlot<K> {
    fn order(&self) -> i32 {
        K::ORDER
    }

    fn entry(&self, ctx: &EntryContext<'_>) -> Result<(), BlockError> {
        let in_force = self.0.in_force.load();
        let Some(list) = in_force.by_resource.get(ctx.resource_name()) else {
            return Ok(());
        };
        match list.iter().find(|c| !K::check(&c.rule, &c.state, ctx)) {
            None => Ok(()),
            Some(refusing) => {
                let rule = Arc::clone(&refusing.rule) as Arc<dyn Rule>;
                Err(BlockError::by_rule(BlockKind::Custom(K::NAME), rule))
            }
        }
    }
}
