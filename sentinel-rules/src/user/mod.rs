//! Kinds an application adds (`sentinel_flow_core::UserKind`) in rule
//! files, rule sources and the command API. A kind whose rule is
//! described ([`DescribeRule`], as a built-in kind's is in its folder) and
//! whose rules are registered ([`UserKinds::kind`],
//! [`LoadOptions::kind`](crate::LoadOptions::kind)) is read and written by
//! the same generic codecs as the built-in kinds: its file section by the
//! YAML reader (problems at their line and column) and writer, its store
//! key and its `getRules`/`setRules` data by the JSON reader and writer.
//!
//! Its rules are checked as its [`UserKindRules`] loads them
//! ([`UserKindRules::check`]) when they are read, so that a file is
//! refused whole, every problem of every kind told, before anything is
//! put in force; its entries are checked by its `UserKindRules`, as when
//! its rules are loaded from code.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use sentinel_flow_core::RuleErrors;
use serde_json::Value;

use crate::error::Problem;
use crate::parse::tree::Node;
use crate::render::fields::Rendered;

mod typed;

/// The kinds an application registered, in the order of registration.
/// Clones share the registered rules.
///
/// ```
/// use sentinel_flow_core::describe::{Describe, DescribeRule, Fields, Name};
/// use sentinel_flow_core::slot::{EntryContext, order};
/// use sentinel_flow_core::{BlockKind, ManualClock, Rule, RuleError, Sentinel};
/// use sentinel_flow_core::{UserKind, UserKindRules};
/// use sentinel_flow_rules::LoadOptions;
/// use std::sync::atomic::{AtomicU64, Ordering};
///
/// /// Lets a resource be entered `n` times, then refuses it.
/// #[derive(Clone, Debug, Default, PartialEq)]
/// struct DenyAfter { resource: String, n: u32 }
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
/// // Its description: what rule files and Sentinel's JSON read and write.
/// impl Describe for DenyAfter {
///     fn describe<F: Fields>(&mut self, f: &mut F) {
///         let resource = Name::new("resource", "resource").required().names_rule().first();
///         f.string(resource, &mut self.resource, "");
///         f.whole(Name::new("n", "n").required(), &mut self.n, 0);
///     }
/// }
///
/// impl DescribeRule for DenyAfter {
///     const KIND: &'static str = "deny_after";
///     const FILE_ORDER: u32 = 100;
///     fn problems(&self, _: usize, _: usize) -> Vec<RuleError> { Vec::new() }
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
///         seen.fetch_add(1, Ordering::Relaxed) < u64::from(rule.n)
///     }
/// }
///
///
/// let rules = UserKindRules::<DenyAfterKind>::new();
/// let sentinel = Sentinel::builder().clock(ManualClock::new(0)).kind(&rules).build();
/// let options = LoadOptions::default().kind(&rules);
/// let file = sentinel_flow_rules::parse_str_with(
///     "deny_after:\n  - {resource: api, n: 1}\n",
///     "rules.yaml",
///     &options,
/// )?;
/// let loaded = sentinel_flow_rules::apply(&sentinel, file)?;
/// assert_eq!(loaded.count("deny_after"), 1);
/// assert_eq!(rules.rules(), [DenyAfter { resource: "api".into(), n: 1 }]);
///
/// // Problems are told at their place, as a built-in kind's are.
/// let error = sentinel_flow_rules::parse_str_with(
///     "deny_after:\n  - {resource: api, n: -1}\n  - {resource: \" \", n: 1}\n",
///     "rules.yaml",
///     &options,
/// )
/// .unwrap_err();
/// assert_eq!(
///     error.lines(),
///     [
///         "rules.yaml:2:24: deny_after[0] (api): n must be a whole number in 0..=4294967295, got -1",
///         "rules.yaml:3:16: deny_after[1] ( ): resource is empty",
///     ]
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct UserKinds {
    pub(crate) kinds: Vec<Arc<dyn Registered>>,
}

impl UserKinds {
    /// No kind.
    pub fn new() -> Self {
        UserKinds::default()
    }

