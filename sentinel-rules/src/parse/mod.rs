//! A rule file's text to a [`RuleFile`]: the spanned tree (`tree`), what
//! scalars mean (`scalar`), one rule's fields read as its kind's
//! description asks (`fields`, the argument values of `value`), and each
//! kind's list (`rules`).

pub(crate) mod document;
mod fast;
mod fields;
pub(crate) mod file;
mod percentiles;
mod rules;
pub(crate) mod scalar;
pub(crate) mod tree;
mod value;

use sentinel_flow_core::describe::DescribeRule;

use crate::change::{KIND_NAMES, Make, RuleChange};
use crate::error::{FileError, Position, Problem};
use crate::options::LoadOptions;
use crate::user::{UserKinds, UserRules};
pub use file::RuleFile;
use tree::{Node, Value};

/// The maps that find repeated keys and names: keyed by text from the
/// file, seeded per process.
pub(crate) type Map<K, V> = std::collections::HashMap<K, V, foldhash::quality::RandomState>;

/// The most problems listed for one file; a file with more is mostly not a
/// rule file, and the first ones say so.
const MAX_PROBLEMS: usize = 200;

/// A kind's section read from its nodes, whatever the kind: every readable
/// rule, each problem added to `problems`.
pub(crate) fn read_section<R: DescribeRule>(
    nodes: &[Node<'_>],
    problems: &mut Vec<Problem>,
    max_name_len: usize,
) -> Vec<R> {
    let read = rules::Read {
        nodes,
        problems,
        max_name_len,
    };
    match read.make::<R>() {
        Ok(rules) => rules,
        Err(never) => match never {},
    }
}

pub(crate) fn parse(text: &str, file: &str, options: &LoadOptions) -> Result<RuleFile, FileError> {
    if text.len() > options.get_max_size() {
        return Err(too_large(file, options));
    }
    // A byte order mark is not content: editors on Windows write one.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut problems = Vec::new();
    let root = match document::build(text, options.get_max_depth(), &mut problems) {
        Ok(root) => root,
        Err(fatal) => {
            problems.push(fatal);
            problems.sort_by_key(|p| p.position);
            return Err(FileError::new(file, problems));
        }
    };
    let root = root.filter(|root| !is_null(root));
    let Some(root) = root else {
        if options.get_allow_empty() && problems.is_empty() {
            let mut file = RuleFile::default();
            let kinds = options.get_user_kinds();
            file.user_kinds = kinds.iter().map(|kind| kind.empty()).collect();
            return Ok(file);
        }
        let message = "the file is empty (no rules); an empty file is refused \
                       unless LoadOptions::allow_empty is set";
        problems.push(Problem::new(None, message));
        return Err(FileError::new(file, problems));
    };
    let max_name_len = options.get_max_name_len();
    let kinds = options.get_user_kinds();
    let rule_file = document(&root, max_name_len, kinds, &mut problems);
    if problems.is_empty() {
        return Ok(rule_file);
    }
    problems.sort_by_key(|p| p.position);
    if problems.len() > MAX_PROBLEMS {
        let more = problems.len() - MAX_PROBLEMS;
        problems.truncate(MAX_PROBLEMS);
        problems.push(Problem::new(
            None,
            format!("... and {more} more problem(s)"),
        ));
    }
    Err(FileError::new(file, problems))
}

pub(crate) fn too_large(file: &str, options: &LoadOptions) -> FileError {
    FileError::one(
        file,
        None,
        format!(
            "the file is larger than the limit of {} bytes (LoadOptions::max_size)",
            options.get_max_size()
        ),
    )
}

fn is_null(node: &Node<'_>) -> bool {
    matches!(&node.value, Value::Scalar { text, plain } if scalar::is_null(text, *plain))
}

fn document(
    root: &Node<'_>,
    max_name_len: usize,
    user_kinds: &UserKinds,
    problems: &mut Vec<Problem>,
) -> RuleFile {
    let mut file = RuleFile::default();
    // Each registered kind's list, in the order of registration.
    let mut user: Vec<Option<UserRules>> = user_kinds.iter().map(|_| None).collect();
    let kinds = user_kinds.all_names(&KIND_NAMES);
    let Value::Map(entries) = &root.value else {
        problems.push(Problem::new(
            Some(root.pos),
            format!(
                "a rule file is a mapping with keys version, {kinds}, track_percentiles; got {}",
                root.value.describe()
            ),
        ));
        return file;
    };
    let mut seen: Map<&str, Position> = Map::default();
    for (key, value) in entries {
        let Value::Scalar { text: name, .. } = &key.value else {
            if !matches!(key.value, Value::Invalid) {
                problems.push(Problem::new(
                    Some(key.pos),
                    "a top-level key must be a string",
                ));
            }
            continue;
        };
        if let Some(first) = seen.get(name.as_ref()) {
            problems.push(Problem::new(
                Some(key.pos),
                format!(
                    "duplicate key {name} (first at {}:{})",
                    first.line, first.column
                ),
            ));
            continue;
        }
        seen.insert(name, key.pos);
        let rules = |problems: &mut Vec<Problem>| -> &[Node<'_>] {
            match &value.value {
                Value::Seq(items) => items,
                _ if is_null(value) => &[],
                Value::Invalid => &[],
                other => {
                    problems.push(Problem::new(
                        Some(value.pos),
                        format!("{name} must be a list of rules, got {}", other.describe()),
                    ));
                    &[]
                }
            }
        };
        match name.as_ref() {
            "version" => match &value.value {
                Value::Scalar { text, .. } if !is_null(value) => {
                    file.version = Some(text.to_string())
                }
                Value::Scalar { .. } | Value::Invalid => {}
                other => problems.push(Problem::new(
                    Some(value.pos),
                    format!(
                        "version must be a scalar (a number or a string), got {}",
                        other.describe()
                    ),
                )),
            },
            "track_percentiles" => {
                file.track_percentiles = percentiles::names(value, max_name_len, problems)
            }
            kind if KIND_NAMES.contains(&kind) => {
                let read = rules::Read {
                    nodes: rules(problems),
                    problems,
                    max_name_len,
                };
                if let Some(Ok(change)) = RuleChange::make(kind, read) {
                    change.move_into_file(&mut file);
                }
            }
            kind if user_kinds.position(kind).is_some() => {
                let nodes = rules(problems);
                let at = user_kinds.position(kind);
                let found = at.zip(user_kinds.find(kind));
                if let Some((at, registered)) = found {
                    user[at] = Some(registered.read(nodes, problems, max_name_len));
                }
            }
            other => problems.push(Problem::new(
                Some(key.pos),
                format!("unknown key {other:?} (known: version, {kinds}, track_percentiles)"),
            )),
        }
    }
    let lists = user_kinds.iter().zip(user);
    file.user_kinds = lists
        .map(|(kind, list)| list.unwrap_or_else(|| kind.empty()))
        .collect();
    file
}
