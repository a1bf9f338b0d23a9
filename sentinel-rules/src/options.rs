//! `LoadOptions`: the limits a rule file is read under, and the kinds of
//! rules an application adds.

use sentinel_flow_core::describe::DescribeRule;
use sentinel_flow_core::{UserKind, UserKindRules};

use crate::user::UserKinds;

/// The largest file read by default: 4 MiB.
pub const DEFAULT_MAX_SIZE: usize = 4 << 20;

/// The deepest nesting of lists and mappings accepted by default. A rule
/// file needs 5 (file, kind list, rule, item list, item).
pub const DEFAULT_MAX_DEPTH: usize = 16;

/// How a rule file is read: size and nesting limits, and whether an empty
/// file means "no rules".
///
/// ```
/// use sentinel_flow_rules::LoadOptions;
///
/// let options = LoadOptions::default().max_size(64 * 1024).allow_empty(true);
/// assert_eq!(options.get_max_size(), 64 * 1024);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadOptions {
    max_size: usize,
    max_depth: usize,
    allow_empty: bool,
    max_name_len: Option<usize>,
    user_kinds: UserKinds,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            max_size: DEFAULT_MAX_SIZE,
            max_depth: DEFAULT_MAX_DEPTH,
            allow_empty: false,
            max_name_len: None,
            user_kinds: UserKinds::new(),
        }
    }
}

impl LoadOptions {
    /// Files larger than `bytes` are refused (default [`DEFAULT_MAX_SIZE`]).
    pub fn max_size(mut self, bytes: usize) -> Self {
        self.max_size = bytes;
        self
    }

    /// Lists and mappings nested deeper than `depth` are refused (default
    /// [`DEFAULT_MAX_DEPTH`]).
    pub fn max_depth(mut self, depth: usize) -> Self {
        self.max_depth = depth;
        self
    }

    /// Whether a file with no content (nothing, or only comments and blank
    /// lines) means "no rules" (`true`) or is refused (`false`, the default:
    /// an empty file is more often a write caught halfway than an intent).
    pub fn allow_empty(mut self, allow: bool) -> Self {
        self.allow_empty = allow;
        self
    }

    /// Names (resources, `ref_resource`, `limit_app` origins,
    /// `track_percentiles` entries) longer than `bytes` are refused at their
    /// line and column. Unset, the limit is the instance's
    /// ([`Sentinel::max_name_len`](sentinel_flow_core::Sentinel::max_name_len))
    /// for a [`RuleWatcher`](crate::RuleWatcher), and
    /// [`DEFAULT_MAX_NAME_LEN`](sentinel_flow_core::DEFAULT_MAX_NAME_LEN) for the
    /// `parse_*` and `load_file` functions, which know no instance: set it
    /// to the instance's when that differs, or [`apply`](crate::apply)
    /// refuses the file without positions.
    pub fn max_name_len(mut self, bytes: usize) -> Self {
        self.max_name_len = Some(bytes);
        self
    }

    /// Reads (and writes back) the rules of `rules`' kind, a kind the
    /// application adds: a rule file's section named by its rule's
    /// [`DescribeRule::KIND`], or its key in a store's Sentinel JSON
    /// ([`SentinelKeys::key`](crate::source::SentinelKeys::key)), is read
    /// by the same readers as a built-in kind's, under the same limits
    /// (the file's size, nesting, problems listed and name length), each
    /// rule checked as [`UserKindRules::load`] checks it. A file is
    /// applied whole: a bad rule of any kind changes no kind, and a good
    /// file replaces every registered kind's rules (a kind it has no
    /// section for is left with none). Without it, such a section is an
    /// unknown key. See [`UserKinds`] for an example.
    pub fn kind<K>(mut self, rules: &UserKindRules<K>) -> Self
    where
        K: UserKind,
        K::Rule: DescribeRule,
    {
        self.user_kinds = self.user_kinds.kind(rules);
        self
    }

    /// Reads the kinds of `kinds` besides the built-in ones (replacing
    /// those registered before); see [`kind`](Self::kind).
    pub fn user_kinds(mut self, kinds: UserKinds) -> Self {
        self.user_kinds = kinds;
        self
    }

    /// The kinds an application registered.
    pub fn get_user_kinds(&self) -> &UserKinds {
        &self.user_kinds
    }

    /// The name length limit, bytes.
    pub fn get_max_name_len(&self) -> usize {
        self.max_name_len
            .unwrap_or(sentinel_flow_core::DEFAULT_MAX_NAME_LEN)
    }

    /// These options, with the name length limit of `sentinel` unless one
    /// was set.
    pub(crate) fn for_instance(&self, sentinel: &sentinel_flow_core::Sentinel) -> Self {
        LoadOptions {
            max_name_len: Some(self.max_name_len.unwrap_or(sentinel.max_name_len())),
            ..self.clone()
        }
    }

    /// The size limit, bytes.
    pub fn get_max_size(&self) -> usize {
        self.max_size
    }

    /// The nesting limit.
    pub fn get_max_depth(&self) -> usize {
        self.max_depth
    }

    /// Whether an empty file means "no rules".
    pub fn get_allow_empty(&self) -> bool {
        self.allow_empty
    }
}
