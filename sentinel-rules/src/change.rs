//! `RuleChange`: one kind's whole new rule list, made from the core's list
//! of kinds. This file is the crate's only per-kind code: the readers and
//! writers (`parse/`, `render/`, `json/`) are generic over a kind's
//! described rule ([`DescribeRule`]) and reach the kinds through
//! [`Each`] and [`Make`].

use sentinel_flow_core::describe::{Commands, DescribeRule};
use sentinel_flow_core::{RuleBook, RuleErrors, Sentinel};

use crate::parse::file::RuleFile;
use crate::user::{UserKinds, UserRules};

/// What is done with one kind's rules, whatever the kind.
pub(crate) trait Each {
    /// What it gives.
    type Out;
    /// Does it with `rules`.
    fn each<R: DescribeRule>(self, rules: &[R]) -> Self::Out;
    /// Does it with the rules of a kind an application registered.
    fn user(self, rules: &UserRules) -> Self::Out;
}

/// How one kind's rules are made (read from a document), whatever the kind.
pub(crate) trait Make {
    /// Why they could not be.
    type Error;
    /// Makes them.
    fn make<R: DescribeRule>(self) -> Result<Vec<R>, Self::Error>;
}

/// One kind, as the codecs and commands name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct KindInfo {
    /// The kind's name (`flow`, `param_flow`): a rule file's key,
    /// [`RuleChange::kind`], `getRules?type=`.
    pub name: &'static str,
    /// The kind's rules, as the docs name them (`Hot-parameter rules.`).
    pub docs: &'static str,
    /// Sentinel's commands of the kind's own; `None`: `getRules` and
    /// `setRules` serve it by `type`.
    pub commands: Option<Commands>,
}

/// `infos` sorted by their rule file order (the first of each pair).
const fn by_file_order<const N: usize>(mut infos: [(u32, KindInfo); N]) -> [KindInfo; N] {
    let mut i = 1;
    while i < N {
        let mut j = i;
        while j > 0 && infos[j - 1].0 > infos[j].0 {
            let swap = infos[j - 1];
            infos[j - 1] = infos[j];
            infos[j] = swap;
            j -= 1;
        }
        i += 1;
    }
    let mut out = [KindInfo {
        name: "",
        docs: "",
        commands: None,
    }; N];
    let mut i = 0;
    while i < N {
        out[i] = infos[i].1;
        i += 1;
    }
    out
}

/// The names of `infos`, in order.
const fn names<const N: usize>(infos: [KindInfo; N]) -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = infos[i].name;
        i += 1;
    }
    out
}

