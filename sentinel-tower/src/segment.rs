//! Path segments: which look like identifiers, and finding the marked
//! ones (shared by path cleaning, in `name.rs`, and the index keys, in
//! `key.rs`).

/// The first segment of `path` that looks like an identifier: its start
/// and end. One pass over the bytes: a segment is looked at only when it
/// starts with a hex digit (every identifier does), the others are
/// skipped to their `/`.
#[inline]
pub(crate) fn first_id(path: &str) -> Option<(usize, usize)> {
    next_id(path.as_bytes(), 0)
}

/// The first segment of `path` from `start` on (a segment's start) that
/// looks like an identifier: its start and end.
#[inline(always)]
pub(crate) fn next_id(path: &[u8], start: usize) -> Option<(usize, usize)> {
    next_marked(path, start, |first| first.is_ascii_hexdigit(), is_id)
}

/// Whether a path segment looks like an identifier: all digits, a UUID,
/// or a hex string of 16 characters or more.
pub(crate) fn is_id(bytes: &[u8]) -> bool {
    if bytes.is_empty() {
        return false;
    }
    if bytes.iter().all(u8::is_ascii_digit) {
        return true;
    }
    let is_uuid = bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    is_uuid || (bytes.len() >= 16 && bytes.iter().all(u8::is_ascii_hexdigit))
}

/// The first segment of `text` (between `/`s, or an end) from `start` on
/// (a segment's start) that `marked` picks, among those whose first byte
/// is a `candidate` (the others are only skipped to their `/`): its start
/// and end. An empty segment is never picked.
#[inline(always)]
pub(crate) fn next_marked(
    text: &[u8],
    mut start: usize,
    candidate: impl Fn(u8) -> bool,
    marked: impl Fn(&[u8]) -> bool,
) -> Option<(usize, usize)> {
    while start < text.len() {
        let end = text[start..]
            .iter()
            .position(|b| *b == b'/')
            .map_or(text.len(), |i| start + i);
        if candidate(text[start]) && marked(&text[start..end]) {
            return Some((start, end));
        }
        start = end + 1;
    }
    None
}
