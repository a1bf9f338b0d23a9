//! A small YAML tree that keeps the position of every node, built from the
//! parser's events with a cap on nesting and no anchors or aliases.

use std::borrow::Cow;

use saphyr_parser::input::SkipTabs;
use saphyr_parser::{Event, Input, Marker, Parser, StrInput};

use crate::error::{Position, Problem};

/// A node of the document and where it starts.
#[derive(Debug)]
pub(crate) struct Node<'t> {
    pub(crate) pos: Position,
    pub(crate) value: Value<'t>,
}

#[derive(Debug)]
pub(crate) enum Value<'t> {
    /// A scalar's text; `plain` when unquoted (only plain scalars are
    /// numbers, booleans or null). Borrowed from the file's text where
    /// it is written out whole there.
    Scalar {
        text: Cow<'t, str>,
        plain: bool,
    },
    Seq(Vec<Node<'t>>),
    Map(Vec<(Node<'t>, Node<'t>)>),
    /// An alias, already reported: skipped without further complaint.
    Invalid,
}

impl Value<'_> {
    /// What the node is, for "expected X, got Y" messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Value::Scalar { text, plain: true } => match super::scalar::resolve(text, true) {
                super::scalar::Scalar::Str(s) => format!("{s:?}"),
                _ => text.to_string(),
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

/// The parser's input: the text as a `str`, scanned in chunks of at most
/// [`CHUNK`] characters. A plain scalar's buffer is reserved a chunk ahead
/// of its first character; with the `str` input's own chunk (128) every
/// scalar's 32-byte buffer was reallocated at once, with this one a scalar
/// of up to 31 bytes keeps its first allocation. Every other method is the
/// `str` input's own.
struct Text<'a>(StrInput<'a>);

/// The chunk of [`Text`]: a plain scalar's first allocation (32 bytes)
/// holds its first character and a chunk.
const CHUNK: usize = 31;

impl Input for Text<'_> {
    #[inline]
    fn bufmaxlen(&self) -> usize {
        CHUNK
    }

    #[inline]
    fn lookahead(&mut self, count: usize) {
        self.0.lookahead(count)
    }

    #[inline]
    fn buflen(&self) -> usize {
        self.0.buflen()
    }

    #[inline]
    fn buf_is_empty(&self) -> bool {
        self.0.buf_is_empty()
    }

    #[inline]
    fn raw_read_ch(&mut self) -> char {
        self.0.raw_read_ch()
    }

    #[inline]
    fn raw_read_non_breakz_ch(&mut self) -> Option<char> {
        self.0.raw_read_non_breakz_ch()
    }

    #[inline]
    fn skip(&mut self) {
        self.0.skip()
    }

    #[inline]
    fn skip_n(&mut self, count: usize) {
        self.0.skip_n(count)
    }

    #[inline]
    fn peek(&self) -> char {
        self.0.peek()
    }

    #[inline]
    fn peek_nth(&self, n: usize) -> char {
        self.0.peek_nth(n)
    }

    #[inline]
    fn look_ch(&mut self) -> char {
        self.0.look_ch()
    }

    #[inline]
    fn next_char_is(&self, c: char) -> bool {
        self.0.next_char_is(c)
    }

    #[inline]
    fn nth_char_is(&self, n: usize, c: char) -> bool {
        self.0.nth_char_is(n, c)
    }

    #[inline]
    fn next_2_are(&self, c1: char, c2: char) -> bool {
        self.0.next_2_are(c1, c2)
    }

    #[inline]
    fn next_3_are(&self, c1: char, c2: char, c3: char) -> bool {
        self.0.next_3_are(c1, c2, c3)
    }

    #[inline]
    fn next_is_document_indicator(&self) -> bool {
        self.0.next_is_document_indicator()
    }

    #[inline]
    fn next_is_document_start(&self) -> bool {
        self.0.next_is_document_start()
    }

    #[inline]
    fn next_is_document_end(&self) -> bool {
        self.0.next_is_document_end()
    }

    #[inline]
    fn skip_ws_to_eol(&mut self, skip_tabs: SkipTabs) -> (usize, Result<SkipTabs, &'static str>) {
        self.0.skip_ws_to_eol(skip_tabs)
    }

    #[inline]
    fn next_can_be_plain_scalar(&self, in_flow: bool) -> bool {
        self.0.next_can_be_plain_scalar(in_flow)
    }

    #[inline]
    fn next_is_blank_or_break(&self) -> bool {
        self.0.next_is_blank_or_break()
    }

    #[inline]
    fn next_is_blank_or_breakz(&self) -> bool {
        self.0.next_is_blank_or_breakz()
    }

    #[inline]
    fn next_is_blank(&self) -> bool {
        self.0.next_is_blank()
    }

    #[inline]
    fn next_is_break(&self) -> bool {
        self.0.next_is_break()
    }

    #[inline]
    fn next_is_breakz(&self) -> bool {
        self.0.next_is_breakz()
    }

    #[inline]
    fn next_is_z(&self) -> bool {
        self.0.next_is_z()
    }

    #[inline]
    fn next_is_flow(&self) -> bool {
        self.0.next_is_flow()
    }

    #[inline]
    fn next_is_digit(&self) -> bool {
        self.0.next_is_digit()
    }

    #[inline]
    fn next_is_alpha(&self) -> bool {
        self.0.next_is_alpha()
    }

    #[inline]
    fn skip_while_non_breakz(&mut self) -> usize {
        self.0.skip_while_non_breakz()
    }

    #[inline]
    fn skip_while_blank(&mut self) -> usize {
        self.0.skip_while_blank()
    }

    #[inline]
    fn fetch_while_is_alpha(&mut self, out: &mut String) -> usize {
        self.0.fetch_while_is_alpha(out)
    }
}