macro_rules! rule_change {
    ($($field:ident $variant:ident [$($kind:tt)*] [$($rule:tt)*] $accessor:ident $name:literal $exception:literal
        $doc:literal $book_doc:literal;)*) => {
        /// The new rules of one kind, replacing all of that kind's rules (as
        /// Sentinel's `setRules` does); the other kinds stay as they are.
        #[non_exhaustive]
        #[derive(Clone, Debug)]
        pub enum RuleChange {
            $(
                #[doc = $book_doc]
                $variant(Vec<sentinel_flow_core::$($rule)*>),
            )*
            /// Rules of a kind an application registered
            /// ([`UserKinds`]).
            User(UserRules),
        }

        /// How many kinds there are.
        pub(crate) const KIND_COUNT: usize = [$($name),*].len();

        /// Every kind, in the order of a rule file and of the docs.
        pub(crate) const KIND_INFOS: [KindInfo; KIND_COUNT] = by_file_order([$((
            <sentinel_flow_core::$($rule)* as DescribeRule>::FILE_ORDER,
            KindInfo {
                name: $name,
                docs: $book_doc,
                commands: <sentinel_flow_core::$($rule)* as DescribeRule>::COMMANDS,
            },
        )),*]);

        /// Every kind's name, in the order of a rule file and of the docs.
        pub(crate) const KIND_NAMES: [&str; KIND_COUNT] = names(KIND_INFOS);

        impl RuleChange {
            /// The kind, as the file's top-level key: `flow`, `degrade`,
            /// ... (every kind the core lists, in file order).
            pub fn kind(&self) -> &'static str {
                match self {
                    $(RuleChange::$variant(_) => $name,)*
                    RuleChange::User(rules) => rules.kind(),
                }
            }

            /// Does `each` with the rules, whatever their kind.
            pub(crate) fn each<E: Each>(&self, each: E) -> E::Out {
                match self {
                    $(RuleChange::$variant(rules) => each.each(rules),)*
                    RuleChange::User(rules) => each.user(rules),
                }
            }

            /// The rules of kind `kind` made by `make`; `None` when no kind
            /// has that name.
            pub(crate) fn make<M: Make>(kind: &str, make: M) -> Option<Result<Self, M::Error>> {
                match kind {
                    $($name => Some(make.make().map(RuleChange::$variant)),)*
                    _ => None,
                }
            }

            /// Whether `file` holds exactly these rules for this kind.
            pub(crate) fn is_in(&self, file: &RuleFile) -> bool {
                match self {
                    $(RuleChange::$variant(rules) => *rules == file.book.$field,)*
                    RuleChange::User(rules) => file.user_kind(rules.kind()) == Some(rules),
                }
            }

            /// `file` with this kind's rules replaced.
            pub(crate) fn put_in(&self, file: &mut RuleFile) {
                self.clone().move_into_file(file)
            }

            /// `file` with this kind's rules moved in.
            pub(crate) fn move_into_file(self, file: &mut RuleFile) {
                match self {
                    $(RuleChange::$variant(rules) => file.book.$field = rules,)*
                    RuleChange::User(rules) => {
                        let lists = &mut file.user_kinds;
                        match lists.iter_mut().find(|l| l.kind() == rules.kind()) {
                            Some(list) => *list = rules,
                            None => lists.push(rules),
                        }
                    }
                }
            }

            /// Every kind of `book`, in the order of a rule file.
            pub(crate) fn all_of(book: &RuleBook) -> Vec<RuleChange> {
                let mut all = vec![$((
                    <sentinel_flow_core::$($rule)* as DescribeRule>::FILE_ORDER,
                    RuleChange::$variant(book.$field.clone()),
                )),*];
                all.sort_by_key(|(order, _)| *order);
                all.into_iter().map(|(_, change)| change).collect()
            }

            /// The rules of kind `kind` in force on `sentinel`; `None` when no
            /// built-in kind has that name.
            pub fn in_force(sentinel: &Sentinel, kind: &str) -> Option<RuleChange> {
                match kind {
                    $($name => Some(RuleChange::$variant(sentinel.$accessor().rules())),)*
                    _ => None,
                }
            }

            /// [`in_force`](Self::in_force), the kinds of `user_kinds`
            /// included.
            pub fn in_force_with(
                sentinel: &Sentinel,
                user_kinds: &UserKinds,
                kind: &str,
            ) -> Option<RuleChange> {
                Self::in_force(sentinel, kind)
                    .or_else(|| user_kinds.in_force(kind).map(RuleChange::User))
            }

            /// Loads the rules into `sentinel`'s manager of their kind (the
            /// other kinds stay), or a user kind's into its registered
            /// rules; on error nothing changes.
            pub fn load_into(self, sentinel: &Sentinel) -> Result<(), RuleErrors> {
                match self {
                    $(RuleChange::$variant(rules) => sentinel.$accessor().load(rules),)*
                    RuleChange::User(rules) => rules.check().and_then(|()| rules.load()),
                }
            }
        }
    };
}
sentinel_flow_core::for_each_rule_kind!(rule_change);

impl RuleChange {
    /// How many rules.
    pub fn len(&self) -> usize {
        struct Len;
        impl Each for Len {
            type Out = usize;
            fn each<R: DescribeRule>(self, rules: &[R]) -> usize {
                rules.len()
            }
            fn user(self, rules: &UserRules) -> usize {
                rules.len()
            }
        }
        self.each(Len)
    }

    /// Whether the kind is left with no rules.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every kind: its name, how its rules are named, Sentinel's commands
    /// of its own; in the order of a rule file.
    pub fn kinds() -> &'static [KindInfo] {
        &KIND_INFOS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_come_in_the_order_of_a_rule_file_not_the_chain() {
        assert_eq!(
            KIND_NAMES,
            [
                "flow",
                "degrade",
                "system",
                "authority",
                "param_flow",
                "adaptive",
                "api_definitions",
                "gateway"
            ]
        );
        let own: Vec<_> = RuleChange::kinds()
            .iter()
            .filter_map(|k| Some((k.name, k.commands?.get)))
            .collect();
        assert_eq!(
            own,
            [
                ("param_flow", "getParamFlowRules"),
                ("api_definitions", "gateway/getApiDefinitions"),
                ("gateway", "gateway/getRules")
            ]
        );
        let book = RuleBook::default();
        let order: Vec<_> = RuleChange::all_of(&book)
            .iter()
            .map(RuleChange::kind)
            .collect();
        assert_eq!(order, KIND_NAMES);
    }
}
