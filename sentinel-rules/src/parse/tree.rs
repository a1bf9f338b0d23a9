//! A small YAML tree that keeps the position of every node, built from the
//! parser's events with a cap on nesting and no anchors or aliases.

use saphyr_parser::{Event, Marker, Parser};

use crate::error::{Position, Problem};

/// A node of the document and where it starts.
#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) pos: Position,
    pub(crate) value: Value,
}

#[derive(Debug)]
pub(crate) enum Value {
    /// A scalar's text; `plain` when unquoted (only plain scalars are
    /// numbers, booleans or null).
    Scalar {
        text: String,
        plain: bool,
    },
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
    /// An alias, already reported: skipped without further complaint.
    Invalid,
}

impl Value {
    /// What the node is, for "expected X, got Y" messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Value::Scalar { text, plain: true } => match super::scalar::resolve(text, true) {
                super::scalar::Scalar::Str(s) => format!("{s:?}"),
                _ => text.clone(),
            },
            Value::Scalar { text, plain: false } => format!("the string {text:?}"),
            Value::Seq(_) => "a list".into(),
            Value::Map(_) => "a mapping".into(),
            Value::Invalid => "an alias".into(),
        }
    }
}

pub(crate) fn position(mark: &Marker) -> Position {
    Position {
        line: mark.line(),
        column: mark.col() + 1,
    }
}

enum Frame {
    Seq(Position, Vec<Node>),
    Map(Position, Vec<(Node, Node)>, Option<Node>),
}

/// The document's root node (`None` for a file with no content), with
/// problems that do not stop the build (anchors, aliases, tags) pushed to
/// `problems`. `Err` is a problem that stops it: a syntax error, nesting
/// deeper than `max_depth`, a second document.
pub(crate) fn build(
    text: &str,
    max_depth: usize,
    problems: &mut Vec<Problem>,
) -> Result<Option<Node>, Problem> {
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut root: Option<Node> = None;
    let mut documents = 0usize;
    while let Some(event) = parser.next_event() {
        let (event, span) =
            event.map_err(|e| Problem::new(Some(position(e.marker())), e.info().to_owned()))?;
        let pos = position(&span.start);
        let anchored = |anchor: usize, problems: &mut Vec<Problem>| {
            if anchor != 0 {
                problems.push(Problem::new(
                    Some(pos),
                    "anchors (&name) are not supported: write each value out",
                ));
            }
        };
        let tagged = |tag: bool, problems: &mut Vec<Problem>| {
            if tag {
                problems.push(Problem::new(
                    Some(pos),
                    "tags (!name) are not supported: write the plain value",
                ));
            }
        };
        let node = match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {
                continue;
            }
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(Problem::new(
                        Some(pos),
                        "a second YAML document (---): a rule file holds one",
                    ));
                }
                continue;
            }
            Event::Alias(_) => {
                problems.push(Problem::new(
                    Some(pos),
                    "aliases (*name) are not supported: they can expand a small file \
                     into a huge one; write each value out",
                ));
                Node {
                    pos,
                    value: Value::Invalid,
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                anchored(anchor, problems);
                tagged(tag.is_some(), problems);
                Node {
                    pos,
                    value: Value::Scalar {
                        text: text.into_owned(),
                        plain: style == saphyr_parser::ScalarStyle::Plain,
                    },
                }
            }
            Event::SequenceStart(ref anchor, ref tag)
            | Event::MappingStart(ref anchor, ref tag) => {
                if stack.len() >= max_depth {
                    return Err(Problem::new(
                        Some(pos),
                        format!("nesting deeper than {max_depth} levels is refused"),
                    ));
                }
                anchored(*anchor, problems);
                tagged(tag.is_some(), problems);
                stack.push(match event {
                    Event::SequenceStart(..) => Frame::Seq(pos, Vec::new()),
                    _ => Frame::Map(pos, Vec::new(), None),
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Frame::Seq(pos, items)) => Node {
                    pos,
                    value: Value::Seq(items),
                },
                Some(Frame::Map(pos, entries, _)) => Node {
                    pos,
                    value: Value::Map(entries),
                },
                None => return Err(Problem::new(Some(pos), "unbalanced YAML structure")),
            },
        };
        match stack.last_mut() {
            Some(Frame::Seq(_, items)) => items.push(node),
            Some(Frame::Map(_, entries, key)) => match key.take() {
                Some(k) => entries.push((k, node)),
                None => *key = Some(node),
            },
            None => root = Some(node),
        }
    }
    Ok(root)
}
