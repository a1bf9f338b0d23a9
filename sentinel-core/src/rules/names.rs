//! The names each rule mentions (resources, contexts, origins): checked
//! against the instance's name length limit when rules are loaded, and
//! reserved then, so that no cap can leave a rule without its node.

use crate::authority::AuthorityRule;
use crate::degrade::DegradeRule;
use crate::flow::{FlowRule, FlowStrategy};
use crate::hotspot::ParamFlowRule;
use crate::rule::RuleError;
use crate::system::SystemRule;

/// What a name in a rule names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NameOf {
    /// A resource.
    Resource,
    /// A named context (a chain rule's `ref_resource`).
    Context,
    /// An origin of the rule's resource.
    Origin,
}

/// One name a rule mentions: its field, what it names, the name.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RuleName<'r> {
    pub(crate) field: &'static str,
    pub(crate) of: NameOf,
    pub(crate) name: &'r str,
}

impl<'r> RuleName<'r> {
    fn resource(name: &'r str) -> Self {
        RuleName {
            field: "resource",
            of: NameOf::Resource,
            name,
        }
    }
}

/// The names of one rule kind's rule, its resource first.
pub(crate) type NamesOf<R> = for<'r> fn(&'r R) -> Vec<RuleName<'r>>;

pub(crate) fn flow(rule: &FlowRule) -> Vec<RuleName<'_>> {
    let mut names = vec![RuleName::resource(&rule.resource)];
    if rule.names_origin() {
        names.push(RuleName {
            field: "limit_app",
            of: NameOf::Origin,
            name: &rule.limit_app,
        });
    }
    let reference = rule.ref_resource.as_deref().map(str::trim);
    let of = match rule.strategy {
        FlowStrategy::Direct => None,
        FlowStrategy::Relate => Some(NameOf::Resource),
        FlowStrategy::Chain => Some(NameOf::Context),
    };
    if let (Some(of), Some(name)) = (of, reference.filter(|r| !r.is_empty())) {
        names.push(RuleName {
            field: "ref_resource",
            of,
            name,
        });
    }
    names
}

pub(crate) fn degrade(rule: &DegradeRule) -> Vec<RuleName<'_>> {
    vec![RuleName::resource(&rule.resource)]
}

pub(crate) fn param(rule: &ParamFlowRule) -> Vec<RuleName<'_>> {
    vec![RuleName::resource(&rule.resource)]
}

pub(crate) fn authority(rule: &AuthorityRule) -> Vec<RuleName<'_>> {
    let origins = rule.limit_app.iter().map(|origin| RuleName {
        field: "limit_app",
        of: NameOf::Origin,
        name: origin,
    });
    std::iter::once(RuleName::resource(&rule.resource))
        .chain(origins)
        .collect()
}

pub(crate) fn system(_: &SystemRule) -> Vec<RuleName<'_>> {
    Vec::new()
}

/// The most of an over-long resource name an error repeats.
const QUOTED_BYTES: usize = 64;

/// An error per name of rule `kind[index]` longer than `max_name_len`
/// bytes.
pub(crate) fn too_long(
    kind: &'static str,
    index: usize,
    names: &[RuleName<'_>],
    max_name_len: usize,
) -> Vec<RuleError> {
    let resource = names.first().map_or("", |n| n.name);
    names
        .iter()
        .filter(|n| n.name.len() > max_name_len)
        .map(|n| {
            let message = format!(
                "is {} bytes long, over the limit of {max_name_len} (max_name_len)",
                n.name.len()
            );
            RuleError::new(kind, index, &quoted(resource), n.field, message)
        })
        .collect()
}

/// `name`, cut to its first [`QUOTED_BYTES`] (on a character boundary)
/// with `...` when longer: an error need not repeat a megabyte.
fn quoted(name: &str) -> String {
    if name.len() <= QUOTED_BYTES {
        return name.to_owned();
    }
    let mut end = QUOTED_BYTES;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &name[..end])
}

macro_rules! name_problems {
    ($rule:ty, $kind:literal, $names:path) => {
        impl $rule {
            /// The rule's names (resource, and each `ref_resource` or
            /// `limit_app` origin it has) longer than `max_name_len` bytes,
            /// as errors of the rule at `index`. An instance refuses them
            /// when loading, against its
            /// [`max_name_len`](crate::SentinelBuilder::max_name_len);
            /// [`problems`](Self::problems) leaves them out, since the limit
            /// is the instance's.
            pub fn name_problems(&self, index: usize, max_name_len: usize) -> Vec<RuleError> {
                too_long($kind, index, &$names(self), max_name_len)
            }
        }
    };
}

name_problems!(FlowRule, "flow", flow);
name_problems!(DegradeRule, "degrade", degrade);
name_problems!(ParamFlowRule, "param_flow", param);
name_problems!(AuthorityRule, "authority", authority);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authority::AuthorityStrategy;

    #[test]
    fn every_name_of_a_rule_is_listed() {
        let mut rule = FlowRule::new("a", 1.0);
        rule.limit_app = "app".into();
        rule.strategy = FlowStrategy::Chain;
        rule.ref_resource = Some(" ctx ".into());
        let names: Vec<_> = flow(&rule).iter().map(|n| (n.of, n.name)).collect();
        assert_eq!(
            names,
            [
                (NameOf::Resource, "a"),
                (NameOf::Origin, "app"),
                (NameOf::Context, "ctx")
            ]
        );
        rule.limit_app = "other".into();
        rule.strategy = FlowStrategy::Relate;
        let names: Vec<_> = flow(&rule).iter().map(|n| (n.of, n.name)).collect();
        assert_eq!(names, [(NameOf::Resource, "a"), (NameOf::Resource, "ctx")]);

        let rule = AuthorityRule::new("b", AuthorityStrategy::White, ["x", "y"]);
        assert_eq!(authority(&rule).len(), 3);
    }

    #[test]
    fn long_names_are_refused_and_quoted_short() {
        let long = "é".repeat(600);
        let mut rule = FlowRule::new(long.clone(), 1.0);
        rule.strategy = FlowStrategy::Relate;
        rule.ref_resource = Some("r".repeat(1_025));
        let errors = rule.name_problems(3, 1_024);
        let fields: Vec<_> = errors.iter().map(|e| e.field).collect();
        assert_eq!(fields, ["resource", "ref_resource"]);
        assert_eq!(
            errors[0].message,
            "is 1200 bytes long, over the limit of 1024 (max_name_len)"
        );
        assert_eq!(errors[0].resource, format!("{}...", "é".repeat(32)));
        assert_eq!(rule.name_problems(3, 1_100).len(), 1);
        assert!(rule.name_problems(3, 1_200).is_empty());
        assert!(FlowRule::new("ok", 1.0).name_problems(0, 2).is_empty());
    }
}
