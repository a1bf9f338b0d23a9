//! `FileError`: every problem of a rule file, each with its position.

use std::fmt;

/// Where in a file: 1-based line and column (columns count characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    /// The line, from 1.
    pub line: usize,
    /// The column, from 1.
    pub column: usize,
}

/// The rule a problem is about: `flow[2] (GET:/orders)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleRef {
    /// The rule kind, as the file's top-level key: `flow`, `degrade`, ...
    pub kind: &'static str,
    /// The rule's position in its list, from 0.
    pub index: usize,
    /// Its resource, when the rule names one.
    pub resource: Option<String>,
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]", self.kind, self.index)?;
        match &self.resource {
            Some(resource) if resource.len() > SHOWN_RESOURCE_BYTES => {
                // A name over the length limit may be megabytes long.
                let mut end = SHOWN_RESOURCE_BYTES;
                while !resource.is_char_boundary(end) {
                    end -= 1;
                }
                write!(f, " ({}... {} bytes)", &resource[..end], resource.len())
            }
            Some(resource) if !resource.is_empty() => write!(f, " ({resource})"),
            _ => Ok(()),
        }
    }
}

/// The most of a resource name an error line shows.
const SHOWN_RESOURCE_BYTES: usize = 128;

/// One problem of a file. `Display` gives the whole line, without the file
/// name: `14:12: flow[2] (GET:/orders): count must be a finite number >= 0, got -5`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// Where: the offending value, or the rule when a field is missing;
    /// `None` for problems of the file as a whole (unreadable, too large).
    pub position: Option<Position>,
    /// The rule, when the problem is inside one.
    pub rule: Option<RuleRef>,
    /// The field, when the problem is about one (`count`,
    /// `param_flow_item_list[1].value`).
    pub field: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl Problem {
    pub(crate) fn new(position: Option<Position>, message: impl Into<String>) -> Self {
        Problem {
            position,
            rule: None,
            field: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(Position { line, column }) = self.position {
            write!(f, "{line}:{column}: ")?;
        }
        if let Some(rule) = &self.rule {
            write!(f, "{rule}: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "{field} ")?;
        }
        f.write_str(&self.message)
    }
}

/// A rule file that was not loaded, with every problem found in it. The
/// rules in force are unchanged.
///
/// `Display` gives one line per problem, in file order:
/// `rules.yaml:14:12: flow[2] (GET:/orders): count must be a finite number >= 0, got -5`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct FileError {
    file: String,
    problems: Vec<Problem>,
}

impl FileError {
    pub(crate) fn new(file: &str, problems: Vec<Problem>) -> Self {
        FileError {
            file: file.to_owned(),
            problems,
        }
    }

    pub(crate) fn one(file: &str, position: Option<Position>, message: impl Into<String>) -> Self {
        FileError::new(file, vec![Problem::new(position, message)])
    }

    /// The file's name as given (a path, or the name passed to
    /// [`parse_str`](crate::parse_str)).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// The problems, in file order (problems of the whole file first).
    pub fn problems(&self) -> &[Problem] {
        &self.problems
    }

    /// Each problem as one line, `file:line:column: ...`.
    pub fn lines(&self) -> Vec<String> {
        self.problems
            .iter()
            .map(|p| match p.position {
                Some(_) => format!("{}:{p}", self.file),
                None => format!("{}: {p}", self.file),
            })
            .collect()
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, line) in self.lines().iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            f.write_str(line)?;
        }
        Ok(())
    }
}