    /// The registered kinds' names, in the order of registration.
    pub fn names(&self) -> Vec<&'static str> {
        self.kinds.iter().map(|k| k.name()).collect()
    }

    /// Whether no kind is registered.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// The rules of kind `kind` in force, `None` when no kind registered
    /// here has that name.
    pub fn in_force(&self, kind: &str) -> Option<UserRules> {
        Some(self.find(kind)?.in_force())
    }

    pub(crate) fn find(&self, kind: &str) -> Option<&dyn Registered> {
        let found = self.kinds.iter().find(|k| k.name() == kind);
        found.map(|k| &**k)
    }

    pub(crate) fn position(&self, kind: &str) -> Option<usize> {
        self.kinds.iter().position(|k| k.name() == kind)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &dyn Registered> {
        self.kinds.iter().map(|k| &**k)
    }

    /// Every kind's name, `built_in` first: `flow, ..., deny_after`.
    pub(crate) fn all_names(&self, built_in: &[&'static str]) -> String {
        let mut names: Vec<&str> = built_in.to_vec();
        names.extend(self.names());
        names.join(", ")
    }
}

impl fmt::Debug for UserKinds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.names()).finish()
    }
}

impl PartialEq for UserKinds {
    fn eq(&self, other: &Self) -> bool {
        self.kinds.len() == other.kinds.len()
            && self
                .kinds
                .iter()
                .zip(&other.kinds)
                .all(|(a, b)| a.same(&**b))
    }
}

impl Eq for UserKinds {}

/// A registered kind, whatever its type: reads its rules from a file's
/// section or from JSON into a checked list bound to its rules.
pub(crate) trait Registered: Send + Sync {
    /// The kind's name, its file section's key.
    fn name(&self) -> &'static str;
    /// The section `nodes` read, each problem added to `problems`.
    fn read(
        &self,
        nodes: &[Node<'_>],
        problems: &mut Vec<Problem>,
        max_name_len: usize,
    ) -> UserRules;
    /// `data`, a JSON array of the kind's rules, read whole: every
    /// problem one line.
    fn decode(&self, data: &str) -> Result<UserRules, Vec<String>>;
    /// The rules in force.
    fn in_force(&self) -> UserRules;
    /// No rules.
    fn empty(&self) -> UserRules;
    fn as_any(&self) -> &dyn Any;
    /// Whether `other` registers the same rules.
    fn same(&self, other: &dyn Registered) -> bool;
}

/// A whole list of one registered kind's rules, whatever its type, bound
/// to the rules it replaces when loaded.
pub(crate) trait List: Send + Sync {
    fn name(&self) -> &'static str;
    fn file_order(&self) -> u32;
    fn len(&self) -> usize;
    fn rendered(&self) -> Vec<Rendered>;
    fn json(&self) -> Value;
    fn check(&self) -> Result<(), RuleErrors>;
    fn load(&self) -> Result<(), RuleErrors>;
    fn as_any(&self) -> &dyn Any;
    fn same(&self, other: &dyn List) -> bool;
    fn debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

/// One kind's whole new rule list, of a kind an application registered
/// (see [`UserKinds`]): what [`RuleChange::User`](crate::RuleChange::User)
/// holds. Equal lists are of the same registered rules and equal rules.
#[derive(Clone)]
pub struct UserRules(pub(crate) Arc<dyn List>);

impl UserRules {
    /// The kind's name.
    pub fn kind(&self) -> &'static str {
        self.0.name()
    }

    /// How many rules.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.len() == 0
    }

    pub(crate) fn file_order(&self) -> u32 {
        self.0.file_order()
    }

    pub(crate) fn rendered(&self) -> Vec<Rendered> {
        self.0.rendered()
    }

    pub(crate) fn json(&self) -> Value {
        self.0.json()
    }

    /// Every problem its kind's rules would refuse the list for.
    pub(crate) fn check(&self) -> Result<(), RuleErrors> {
        self.0.check()
    }

    /// Replaces the kind's rules with the list, after
    /// [`check`](Self::check).
    pub(crate) fn load(&self) -> Result<(), RuleErrors> {
        self.0.load()
    }
}

impl fmt::Debug for UserRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.debug(f)
    }
}

impl PartialEq for UserRules {
    fn eq(&self, other: &Self) -> bool {
        self.0.same(&*other.0)
    }
}