enum Frame<'t> {
    Seq(Position, Vec<Node<'t>>),
    Map(Position, Vec<(Node<'t>, Node<'t>)>, Option<Node<'t>>),
}

/// A document's tree through the event parser (see `document::build`).
pub(crate) fn from_events<'t>(
    text: &'t str,
    max_depth: usize,
    problems: &mut Vec<Problem>,
) -> Result<Option<Node<'t>>, Problem> {
    let mut parser = Parser::new(Text(StrInput::new(text)));
    let mut stack: Vec<Frame<'t>> = Vec::new();
    let mut root: Option<Node<'t>> = None;
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
                        text: Cow::Owned(text.into_owned()),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event and span, or the error and its place, of `input`.
    fn events<T: Input>(mut parser: Parser<'_, T>) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(event) = parser.next_event() {
            match event {
                Ok((event, span)) => out.push(format!("{event:?} {span:?}")),
                Err(e) => {
                    out.push(format!("{e:?}"));
                    break;
                }
            }
        }
        out
    }

    #[test]
    fn the_chunked_input_scans_as_the_str_input_does() {
        let long = "x".repeat(300);
        let deep = " ".repeat(140);
        let cases = [
            format!("flow:\n  - {{resource: {long}, count: 1}}\n"),
            format!("a: {long} {long}\n  {long}\n\n  b c\n"),
            format!("k: |\n{deep}text\n{deep}more\n\n{deep}end\nnext: 1\n"),
            format!("k: >2\n  folded {long}\n   more\n"),
            format!("k: |\n{deep}a\n  b\n"),
            "a: b # comment\n\t\nc:\td\n- x\n".to_owned(),
            format!("\"{long}\\n\": '{long}''s'\n? {long}\n: [a, {long}, {{b: c}}]\n"),
            "- - - a: -1\n    b: 0x1F\n...\n--- x\n".to_owned(),
            format!("a: {long}:{long}\n{long}: 1\n"),
            "k: v\n  : bad\n\u{e9}\u{1f600}: {x: \u{e9}\u{1f600}}\n".to_owned(),
        ];
        for case in &cases {
            assert_eq!(
                events(Parser::new(Text(StrInput::new(case)))),
                events(Parser::new_from_str(case)),
                "{case:?}"
            );
        }
    }

    /// Files in the shapes rule files are written in, and around them.
    const SHAPES: &[&str] = &[
        "flow:\n  - {resource: GET:/api/v1/orders/1, count: 101, grade: qps}\n  - {resource: b, count: 2.5}\n",
        "flow:\n- resource: a\n  count: 1\n  limit_app: app-1\n- resource: b c\n  count: -1e3\ndegrade: []\n",
        "# rules\nversion: 3\n\nflow:\n  - resource: r\n    count: 1\n    cluster_config: {flow_id: 7, threshold_type: global}\n\n# end\n",
        "param_flow:\n  - resource: r\n    param_idx: 0\n    param_flow_item_list:\n      - {value: 1, count: 1}\n      - {value: x, count: 2}\ntrack_percentiles: [a, b/c, d.e]\n",
        "a:\n  b:\n    c: [1, [2, {d: e}], {}]\n    f: {}\n  g: ~\nh: .inf\n",
        "- a\n- b: c\n  d: e\n-   f: g\n- [x]\n",
        "k: v\nk: w\n",
    ];

    /// The tree's nodes and positions, for comparing two builds.
    fn shape(root: &Option<Node<'_>>) -> String {
        format!("{root:?}")
    }

    /// Where the direct reader takes `text`, its tree is the event
    /// parser's, position for position.
    fn check(text: &str, max_depth: usize) -> bool {
        let Some(fast) = super::super::fast::build(text, max_depth) else {
            return false;
        };
        let mut problems = Vec::new();
        let slow = from_events(text, max_depth, &mut problems);
        assert!(problems.is_empty(), "{text:?}: {problems:?}");
        let slow = slow.unwrap_or_else(|e| panic!("{text:?}: {e:?}"));
        assert_eq!(shape(&Some(fast)), shape(&slow), "{text:?}");
        true
    }

    #[test]
    fn the_direct_reader_builds_the_event_parsers_tree() {
        for text in SHAPES {
            assert!(check(text, 64), "not read directly: {text:?}");
        }
        // Too deep for the limit: left to the event parser, which says so.
        assert!(!check(SHAPES[4], 5));
        assert!(from_events(SHAPES[4], 5, &mut Vec::new()).is_err());
        assert!(check(SHAPES[4], 6));
    }

    #[test]
    fn the_direct_reader_agrees_with_the_event_parser_on_mutated_files() {
        const BYTES: &[u8] = b" \n-:{}[],#ab1.\t'\"&*!?|>~_/\r\0";
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = |bound: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % bound as u64) as usize
        };
        let mut taken = 0;
        for round in 0..20_000 {
            let mut text = SHAPES[round % SHAPES.len()].as_bytes().to_vec();
            for _ in 0..1 + next(3) {
                let at = next(text.len() + 1);
                let byte = BYTES[next(BYTES.len())];
                match next(3) {
                    0 => text.insert(at, byte),
                    1 if at < text.len() => {
                        text.remove(at);
                    }
                    _ if at < text.len() => text[at] = byte,
                    _ => text.push(byte),
                }
            }
            let Ok(text) = String::from_utf8(text) else {
                continue;
            };
            taken += usize::from(check(&text, 64));
        }
        assert!(taken > 1_000, "{taken} mutated files read directly");
    }
}
