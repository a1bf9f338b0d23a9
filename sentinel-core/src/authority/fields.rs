//! An origin white or black list's fields, for the codecs: each field's
//! name in a rule file and in Sentinel's JSON (where `limitApp` is the
//! origins joined by commas), and the strategies' words and numbers.

use super::{AuthorityRule, AuthorityStrategy};
use crate::rule::RuleError;
use crate::rule::describe::{Choice, Describe, DescribeRule, Fields, Name};

const STRATEGIES: &[Choice<AuthorityStrategy>] = &[
    Choice::new(AuthorityStrategy::White, "white", 0, "white list"),
    Choice::new(AuthorityStrategy::Black, "black", 1, "black list"),
];

const NO_REGEX: &str = "regular-expression resources are not supported by sentinel-rs; send false";

impl Describe for AuthorityRule {
    fn describe<F: Fields>(&mut self, f: &mut F) {
        f.refused(Name::json("regex"), NO_REGEX);
        f.optional_whole(Name::new("id", "id").last(), &mut self.id);
        let resource = Name::new("resource", "resource").required().names_rule();
        f.string(resource, &mut self.resource, "");
        let strategy = Name::new("strategy", "strategy");
        f.choice(
            strategy,
            &mut self.strategy,
            AuthorityStrategy::White,
            STRATEGIES,
        );
        let origins = Name::new("limit_app", "limitApp").required();
        f.names(origins, &mut self.limit_app, "origin");
    }
}

impl DescribeRule for AuthorityRule {
    const KIND: &'static str = super::rule::KIND_NAME;
    const FILE_ORDER: u32 = 3;

    fn problems(&self, index: usize, max_name_len: usize) -> Vec<RuleError> {
        let mut problems = AuthorityRule::problems(self, index);
        problems.extend(self.name_problems(index, max_name_len));
        problems
    }
}
