//! A direct reader of the plain YAML that rule files are written in: block
//! mappings and sequences, one-line flow mappings and lists, plain scalars
//! of the usual characters, comment lines. It builds the same tree as the
//! event parser, node for node and position for position, at a fraction of
//! its cost; on anything else (quotes, multi-line scalars, anchors, tags,
//! comments after content, tabs, non-ASCII text, any error) it gives up,
//! and the file goes through the event parser, which has the last word.

use std::borrow::Cow;

use super::tree::{Node, Value};
use crate::error::Position;

/// Keys longer than this go through the event parser (a simple key is
/// limited to 1024 characters there).
const MAX_KEY: usize = 1000;

/// The root of `text` read by the direct reader, `None` when the text is
/// outside what it reads (or empty).
pub(crate) fn build(text: &str, max_depth: usize) -> Option<Node<'_>> {
    let mut reader = Reader {
        source: text,
        text: text.as_bytes(),
        at: 0,
        line: 1,
        line_start: 0,
        max_depth,
    };
    let indent = reader.next_content_line()?;
    if indent != 0 {
        return None;
    }
    let root = reader.block(0, 0)?;
    // Everything was read: the next content line would have been its.
    (reader.at >= reader.text.len()).then_some(root)
}

struct Reader<'t> {
    /// The text read, whose bytes are `text`: a scalar is a slice of it.
    source: &'t str,
    text: &'t [u8],
    /// The byte read next.
    at: usize,
    /// The line of `at`, from 1.
    line: usize,
    /// Where that line starts.
    line_start: usize,
    max_depth: usize,
}

impl<'t> Reader<'t> {
    fn peek(&self) -> u8 {
        self.text.get(self.at).copied().unwrap_or(0)
    }

    fn peek_at(&self, n: usize) -> u8 {
        self.text.get(self.at + n).copied().unwrap_or(0)
    }

    fn pos(&self) -> Position {
        Position {
            line: self.line,
            column: self.at - self.line_start + 1,
        }
    }

    fn column(&self) -> usize {
        self.at - self.line_start
    }

    fn skip_spaces(&mut self) {
        while self.peek() == b' ' {
            self.at += 1;
        }
    }

    /// Skips blank and comment lines up to the next line with content, at
    /// its first character; its indent, `None` at the end of the text or
    /// on a line the reader does not take.
    fn next_content_line(&mut self) -> Option<usize> {
        loop {
            self.skip_spaces();
            match self.peek() {
                0 if self.at >= self.text.len() => return None,
                b'\n' => self.new_line(),
                b'#' => {
                    while !matches!(self.peek(), b'\n' | 0) {
                        // Comment text of printable ASCII only: a CR would
                        // break the line there.
                        if !(0x20..0x7f).contains(&self.peek()) {
                            return Some(usize::MAX);
                        }
                        self.at += 1;
                    }
                    if self.at >= self.text.len() {
                        return None;
                    }
                    if self.peek() == 0 {
                        return Some(usize::MAX);
                    }
                    self.new_line();
                }
                _ => {
                    let column = self.column();
                    let rest = &self.text[self.at..];
                    if column == 0 && (rest.starts_with(b"---") || rest.starts_with(b"...")) {
                        return Some(usize::MAX);
                    }
                    return Some(column);
                }
            }
        }
    }

    fn new_line(&mut self) {
        self.at += 1;
        self.line += 1;
        self.line_start = self.at;
    }

    /// The end of an inline value's line: spaces, then a line break or
    /// the end of the text; moves to the next content line and returns its
    /// indent (`None` at the end).
    fn end_of_line(&mut self) -> Result<Option<usize>, ()> {
        self.skip_spaces();
        match self.peek() {
            b'\n' => {
                self.new_line();
                Ok(self.next_content_line())
            }
            0 if self.at >= self.text.len() => Ok(None),
            _ => Err(()),
        }
    }

