//! A registered kind's type behind the erased traits of `mod.rs`: its
//! sections and JSON read by the generic readers, its lists written by
//! the generic writers and loaded into its rules.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use sentinel_flow_core::describe::{Describe, DescribeRule, Fields};
use sentinel_flow_core::{RuleError, RuleErrors, UserKind, UserKindRules};
use serde_json::Value;

use super::{List, Registered, UserKinds, UserRules};
use crate::change::KIND_NAMES;
use crate::error::Problem;
use crate::parse::read_section;
use crate::parse::tree::Node;
use crate::render::fields::{Rendered, fields};

impl UserKinds {
    /// Registers `rules`, the rules of kind `K`: its file section and its
    /// JSON are named by its rule's [`DescribeRule::KIND`] (which should be
    /// `K::NAME`). A kind named as a built-in kind, or as one registered
    /// before, is left out (and logged).
    pub fn kind<K>(mut self, rules: &UserKindRules<K>) -> Self
    where
        K: UserKind,
        K::Rule: DescribeRule,
    {
        let name = <K::Rule as DescribeRule>::KIND;
        if KIND_NAMES.contains(&name) || self.find(name).is_some() {
            tracing::warn!(
                kind = name,
                "sentinel-flow-rules: a user kind named as a built-in kind or one registered before is left out"
            );
            return self;
        }
        self.kinds.push(Arc::new(Typed(rules.clone())));
        self
    }
}

impl UserRules {
    /// `list`, the new rules of `rules`' kind.
    pub fn new<K>(rules: &UserKindRules<K>, list: Vec<K::Rule>) -> Self
    where
        K: UserKind,
        K::Rule: DescribeRule,
    {
        UserRules(Arc::new(Bound {
            rules: rules.clone(),
            list,
        }))
    }

    /// The rules, when they are of kind `K`.
    pub fn rules<K>(&self) -> Option<&[K::Rule]>
    where
        K: UserKind,
        K::Rule: DescribeRule,
    {
        let bound = self.0.as_any().downcast_ref::<Bound<K>>()?;
        Some(&bound.list)
    }
}

/// A registered kind's rules.
struct Typed<K: UserKind>(UserKindRules<K>);

impl<K> Registered for Typed<K>
where
    K: UserKind,
    K::Rule: DescribeRule,
{
    fn name(&self) -> &'static str {
        <K::Rule as DescribeRule>::KIND
    }

    fn read(
        &self,
        nodes: &[Node<'_>],
        problems: &mut Vec<Problem>,
        max_name_len: usize,
    ) -> UserRules {
        let checked = read_section::<Checked<K>>(nodes, problems, max_name_len);
        self.bind(checked.into_iter().map(|c| c.0).collect())
    }

    fn decode(&self, data: &str) -> Result<UserRules, Vec<String>> {
        let checked = crate::json::from_json::<Checked<K>>(data)?;
        Ok(self.bind(checked.into_iter().map(|c| c.0).collect()))
    }

    fn in_force(&self) -> UserRules {
        self.bind(self.0.rules())
    }

    fn empty(&self) -> UserRules {
        self.bind(Vec::new())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn same(&self, other: &dyn Registered) -> bool {
        other
            .as_any()
            .downcast_ref::<Self>()
            .is_some_and(|other| self.0.same(&other.0))
    }
}

impl<K> Typed<K>
where
    K: UserKind,
    K::Rule: DescribeRule,
{
    fn bind(&self, list: Vec<K::Rule>) -> UserRules {
        UserRules::new(&self.0, list)
    }
}

/// A list and the rules it replaces.
struct Bound<K: UserKind> {
    rules: UserKindRules<K>,
    list: Vec<K::Rule>,
}

impl<K> List for Bound<K>
where
    K: UserKind,
    K::Rule: DescribeRule,
{
    fn name(&self) -> &'static str {
        <K::Rule as DescribeRule>::KIND
    }

    fn file_order(&self) -> u32 {
        <K::Rule as DescribeRule>::FILE_ORDER
    }

    fn len(&self) -> usize {
        self.list.len()
    }

    fn rendered(&self) -> Vec<Rendered> {
        self.list.iter().map(fields).collect()
    }

    fn json(&self) -> Value {
        crate::json::to_json(&self.list)
    }

    fn check(&self) -> Result<(), RuleErrors> {
        UserKindRules::<K>::check(&self.list)
    }

    fn load(&self) -> Result<(), RuleErrors> {
        self.rules.load(self.list.clone())
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn same(&self, other: &dyn List) -> bool {
        other
            .as_any()
            .downcast_ref::<Self>()
            .is_some_and(|other| self.rules.same(&other.rules) && self.list == other.list)
    }

    fn debug(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserRules")
            .field("kind", &self.name())
            .field("rules", &self.list)
            .finish()
    }
}

/// A user kind's rule, described as its own description says, with the
/// problems its [`UserKindRules`] would refuse it for added to those of
/// its description: read through this, a list the codecs accept is one
/// its rules load.
struct Checked<K: UserKind>(K::Rule);

impl<K: UserKind> Clone for Checked<K> {
    fn clone(&self) -> Self {
        Checked(self.0.clone())
    }
}

impl<K: UserKind> PartialEq for Checked<K> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl<K> Default for Checked<K>
where
    K: UserKind,
    K::Rule: DescribeRule,
{
    fn default() -> Self {
        Checked(K::Rule::default())
    }
}

impl<K: UserKind> fmt::Debug for Checked<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<K> Describe for Checked<K>
where
    K: UserKind,
    K::Rule: DescribeRule,
{
    fn describe<F: Fields>(&mut self, f: &mut F) {
        self.0.describe(f)
    }
}

impl<K> DescribeRule for Checked<K>
where
    K: UserKind,
    K::Rule: DescribeRule,
{
    const KIND: &'static str = <K::Rule as DescribeRule>::KIND;
    const SENTINEL_KIND: &'static str = <K::Rule as DescribeRule>::SENTINEL_KIND;
    const FILE_ORDER: u32 = <K::Rule as DescribeRule>::FILE_ORDER;

    fn problems(&self, index: usize, max_name_len: usize) -> Vec<RuleError> {
        let mut problems = self.0.problems(index, max_name_len);
        // A field the description already found wrong is told once.
        for error in UserKindRules::<K>::problems(&self.0, index) {
            if !problems.iter().any(|p| p.field == error.field) {
                problems.push(error);
            }
        }
        problems
    }

    fn across(rules: &[Self]) -> Vec<RuleError> {
        let rules: Vec<K::Rule> = rules.iter().map(|c| c.0.clone()).collect();
        <K::Rule as DescribeRule>::across(&rules)
    }
}
