//! A rule file's text to a [`RuleFile`]: the spanned tree (`tree`), what
//! scalars mean (`scalar`), one rule's fields read as its kind's
//! description asks (`fields`, the argument values of `value`), and each
//! kind's list (`rules`).

pub(crate) mod document;
mod fast;
mod fields;
mod percentiles;
mod rules;
pub(crate) mod scalar;
pub(crate) mod tree;
mod value;

use sentinel_flow_core::RuleBook;

use crate::change::{KIND_NAMES, RuleChange};
use crate::error::{FileError, Position, Problem};
use crate::options::LoadOptions;
use tree::{Node, Value};

/// The maps that find repeated keys and names: keyed by text from the
/// file, seeded per process.
pub(crate) type Map<K, V> = std::collections::HashMap<K, V, foldhash::quality::RandomState>;

/// The most problems listed for one file; a file with more is mostly not a
/// rule file, and the first ones say so.
const MAX_PROBLEMS: usize = 200;

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
}

impl RuleFile {
    /// A file of `book` with `version`, tracking no percentiles.
    pub fn new(version: Option<String>, book: RuleBook) -> Self {
        RuleFile {
            version,
            book,
            track_percentiles: Vec::new(),
        }
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
            return Ok(RuleFile::default());
        }
        let message = "the file is empty (no rules); an empty file is refused \
                       unless LoadOptions::allow_empty is set";
        problems.push(Problem::new(None, message));
        return Err(FileError::new(file, problems));
    };
    let rule_file = document(&root, options.get_max_name_len(), &mut problems);
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

fn document(root: &Node<'_>, max_name_len: usize, problems: &mut Vec<Problem>) -> RuleFile {
    let mut file = RuleFile::default();
    let Value::Map(entries) = &root.value else {
        problems.push(Problem::new(
            Some(root.pos),
            format!(
                "a rule file is a mapping with keys version, {}, track_percentiles; got {}",
                KIND_NAMES.join(", "),
                root.value.describe()
            ),
        ));
        return file;
    };
    let mut seen: Map<&str, Position> = Map::default();
    let kinds = KIND_NAMES.join(", ");
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
                    change.move_into(&mut file.book);
                }
            }
            other => problems.push(Problem::new(
                Some(key.pos),
                format!("unknown key {other:?} (known: version, {kinds}, track_percentiles)"),
            )),
        }
    }
    file
}
