//! The `track_percentiles` key: the resources whose response-time
//! percentiles the file turns on.

use super::Map;
use super::scalar::{Scalar, resolve};
use super::tree::{Node, Value};
use crate::error::{Position, Problem};

/// The resource names of a `track_percentiles` value: a list of non-empty
/// strings of at most `max_name_len` bytes, each once.
pub(crate) fn names(
    value: &Node<'_>,
    max_name_len: usize,
    problems: &mut Vec<Problem>,
) -> Vec<String> {
    let items = match &value.value {
        Value::Seq(items) => items,
        Value::Invalid => return Vec::new(),
        Value::Scalar { text, plain } if resolve(text, *plain) == Scalar::Null => {
            return Vec::new();
        }
        other => {
            problems.push(Problem::new(
                Some(value.pos),
                format!(
                    "track_percentiles must be a list of resource names, got {}",
                    other.describe()
                ),
            ));
            return Vec::new();
        }
    };
    let mut names: Vec<String> = Vec::new();
    let mut seen: Map<&str, Position> = Map::default();
    for (i, item) in items.iter().enumerate() {
        let problem = |message: String| Problem {
            field: Some(format!("track_percentiles[{i}]")),
            ..Problem::new(Some(item.pos), message)
        };
        let name = match &item.value {
            Value::Invalid => continue,
            Value::Scalar { text, plain } => match resolve(text, *plain) {
                Scalar::Null => None,
                _ if text.is_empty() => None,
                _ => Some(text),
            },
            _ => None,
        };
        let Some(name) = name else {
            problems.push(problem(format!(
                "must be a resource name (a non-empty string), got {}",
                match &item.value {
                    Value::Scalar { text, .. } if text.is_empty() => "an empty string".into(),
                    other => other.describe(),
                }
            )));
            continue;
        };
        if name.len() > max_name_len {
            problems.push(problem(format!(
                "is {} bytes long, over the limit of {max_name_len} (max_name_len)",
                name.len()
            )));
            continue;
        }
        if let Some(first) = seen.get(name.as_ref()) {
            problems.push(problem(format!(
                "lists {name:?} twice (first at {}:{})",
                first.line, first.column
            )));
            continue;
        }
        seen.insert(name, item.pos);
        names.push(name.to_string());
    }
    names
}