    /// A block node starting here (at its first character), at column
    /// `column`; `depth` collections enclose it. Leaves the reader at the
    /// next content line it does not take.
    fn block(&mut self, column: usize, depth: usize) -> Option<Node<'t>> {
        if self.peek() == b'-' && matches!(self.peek_at(1), b' ') {
            self.sequence(column, depth, false)
        } else {
            self.mapping(column, depth)
        }
    }

    fn sequence(&mut self, column: usize, depth: usize, indentless: bool) -> Option<Node<'t>> {
        if depth >= self.max_depth {
            return None;
        }
        // A sequence starts at its "-", one at its key's column at its
        // first item (as the event parser places them).
        let mut pos = self.pos();
        let mut items = Vec::new();
        loop {
            // At "- ".
            self.at += 1;
            self.skip_spaces();
            if indentless && items.is_empty() {
                pos = self.pos();
            }
            let item_column = self.column();
            let next = match self.peek() {
                b'{' | b'[' => {
                    items.push(self.flow(depth + 1)?);
                    self.end_of_line().ok()?
                }
                _ => {
                    let save = (self.at, self.line, self.line_start);
                    let scalar = self.scalar(false)?;
                    if self.peek() == b':' && matches!(self.peek_at(1), b' ' | b'\n' | 0) {
                        (self.at, self.line, self.line_start) = save;
                        items.push(self.mapping(item_column, depth + 1)?);
                        self.indent_here()
                    } else {
                        items.push(scalar);
                        self.end_of_line().ok()?
                    }
                }
            };
            match next {
                Some(indent) if indent == column => {
                    if self.peek() == b'-' && self.peek_at(1) == b' ' {
                        continue;
                    }
                    if !indentless {
                        return None;
                    }
                    break;
                }
                Some(indent) if indent < column => break,
                None => break,
                Some(_) => return None,
            }
        }
        Some(Node {
            pos,
            value: Value::Seq(items),
        })
    }

    /// The indent of the content line the reader is at (`None` at the
    /// end), after a block collection.
    fn indent_here(&self) -> Option<usize> {
        (self.at < self.text.len()).then(|| self.column())
    }

    fn mapping(&mut self, column: usize, depth: usize) -> Option<Node<'t>> {
        if depth >= self.max_depth {
            return None;
        }
        let pos = self.pos();
        let mut entries = Vec::new();
        loop {
            let key_start = self.at;
            let key = self.scalar(false)?;
            if self.at - key_start > MAX_KEY || self.peek() != b':' {
                return None;
            }
            self.at += 1;
            let value;
            let next;
            match self.peek() {
                b' ' => {
                    self.skip_spaces();
                    match self.peek() {
                        b'\n' | 0 => {
                            (value, next) = self.nested(column, depth)?;
                        }
                        b'{' | b'[' => {
                            value = self.flow(depth + 1)?;
                            next = self.end_of_line().ok()?;
                        }
                        _ => {
                            value = self.scalar(false)?;
                            next = self.end_of_line().ok()?;
                        }
                    }
                }
                b'\n' | 0 => (value, next) = self.nested(column, depth)?,
                _ => return None,
            }
            entries.push((key, value));
            match next {
                Some(indent) if indent == column => {
                    if self.peek() == b'-' {
                        return None;
                    }
                }
                Some(indent) if indent < column => break,
                None => break,
                Some(_) => return None,
            }
        }
        Some(Node {
            pos,
            value: Value::Map(entries),
        })
    }

    /// The value of a key with nothing after its `:` on its line: a block
    /// collection on the next lines (more indented, or a sequence at the
    /// key's column). With the indent of the line after it.
    fn nested(&mut self, column: usize, depth: usize) -> Option<(Node<'t>, Option<usize>)> {
        // Nothing below (the end, or a line less indented): a null, left
        // to the event parser.
        let indent = self.end_of_line().ok()??;
        if indent == usize::MAX {
            return None;
        }
        let value = if indent > column {
            self.block(indent, depth + 1)?
        } else if indent == column && self.peek() == b'-' && self.peek_at(1) == b' ' {
            self.sequence(column, depth + 1, true)?
        } else {
            return None;
        };
        Some((value, self.indent_here()))
    }

    /// A one-line flow mapping or list, at its `{` or `[`.
    fn flow(&mut self, depth: usize) -> Option<Node<'t>> {
        if depth >= self.max_depth {
            return None;
        }
        let pos = self.pos();
        let open = self.peek();
        let close = if open == b'{' { b'}' } else { b']' };
        self.at += 1;
        self.skip_spaces();
        let mut entries = Vec::new();
        let mut items = Vec::new();
        if self.peek() != close {
            loop {
                let node = match self.peek() {
                    b'{' | b'[' => self.flow(depth + 1)?,
                    _ => self.scalar(true)?,
                };
                if open == b'{' {
                    if !matches!(node.value, Value::Scalar { .. })
                        || self.peek() != b':'
                        || self.peek_at(1) != b' '
                    {
                        return None;
                    }
                    self.at += 1;
                    self.skip_spaces();
                    let value = match self.peek() {
                        b'{' | b'[' => self.flow(depth + 1)?,
                        _ => self.scalar(true)?,
                    };
                    entries.push((node, value));
                } else {
                    items.push(node);
                }
                self.skip_spaces();
                match self.peek() {
                    b',' => {
                        self.at += 1;
                        self.skip_spaces();
                        if matches!(self.peek(), b'}' | b']' | b',') {
                            return None;
                        }
                    }
                    c if c == close => break,
                    _ => return None,
                }
            }
        }
        self.at += 1;
        let value = match open {
            b'{' => Value::Map(entries),
            _ => Value::Seq(items),
        };
        Some(Node { pos, value })
    }

    /// A plain scalar of the usual characters, on one line; stops before
    /// its trailing spaces and before a `:` that ends it.
    fn scalar(&mut self, in_flow: bool) -> Option<Node<'t>> {
        let pos = self.pos();
        let start = self.at;
        let first = self.peek();
        let starts = first.is_ascii_alphanumeric()
            || matches!(first, b'_' | b'.' | b'/' | b'+' | b'~' | b'$')
            || (first == b'-'
                && (self.peek_at(1).is_ascii_alphanumeric() || self.peek_at(1) == b'.'));
        if !starts {
            return None;
        }
        let mut end = self.at;
        loop {
            let c = self.peek();
            match c {
                c if c.is_ascii_alphanumeric() => {}
                b'_' | b'.' | b'/' | b'-' | b'+' | b'~' | b'@' | b'$' | b'=' => {}
                b':' => {
                    let after = self.peek_at(1);
                    if matches!(after, b' ' | b'\n' | 0)
                        || (in_flow && matches!(after, b',' | b'[' | b']' | b'{' | b'}'))
                    {
                        break;
                    }
                }
                b' ' => {
                    let mut next = self.at;
                    while self.text.get(next) == Some(&b' ') {
                        next += 1;
                    }
                    let after = self.text.get(next).copied().unwrap_or(0);
                    let more = after.is_ascii_alphanumeric()
                        || matches!(
                            after,
                            b'_' | b'.' | b'/' | b'-' | b'+' | b'~' | b'@' | b'$' | b'='
                        );
                    if !more {
                        break;
                    }
                    if in_flow && after == b'-' {
                        // "-" then a flow indicator is an error there.
                        return None;
                    }
                    self.at = next;
                    continue;
                }
                b'\n' | 0 => break,
                b',' | b']' | b'}' if in_flow => break,
                _ => return None,
            }
            self.at += 1;
            end = self.at;
        }
        self.at = end;
        // On character boundaries: every byte taken is ASCII.
        let text = self.source.get(start..end)?;
        Some(Node {
            pos,
            value: Value::Scalar {
                text: Cow::Borrowed(text),
                plain: true,
            },
        })
    }
}
