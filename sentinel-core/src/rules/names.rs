//! The names rules mention, for the instance's caps (which reserve them
//! when rules load). Each kind lists its rule's names itself
//! (`RuleKind::names`); the types are in `crate::rule::names`.

pub(crate) use crate::rule::names::NameOf;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authority::{AuthorityRule, AuthorityStrategy};
    use crate::flow::{FlowRule, FlowStrategy};

    #[test]
    fn every_name_of_a_rule_is_listed() {
        let mut rule = FlowRule::new("a", 1.0);
        rule.limit_app = "app".into();
        rule.strategy = FlowStrategy::Chain;
        rule.ref_resource = Some(" ctx ".into());
        let names: Vec<_> = rule.names().iter().map(|n| (n.of, n.name)).collect();
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
        let names: Vec<_> = rule.names().iter().map(|n| (n.of, n.name)).collect();
        assert_eq!(names, [(NameOf::Resource, "a"), (NameOf::Resource, "ctx")]);

        let rule = AuthorityRule::new("b", AuthorityStrategy::White, ["x", "y"]);
        assert_eq!(rule.names().len(), 3);
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
