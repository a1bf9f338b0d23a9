//! Finding a kind's top-level section in the file's text and putting new
//! text in its place, everything else kept byte for byte.

use crate::parse::document;
use crate::parse::tree::Value;

/// The top-level keys of a file and the line each starts on, when the file
/// is a block mapping whose keys each begin a line (the layout every rule
/// file in the README has). `None` for any other layout (a flow mapping
/// `{flow: [...]}`), whose sections cannot be cut out by lines.
pub(crate) struct Layout {
    keys: Vec<(String, usize)>,
}

impl Layout {
    /// `Err` is the file's fatal syntax problem; the caller reports the
    /// file's own parse errors instead.
    pub(crate) fn of(text: &str, max_depth: usize) -> Result<Option<Layout>, ()> {
        let root = document::build(text, max_depth, &mut Vec::new()).map_err(|_| ())?;
        let entries = match root.map(|root| root.value) {
            None => return Ok(Some(Layout { keys: Vec::new() })),
            Some(Value::Map(entries)) => entries,
            Some(Value::Scalar { text, plain: true }) if is_null(&text) => {
                return Ok(Some(Layout { keys: Vec::new() }));
            }
            Some(_) => return Ok(None),
        };
        let lines: Vec<&str> = text.split('\n').collect();
        let mut keys: Vec<(String, usize)> = Vec::new();
        for (key, _) in entries {
            let Value::Scalar { text: name, .. } = key.value else {
                return Ok(None);
            };
            let line = key.pos.line;
            let starts_line = key.pos.column == 1
                && line
                    .checked_sub(1)
                    .and_then(|i| lines.get(i))
                    .is_some_and(|l| !l.starts_with(['{', ',', '[']));
            let after = keys.last().is_none_or(|(_, last)| *last < line);
            if !starts_line || !after {
                return Ok(None);
            }
            keys.push((name.into_owned(), line));
        }
        Ok(Some(Layout { keys }))
    }

    /// The 1-based lines `[first, end)` of `kind`'s section: from its key to
    /// the last line of its content, leaving out the blank and comment
    /// lines before the next key (they usually introduce that key).
    pub(crate) fn section(&self, text: &str, kind: &str) -> Option<(usize, usize)> {
        let at = self.keys.iter().position(|(name, _)| name == kind)?;
        let first = self.keys[at].1;
        let lines: Vec<&str> = text.lines().collect();
        let mut end = self.keys.get(at + 1).map_or(lines.len() + 1, |(_, l)| *l);
        while end - 1 > first {
            let line = lines.get(end - 2).map_or("", |l| l.trim());
            if line.is_empty() || line.starts_with('#') || line == "..." {
                end -= 1;
            } else {
                break;
            }
        }
        Some((first, end))
    }
}

fn is_null(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// A file's text with one section replaced (or appended), and how its
/// lines map back to the old file's.
pub(crate) struct Spliced {
    pub(crate) text: String,
    /// The new section's lines in the new text, `[first, end)`.
    first: usize,
    end: usize,
    /// Lines after the section moved by this much.
    shift: isize,
}

impl Spliced {
    /// `section` in place of lines `[first, end)` of `text`, or after the
    /// end of it when `lines` is `None`.
    pub(crate) fn new(text: &str, lines: Option<(usize, usize)>, section: &str) -> Spliced {
        let offset = |line: usize| -> usize {
            if line <= 1 {
                return 0;
            }
            text.match_indices('\n')
                .nth(line - 2)
                .map_or(text.len(), |(i, _)| i + 1)
        };
        let (start, stop, lead) = match lines {
            Some((first, end)) => (offset(first), offset(end), ""),
            None if text.trim().is_empty() => (0, text.len(), ""),
            None if text.ends_with("\n\n") => (text.len(), text.len(), ""),
            None if text.ends_with('\n') => (text.len(), text.len(), "\n"),
            None => (text.len(), text.len(), "\n\n"),
        };
        let mut out = String::with_capacity(text.len() + section.len() + 2);
        out.push_str(&text[..start]);
        out.push_str(lead);
        out.push_str(section);
        out.push_str(&text[stop..]);
        let first = 1 + out[..start + lead.len()].matches('\n').count();
        let added = section.matches('\n').count();
        let removed = text[start..stop].matches('\n').count() + lead.matches('\n').count();
        Spliced {
            text: out,
            first,
            end: first + added,
            shift: added as isize - removed as isize,
        }
    }

    /// The old file's line for `line` of the new text, `None` inside the
    /// new section.
    pub(crate) fn old_line(&self, line: usize) -> Option<usize> {
        if line < self.first {
            Some(line)
        } else if line < self.end {
            None
        } else {
            usize::try_from(line as isize - self.shift).ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# head\nversion: 1\n\nflow:\n  # inner\n  - {resource: a, count: 1}\n\n# about degrade\ndegrade: []\n";

    #[test]
    fn section_stops_before_the_next_keys_comments() {
        let layout = Layout::of(FILE, 16).unwrap().unwrap();
        assert_eq!(layout.section(FILE, "flow"), Some((4, 7)));
        assert_eq!(layout.section(FILE, "degrade"), Some((9, 10)));
        assert_eq!(layout.section(FILE, "system"), None);
        let spliced = Spliced::new(FILE, layout.section(FILE, "flow"), "flow: []\n");
        assert_eq!(
            spliced.text,
            "# head\nversion: 1\n\nflow: []\n\n# about degrade\ndegrade: []\n"
        );
        assert_eq!(spliced.old_line(2), Some(2));
        assert_eq!(spliced.old_line(4), None);
        assert_eq!(spliced.old_line(7), Some(9));
    }

    #[test]
    fn appended_after_a_blank_line() {
        let spliced = Spliced::new("version: 1", None, "flow: []\n");
        assert_eq!(spliced.text, "version: 1\n\nflow: []\n");
        assert_eq!(spliced.old_line(3), None);
        assert!(Layout::of("{flow: []}", 16).unwrap().is_none());
    }
}
