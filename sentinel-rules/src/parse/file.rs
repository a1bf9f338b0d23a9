//! `RuleFile`: what a rule file holds, read and checked.

use sentinel_flow_core::RuleBook;

use crate::user::UserRules;

/// The rules of a file, and its `version` if it has one.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct RuleFile {
    /// The file's `version:` value as written, if any; reported to
    /// listeners, never interpreted.
    pub version: Option<String>,
    /// Every rule of the file, by kind.
    pub book: RuleBook,
    /// The resources whose response-time percentiles the file turns on
    /// (its `track_percentiles` list; see
    /// [`Sentinel::track_percentiles_from_rules`](sentinel_flow_core::Sentinel::track_percentiles_from_rules)).
    pub track_percentiles: Vec<String>,
    /// The rules of the kinds an application registered
    /// ([`LoadOptions::kind`](crate::LoadOptions::kind)), one list per registered kind in the order
    /// of registration (empty for a kind the file has no section for: a
    /// file holds every kind's rules).
    pub user_kinds: Vec<UserRules>,
}

impl RuleFile {
    /// A file of `book` with `version`, tracking no percentiles.
    pub fn new(version: Option<String>, book: RuleBook) -> Self {
        RuleFile {
            version,
            book,
            track_percentiles: Vec::new(),
            user_kinds: Vec::new(),
        }
    }

    /// The list of user kind `kind`, if the file holds one.
    pub fn user_kind(&self, kind: &str) -> Option<&UserRules> {
        self.user_kinds.iter().find(|rules| rules.kind() == kind)
    }
}
