//! A kind's list of rules: each rule read as its description asks
//! (`fields.rs`), then the problems between the rules of the list, each
//! at the field it names.

use std::convert::Infallible;

use sentinel_flow_core::describe::DescribeRule;

use super::fields::{RuleFields, path_position};
use super::tree::Node;
use crate::change::Make;
use crate::error::{Problem, RuleRef};

/// The rules of one kind's section: every readable rule, each problem
/// added to `problems`.
pub(super) struct Read<'a, 'n> {
    pub(super) nodes: &'n [Node<'n>],
    pub(super) problems: &'a mut Vec<Problem>,
    pub(super) max_name_len: usize,
}

impl Make for Read<'_, '_> {
    type Error = Infallible;

    fn make<R: DescribeRule>(self) -> Result<Vec<R>, Infallible> {
        let Read {
            nodes,
            problems,
            max_name_len,
        } = self;
        let mut rules = Vec::with_capacity(nodes.len());
        let mut read_from = Vec::with_capacity(nodes.len());
        for (index, node) in nodes.iter().enumerate() {
            if let Some(rule) = rule::<R>(index, node, max_name_len, problems) {
                rules.push(rule);
                read_from.push(index);
            }
        }
        for error in R::across(&rules) {
            let index = read_from[error.index];
            let node = &nodes[index];
            problems.push(Problem {
                rule: Some(RuleRef {
                    kind: R::KIND,
                    index,
                    resource: Some(error.resource.clone()),
                }),
                field: Some(error.field.to_owned()),
                ..Problem::new(
                    Some(path_position(node, error.field).unwrap_or(node.pos)),
                    error.message,
                )
            });
        }
        Ok(rules)
    }
}

/// Rule `index` of kind `R` from its node, names limited to
/// `max_name_len` bytes; `None` (reported) when it is not a mapping.
fn rule<R: DescribeRule>(
    index: usize,
    node: &Node<'_>,
    max_name_len: usize,
    problems: &mut Vec<Problem>,
) -> Option<R> {
    let mut fields = RuleFields::rule(R::KIND, index, node, problems)?;
    let mut rule = R::default();
    rule.describe(&mut fields);
    let errors = rule.problems(index, max_name_len);
    fields.finish(R::KIND, index, node, &rule, errors, problems);
    Some(rule)
}
